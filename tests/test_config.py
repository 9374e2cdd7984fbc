"""One pipeline recipe: PipelineConfig (file + flags), the defense registry's kinds, and
build_pipeline on a real index; the CLI's --config, --version and error printing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ragshield.cli import run
from ragshield.config import (
    PipelineConfig,
    build_pipeline,
    load_pipeline_config,
)
from ragshield.corpus import read_corpus
from ragshield.defenses import registry
from ragshield.demo import demo_files
from ragshield.errors import InputError
from ragshield.indexing import build_index
from ragshield.types import Passage

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def attacked_index(tmp_path_factory: pytest.TempPathFactory, encoder: Any) -> Path:
    """The demo corpus with its five planted passages (what `ragshield demo` indexes)."""
    corpus, attack_file = demo_files()
    attack = json.loads(attack_file.read_text(encoding="utf-8"))
    poison = [
        Passage(f"attack-{i}", t, "", {"adversarial": True})
        for i, t in enumerate(attack["adv_texts"])
    ]
    out = tmp_path_factory.mktemp("cfg") / "idx"
    build_index(read_corpus(corpus) + poison, out, encoder=encoder)
    return out


QUESTION = "What is the capital of Australia?"


# ---- the config -----------------------------------------------------------------------
class TestPipelineConfig:
    def test_file_paths_and_overrides(self, tmp_path: Path) -> None:
        f = tmp_path / "p.toml"
        f.write_text(
            'index = "idx"\ngenerator = "extractive"\n[retrieval]\nk = 7\ncontext_k = 3\n'
            '[defenses]\nchain = ["ragdefender", "ecosaferag"]\n'
            "[defenses.params]\necosaferag = { eps = 0.5 }\n",
            encoding="utf-8",
        )
        cfg = load_pipeline_config(f)
        assert cfg.index == tmp_path / "idx"  # relative to the file's folder
        assert (cfg.k, cfg.retrieval.context_k) == (7, 3)
        assert cfg.defenses.chain == ["ragdefender", "ecosaferag"]
        assert cfg.defenses.params == {"ecosaferag": {"eps": 0.5}}
        same = cfg.with_overrides(k=None, defenses=None, index=None)  # None = not given
        assert same == cfg
        flagged = cfg.with_overrides(k=12, defenses="none", generator_options={"x": 1})
        assert (flagged.k, flagged.defenses.chain, flagged.generator_options) == (12, [], {"x": 1})
        assert cfg.k == 7  # frozen: the original is unchanged
        with pytest.raises(Exception, match="frozen"):
            cfg.index = None  # type: ignore[misc]

    @pytest.mark.parametrize(
        ("text", "words"),
        [
            ('index = "x"\nbogus = 1\n', "p.toml: bogus: Extra inputs are not permitted"),
            ("[retrieval]\nk = 0\n", "p.toml: retrieval.k: k must be an integer >= 1. Got 0."),
            ("[retrieval]\nkk = 3\n", "p.toml: retrieval.kk: Extra inputs"),
            (
                '[defenses]\nchain = ["nosuch"]\n',
                "p.toml: defenses.chain: unknown defense 'nosuch'",
            ),
            ("[defenses.params]\nnosuch = {}\n", "defenses.params: unknown defense 'nosuch'"),
            ("index = \n", "not valid TOML"),
        ],
    )
    def test_bad_files_name_the_file_and_key(self, tmp_path: Path, text: str, words: str) -> None:
        f = tmp_path / "p.toml"
        f.write_text(text, encoding="utf-8")
        with pytest.raises(InputError) as info:
            load_pipeline_config(f)
        assert words in str(info.value)

    def test_bad_flags(self) -> None:
        with pytest.raises(InputError, match=r"command-line options: retrieval\.k: k must be"):
            PipelineConfig().with_overrides(k=0)
        with pytest.raises(InputError, match="unknown pipeline option"):
            PipelineConfig().with_overrides(kk=3)
        with pytest.raises(InputError, match="no index"):
            build_pipeline(PipelineConfig())

    def test_example_file_loads(self) -> None:
        cfg = load_pipeline_config(EXAMPLES / "pipeline.toml")
        assert cfg.defenses.chain == ["ragdefender", "ecosaferag"] and cfg.k == 10


# ---- the registry's kinds ---------------------------------------------------------------
class TestRegistryKinds:
    def test_ragfort_is_a_reindex_and_a_cascade(self) -> None:
        plan = registry.plan("ragdefender,ragfort")
        assert plan.filters == ("ragdefender",)
        assert plan.index == "ragfort-inter" and plan.wrappers == ("ragfort-intra",)
        assert registry.plan(["ragfort-reindex"]).index == "ragfort-inter"
        assert registry.plan(["ragfort-cascade"]).wrappers == ("ragfort-intra",)
        assert "ragfort" in registry.available() and "ragfort" not in registry.available("filter")

    def test_filter_api_still_builds_filters_and_refuses_other_kinds(self, encoder: Any) -> None:
        chain = registry.build_chain("ragdefender,ecosaferag", encoder)
        assert [f.name for f in chain.filters] == ["ragdefender", "ecosaferag"]
        with pytest.raises(InputError, match="'ragfort-inter' is an index transform"):
            registry.build_chain("ragfort", encoder)
        with pytest.raises(InputError, match="'ragfort-intra' is a generator wrapper"):
            registry.build_chain("ragdefender,ragfort-cascade", encoder)
        with pytest.raises(InputError, match="is a bundle of ragfort-inter, ragfort-intra"):
            registry.build_filter("ragfort")
        with pytest.raises(InputError, match="unknown defense 'nosuch'"):
            registry.build_filter("nosuch")

    def test_one_index_transform_per_pipeline(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(registry._REGISTRY, "other-index", registry.Entry("index", "x:y"))
        with pytest.raises(InputError, match="one index"):
            registry.plan("ragfort,other-index")

    def test_adapters_refuse_ragfort_with_a_reason(self) -> None:
        from ragshield.integrations import Shield

        with pytest.raises(InputError, match="framework adapter applies post-retrieval filters"):
            Shield("ragfort").warm_up()


# ---- building -----------------------------------------------------------------------------
class TestBuildPipeline:
    def test_defended_and_undefended_on_the_attacked_index(
        self, attacked_index: Path, encoder: Any
    ) -> None:
        cfg = load_pipeline_config(EXAMPLES / "pipeline.toml", index=str(attacked_index))
        defended = build_pipeline(cfg, encoder=encoder)
        assert [f.name for f in defended.chain.filters] == ["ragdefender", "ecosaferag"]
        assert "Canberra" in defended.answer(QUESTION, k=cfg.k).text
        bare = build_pipeline(cfg.with_overrides(defenses="none"), encoder=encoder)
        assert "Sydney" in bare.answer(QUESTION, k=cfg.k).text  # the attack works undefended

    def test_params_reach_the_defense(self, attacked_index: Path, encoder: Any) -> None:
        cfg = PipelineConfig.model_validate(
            {
                "index": attacked_index,
                "defenses": {"chain": ["ecosaferag"], "params": {"ecosaferag": {"eps": 0.5}}},
            }
        )
        rag = build_pipeline(cfg, encoder=encoder)
        assert rag.chain.filters[0].eps == 0.5  # type: ignore[attr-defined]

    def test_a_shared_encoder_must_be_the_indexs(self, attacked_index: Path) -> None:
        class Other:
            name = "some-other-model"
            dim = 384

        with pytest.raises(InputError, match="is not the one"):
            build_pipeline(PipelineConfig(index=attacked_index), encoder=Other())  # type: ignore[arg-type]

    def test_ragfort_inter_needs_a_reindex(self, attacked_index: Path) -> None:
        cfg = PipelineConfig(index=attacked_index).with_overrides(defenses="ragfort-inter")
        with pytest.raises(InputError, match="not a RAGFort re-index"):
            build_pipeline(cfg)

    def test_ragfort_intra_wraps_an_llm_only(self, attacked_index: Path, encoder: Any) -> None:
        cfg = PipelineConfig(index=attacked_index).with_overrides(defenses="ragfort-intra")
        with pytest.raises(InputError, match="wraps a local LLM"):
            build_pipeline(cfg, encoder=encoder)

    def test_ragfort_intra_makes_the_llm_the_reference(
        self, attacked_index: Path, encoder: Any
    ) -> None:
        """Built, not run: LLMs load on first use, so this needs no model weights."""
        from ragshield.generate.cascade import CascadeGenerator
        from ragshield.generate.factory import make_generator

        reference = make_generator("qwen2.5-1.5b")
        cfg = PipelineConfig.model_validate(
            {
                "index": attacked_index,
                "generator": "qwen2.5-1.5b",
                "generator_options": {"max_new_tokens": 32},
                "defenses": {
                    "chain": ["ragdefender", "ragfort-intra"],
                    "params": {"ragfort-intra": {"draft": "qwen2.5-0.5b", "gamma": 3}},
                },
            }
        )
        rag = build_pipeline(cfg, encoder=encoder, generator=reference)
        cascade = rag.generator
        assert isinstance(cascade, CascadeGenerator)
        assert cascade.reference is reference and cascade.gamma == 3
        assert cascade.max_new_tokens == 32  # the pipeline's generator options
        assert getattr(cascade.draft, "model", None) == "qwen2.5-0.5b"
        assert [f.name for f in rag.chain.filters] == ["ragdefender"]


# ---- the command line ---------------------------------------------------------------------
class TestCli:
    def test_ask_with_a_config_and_overriding_flags(
        self, attacked_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        f = tmp_path / "p.toml"
        f.write_text(
            f'index = "{attacked_index}"\n[retrieval]\nk = 10\ncontext_k = 5\n'
            '[defenses]\nchain = ["ragdefender"]\n',
            encoding="utf-8",
        )
        capsys.readouterr()
        assert run(["ask", "--config", str(f), QUESTION, "--json"]) == 0  # index from the file
        payload = json.loads(capsys.readouterr().out)
        assert "Canberra" in payload["answer"] and payload["removed"]
        assert run(["ask", "--config", str(f), QUESTION, "--filter", "none", "--json"]) == 0
        payload = json.loads(capsys.readouterr().out)
        assert "Sydney" in payload["answer"] and not payload["removed"]
        assert run(["ask", "--config", str(f), QUESTION, "--k", "3", "--json"]) == 0
        assert len(json.loads(capsys.readouterr().out)["passages"]) <= 3

    def test_version(self, capsys: pytest.CaptureFixture[str]) -> None:
        from importlib.metadata import version

        assert run(["--version"]) == 0
        assert capsys.readouterr().out.strip() == f"ragshield {version('ragshield')}"

    def test_errors_print_brackets_as_they_are(
        self, attacked_index: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        capsys.readouterr()
        assert run(["ask", str(attacked_index), "q", "--filter", "x[pg]"]) == 2
        assert "unknown defense 'x[pg]'" in " ".join(capsys.readouterr().err.split())

    def test_a_missing_extra_names_it(self) -> None:
        import typer
        from typer.testing import CliRunner

        from ragshield.cli import _missing_extra

        app = typer.Typer()
        _missing_extra(app, "serve", "server", ModuleNotFoundError("no uvicorn", name="uvicorn"))
        _missing_extra(app, "other", "server", ModuleNotFoundError("no x", name="x"))
        res = CliRunner().invoke(app, ["serve", "--config", "x.toml"])
        assert (
            'ragshield serve needs the server extra (uvicorn is not installed): pip install "ragshield[server]"'
            in str(res.exception)
        )

    def test_eval_plot_degrades_without_matplotlib(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        from ragshield.eval.cli.poisoning import plot_or_note

        monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
        assert plot_or_note(None, tmp_path / "asr.png") is False  # type: ignore[arg-type]
        err = capsys.readouterr().err
        assert "asr.png not drawn: matplotlib is not installed" in err and "[plots]" in err
        assert not (tmp_path / "asr.png").exists()
