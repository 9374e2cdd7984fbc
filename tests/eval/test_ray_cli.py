"""``--ray`` on the commands gives the in-process results (a real local Ray runtime).

One runtime (2 CPUs) serves the module; the commands find it already connected and reuse
it, as they would a cluster joined with ``--ray auto``. The two end-to-end comparisons are
marked slow (each trains or evaluates twice: about 15 and 25 s on a busy 2-core machine).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("ray", reason="the [ray] extra is not installed")

from ragshield.cli import app
from ragshield.corpus import read_corpus
from ragshield.demo import demo_files
from ragshield.errors import InputError
from ragshield.eval.extraction_plan import ExtractionPlan
from ragshield.eval.extraction_report import ExtractionReport, ExtractionRow
from ragshield.eval.parallel import (
    extraction_cells,
    merge_extraction_reports,
    slice_questions,
)
from ragshield.indexing import build_index
from ragshield.store.faiss_store import FaissStore


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    from ragshield.distributed import ray_runtime

    with ray_runtime("local", num_cpus=2) as ray:
        yield ray


def invoke(args: list[str]) -> str:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, f"{res.output}\n{res.exception!r}"
    return res.output


# ---- pure parts (no Ray) --------------------------------------------------------------
@pytest.mark.parametrize(
    ("n", "parts", "sizes"), [(4, 2, [2, 2]), (5, 2, [3, 2]), (2, 4, [1, 1]), (7, 1, [7])]
)
def test_slices_are_contiguous_and_cover_every_question(
    n: int, parts: int, sizes: list[int]
) -> None:
    spans = slice_questions(n, parts)
    assert [len(s) for s in spans] == sizes
    assert [i for s in spans for i in s] == list(range(n))


def _row(defense: str, attack: str) -> ExtractionRow:
    return ExtractionRow(defense, attack, 0.1, 1, 10, 0.5, 0.0, 0.9, 1.0, 3, 1, 0.2, "budget", 1, 2)


def test_extraction_cells_and_merge_keep_the_table_order() -> None:
    plan = ExtractionPlan(defenses=("none", "summarization"), attacks=("rag-thief", "worm"))
    cells = extraction_cells(plan, workers=4)  # fewer defenses than workers: one per cell
    assert [(c.defenses, c.attacks) for c in cells] == [
        (("none",), ("rag-thief",)),
        (("none",), ("worm",)),
        (("summarization",), ("rag-thief",)),
        (("summarization",), ("worm",)),
    ]
    assert [c.attacks for c in extraction_cells(plan, workers=2)] == [plan.attacks] * 2
    settings = {"generator": ["extractive"], "n_questions": 4}
    reports = [  # finished out of order
        ExtractionReport("kb", 10, 2, settings, [_row("summarization", "worm")]),
        ExtractionReport("kb", 10, 2, settings, [_row("none", "worm")]),
        ExtractionReport("kb", 10, 2, settings, [_row("none", "rag-thief")]),
        ExtractionReport("kb", 10, 2, settings, [_row("summarization", "rag-thief")]),
    ]
    merged = merge_extraction_reports(reports, plan.defenses, plan.attacks)
    assert [(r.defense, r.attack) for r in merged.rows] == [
        ("none", "rag-thief"),
        ("none", "worm"),
        ("summarization", "rag-thief"),
        ("summarization", "worm"),
    ]
    assert merged.settings["defenses"] == ["none", "summarization"]
    with pytest.raises(InputError, match="produced no row"):
        merge_extraction_reports(reports[:2], plan.defenses, plan.attacks)


RECORDS = [
    ("My ankle is swollen after I twisted it.", "Probably a sprain: rest, ice and an X-ray."),
    ("I am always thirsty and urinate at night.", "Classic signs of diabetes; test glucose."),
    ("My child has a fever and pulls at her ear.", "Likely an ear infection; give paracetamol."),
    ("I feel tired and my skin looks pale.", "Could be anaemia; a blood count will tell."),
    ("A dry cough for six weeks, worse lying down.", "Reflux or asthma; try an inhaler."),
]


def test_extraction_cells_reproduce_the_in_process_table(tmp_path: Path) -> None:
    """The worker function, run here cell by cell: merged, the cells give the table."""
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.crr import cluster_topics
    from ragshield.eval.extraction_plan import load_plan_knowledge, run_plan
    from ragshield.eval.parallel import extraction_cell

    kb = tmp_path / "kb.json"
    kb.write_text(json.dumps([{"input": q, "output": a} for q, a in RECORDS]), encoding="utf-8")
    plan = ExtractionPlan(
        kb=str(kb), limit=None, defenses=("none", "distance-threshold"),
        attacks=("rag-thief",), max_queries=2, questions=3,
    )  # fmt: skip
    whole = run_plan(plan, log_dir=tmp_path / "logs")
    knowledge = load_plan_knowledge(plan)
    vectors = SentenceTransformerEncoder().encode(knowledge.texts)
    cells = extraction_cells(plan, workers=4)
    assert len(cells) == 2
    done = [extraction_cell(knowledge, vectors, cluster_topics(vectors), c) for c in cells]
    merged = merge_extraction_reports([r for r, _ in done], plan.defenses, plan.attacks)

    def table(report: ExtractionReport) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if k != "seconds"} for r in report.to_dict()["rows"]]

    assert table(merged) == table(whole)
    assert merged.settings == whole.settings
    logs = {name: text for _, cell_logs in done for name, text in cell_logs.items()}
    assert logs == {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "logs").iterdir()}


# ---- reindex --ray ----------------------------------------------------------------------
@pytest.mark.slow
def test_reindex_on_ray_equals_in_process(
    ray_local: Any, encoder: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from ragshield.reindex import reindex

    base = tmp_path / "base"
    build_index(read_corpus(demo_files()[0]), base, encoder=encoder)
    train = {  # a few steps without early stopping, so the encoder does move
        "max_steps": 2, "batch_size": 12, "lr": 1e-4, "min_cluster_size": 3,
        "val_fraction": 0.0, "num_threads": 1, "seed": 0, "show_progress": False,
    }  # fmt: skip
    reindex(base, tmp_path / "local", **train)
    capfd.readouterr()
    res = reindex(base, tmp_path / "ray", ray_address="local", ray_workers=2, **train)
    assert capfd.readouterr().out == ""  # nothing from Ray on stdout: --json stays JSON
    assert res.spec["encoding"] == {"ray_address": "local", "ray_workers": 2}

    old, local, ray = (FaissStore.load(tmp_path / n) for n in ("base", "local", "ray"))
    assert [p.id for p in ray.passages] == [p.id for p in local.passages]
    assert np.allclose(ray.vectors, local.vectors, atol=1e-5)
    assert not np.allclose(local.vectors, old.vectors, atol=1e-3)  # the trained encoder's
    q = encoder.encode(["Who designed the Eiffel Tower?", "capital of Australia", "penicillin"])
    for a, b in zip(ray.search(q, 5), local.search(q, 5), strict=True):
        assert [h.id for h in a] == [h.id for h in b]
    assert not list(tmp_path.glob(".ray.work.*"))  # the staging folder is gone


def test_reindex_cli_passes_the_ray_options(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import ragshield.reindex.build as build
    from ragshield.reindex.build import ReindexResult

    seen: dict[str, Any] = {}

    def fake(index_dir: Path, out_dir: Path, **kw: Any) -> ReindexResult:
        seen.update(kw)
        return ReindexResult(out_dir, False, "base", 10, 2, 0.5, None)

    monkeypatch.setattr(build, "reindex", fake)
    invoke(["reindex", "idx", "--out", str(tmp_path / "n"), "--ray", "auto", "--ray-workers", "3"])
    assert seen["ray_address"] == "auto" and seen["ray_workers"] == 3
    invoke(["reindex", "idx", "--out", str(tmp_path / "n")])
    assert seen["ray_address"] is None  # without --ray: in-process


# ---- eval poisoning --ray ---------------------------------------------------------------
def _without_timing(results: dict[str, Any]) -> dict[str, Any]:
    for s in results["settings"]:
        for part in ("per_seed", "mean", "std"):
            s[part].pop("filter_ms")
    return results


@pytest.mark.slow
def test_eval_poisoning_on_ray_equals_in_process(
    ray_local: Any, shared_data: Path, tmp_path: Path
) -> None:
    common = [
        "eval", "poisoning", str(shared_data / "poisoning" / "nq"), "--limit", "4",
        "--seeds", "2", "--ratios", "1,4", "--attacks", "poisonedrag,mixed",
        "--defenses", "none;ragdefender;similarity-threshold;ecosaferag",
    ]  # fmt: skip
    invoke([*common, "--out", str(tmp_path / "local")])
    invoke([*common, "--out", str(tmp_path / "ray"), "--ray", "local", "--ray-workers", "2"])
    local, ray = (json.loads((tmp_path / n / "results.json").read_text()) for n in ("local", "ray"))
    assert ray["n_questions"] == local["n_questions"] == 4
    assert len(ray["settings"]) == 4 * (1 + 2 * 2)  # defenses × (clean + attacks × ratios)
    assert _without_timing(ray) == _without_timing(local)
