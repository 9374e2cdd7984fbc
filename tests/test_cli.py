"""CLI: the happy path on the demo corpus, and every bad input exits 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.reliability.io_checks import fail_line

from ragshield.cli import run
from ragshield.demo import demo_files


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "idx"
    corpus, _ = demo_files()
    assert run(["index", str(corpus), "--out", str(out)]) == 0
    return out


def test_index_and_ask(index_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (index_dir / "meta.json").is_file()
    from ragshield.defenses.canary import codes_in
    from ragshield.store.persist import load_store

    # the stored texts carry no canary marker unless --canaries asks (issue #26, Session 8)
    assert not any(codes_in(p.text) for p in load_store(index_dir).passages)
    capsys.readouterr()
    assert run(["ask", str(index_dir), "Who painted the Mona Lisa?", "--k", "3", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert "Leonardo" in payload["answer"]
    assert payload["passages"][0]["id"] == "mona-lisa"
    # no canary markers by default (--canaries opts in); a reader never sees them
    assert payload["passages"] and not any("[ref " in p["text"] for p in payload["passages"])


def test_filter_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "p.json"
    f.write_text(json.dumps(["Paris is the capital of France.", "Cats purr."]), encoding="utf-8")
    assert run(["filter", "capital of France", str(f), "--filter", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kept"] == ["0", "1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ask", "{idx}", ""], "question is empty"),
        (["ask", "{idx}", "q", "--k", "0"], "k must be"),
        (["ask", "{idx}", "q", "--k", "999"], "must be at most the number of passages"),
        (["ask", "{idx}", "q", "--filter", "nosuch"], "unknown defense 'nosuch'"),
        (["ask", "{tmp}", "q"], "not a ragshield index"),
        (["ask", "{idx}", "q", "--encoder", "/no/model"], "does not exist"),
        (["index", "{tmp}/missing.jsonl", "--out", "{tmp}/o"], "corpus not found"),
        (["index", "{tmp}/empty.jsonl", "--out", "{tmp}/o"], "is empty"),
        (["index", "{tmp}/bad.jsonl", "--out", "{tmp}/o"], "bad.jsonl:2: malformed JSON"),
        (["index", "{tmp}/latin.jsonl", "--out", "{tmp}/o"], "latin.jsonl:1: not valid UTF-8"),
        (["index", "{tmp}/bad.jsonl", "--out", "{tmp}/o", "--index-type", "lsh"], "--index-type"),
        (["filter", "", "{tmp}/bad.jsonl"], "query is empty"),
    ],
)
def test_bad_input_exit_2(
    index_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "bad.jsonl").write_text('{"text": "a"}\n{oops\n', encoding="utf-8")
    (tmp_path / "latin.jsonl").write_bytes(b'{"text": "caf\xe9"}\n')
    fail_line(capsys, [a.format(idx=index_dir, tmp=tmp_path) for a in args], message)
    assert not (tmp_path / "o").exists()  # nothing half-written


GENERATOR_HELP = (
    "Answer end to end with extractive, a packaged model name, a local model folder or "
    "openai:URL#MODEL."
)
DTYPE_HELP = "--dtype <str> LLM weights: float32, bfloat16 or auto (bf16 on AMX/AVX512-BF16 CPUs)."
SPLIT_HELP = "--split <str> dev (tune here), test (report here) or all"


@pytest.mark.parametrize(
    ("command", "texts"),
    [
        # ask always answers, so its help names the default (lost once, restored)
        (
            ["ask"],
            ["-g, --generator", "Answer with extractive (default), a packaged model", DTYPE_HELP],
        ),
        (["eval", "poisoning"], ["-g, --generator", GENERATOR_HELP, SPLIT_HELP]),
        (["eval", "retrieval"], [GENERATOR_HELP, "--context-k <int> Survivors that", SPLIT_HELP]),
        (["eval", "extraction"], [GENERATOR_HELP, "[default: extractive]", DTYPE_HELP]),
        (["scan"], [GENERATOR_HELP, "--k <int> Passages retrieved per question."]),
        (["index"], ["--ray-workers <int> Encoder actors when --ray is set."]),
        (["reindex"], ["--ray-workers <int> Encoder actors when --ray is set."]),
    ],
)
def test_shared_options_read_the_same_in_every_command(
    capsys: pytest.CaptureFixture[str], command: list[str], texts: list[str]
) -> None:
    """The option types of :mod:`ragshield.cli_options`: one help text wherever the flag is."""
    capsys.readouterr()
    assert run([*command, "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    for text in texts:
        assert text in shown


def test_usage_error_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["ask"]) == 2
    assert run(["--help"]) == 0


def test_eval_poisoning_command(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "eval",
        "poisoning",
        str(shared_data / "poisoning" / "nq"),
        "--defenses",
        "none;ragdefender",
    ]
    argv += ["--attacks", "poisonedrag", "--ratios", "1", "--seeds", "1", "--limit", "4"]
    assert run([*argv, "--out", str(tmp_path)]) == 0
    assert "| poisonedrag | 1× |" in capsys.readouterr().out
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {"results.md", "results.json", "asr.png", ".ragshield-eval"}
    assert run([*argv[:3], "--ratios", "one"]) == 2
