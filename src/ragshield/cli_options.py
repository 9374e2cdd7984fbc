"""Option types more than one ``ragshield`` command group declares, written once so the flag
and its help read the same in each (the huggingface_hub CLI's habit; see
:mod:`ragshield.eval.cli.options` for the ``eval`` commands' own)."""

from __future__ import annotations

from typing import Annotated

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
# every command resolves the spec through ragshield.generate.factory.make_generator, so one
# text names every form; what a generator adds to each command is in its docstring
GENERATOR_FORMS = "a packaged model name, a local model folder or openai:URL#MODEL"
GeneratorOpt = Annotated[
    str | None,
    typer.Option(
        "--generator", "-g", help=f"Answer end to end with extractive, {GENERATOR_FORMS}."
    ),
]
# `ragshield ask` always answers (extractive unless -g or its --config names another), so
# its help names the default
AskGeneratorOpt = Annotated[
    str | None,
    typer.Option("--generator", "-g", help=f"Answer with extractive (default), {GENERATOR_FORMS}."),
]
# `ragshield ask` and `ragshield eval extraction` load the same local engines
DtypeOpt = Annotated[
    str, typer.Option(help="LLM weights: float32, bfloat16 or auto (bf16 on AMX/AVX512-BF16 CPUs).")
]
# `ragshield eval retrieval` and `ragshield scan`: the same retrieval, the same two knobs
RetrievedKOpt = Annotated[int, typer.Option("--k", help="Passages retrieved per question.")]
ContextKOpt = Annotated[int, typer.Option(help="Survivors that reach the generator.")]
# `ragshield index --ray` and `ragshield reindex --ray` both spread the encoder over actors
EncoderActorsOpt = Annotated[int, typer.Option(help="Encoder actors when --ray is set.")]
