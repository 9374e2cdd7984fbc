"""The authors' package as a registered defense (:mod:`ragshield.defenses.authors`): a
one-line error without it; with it, the vectors it judges are the retrieved passages' own,
and on the demo's PoisonedRAG set it removes planted passages only (the package's own
verdict, pinned so a change of wiring shows)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ragshield.cli import run
from ragshield.corpus import read_corpus
from ragshield.defenses import authors
from ragshield.defenses.authors import AuthorsRAGDefender, authors_package_version
from ragshield.defenses.registry import build_chain
from ragshield.demo import demo_files
from ragshield.errors import InputError
from ragshield.types import Passage, RetrievedPassage

needs_package = pytest.mark.skipif(
    authors_package_version() is None,
    reason="the authors' ragdefender package is not installed (extra 'peers')",
)


def _demo_set(encoder: Any) -> tuple[str, list[RetrievedPassage]]:
    """The demo question over the demo corpus with its five planted passages: top 10."""
    attack = json.loads(demo_files()[1].read_text(encoding="utf-8"))
    ps = [*read_corpus(demo_files()[0])]
    ps += [Passage(f"adv{i}", t) for i, t in enumerate(attack["adv_texts"])]
    v = encoder.encode([p.text for p in ps])
    q = attack["question"]
    score = v @ encoder.encode([q])[0]
    top = np.argsort(-score)[:10]
    return q, [RetrievedPassage(ps[i], float(score[i]), r, v[i]) for r, i in enumerate(top)]


class _NoEncoding:
    name = "refuses"
    dim = 384

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        raise AssertionError("the passages carry vectors: the encoder must not be called")


def test_without_the_package_is_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(authors, "authors_package_version", lambda: None)
    with pytest.raises(InputError, match=r"\.\[peers\]"):
        AuthorsRAGDefender().warm_up()


def test_filter_cli_without_the_package_exits_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(authors, "authors_package_version", lambda: None)
    passages = tmp_path / "p.json"
    passages.write_text(json.dumps([{"id": "a", "text": "Canberra is the capital."}]))
    assert run(["filter", "capital?", str(passages), "--filter", "ragdefender-authors"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ragdefender-authors" in err[0] and "Traceback" not in err[0]


def test_bad_mode_is_refused() -> None:
    with pytest.raises(InputError, match="mode"):
        AuthorsRAGDefender(mode="both").warm_up()  # type: ignore[arg-type]


@needs_package
@pytest.mark.slow
def test_demo_attack_it_removes_planted_passages_only(encoder: Any) -> None:
    q, items = _demo_set(encoder)
    (res,) = build_chain("ragdefender-authors", _NoEncoding()).run(q, items)  # type: ignore[arg-type]
    assert res.removed_ids and all(i.startswith("adv") for i in res.removed_ids)
    assert {"canberra", "sydney"} <= set(res.kept_ids)
    assert res.details["package"] == authors_package_version()


@needs_package
@pytest.mark.slow
def test_reencoding_calls_the_model_every_time(encoder: Any) -> None:
    q, items = _demo_set(encoder)
    calls: list[int] = []

    class Model:
        def encode(self, texts: Sequence[str], convert_to_tensor: bool = True, **_: Any) -> Any:
            import torch

            calls.append(len(texts))
            return torch.from_numpy(encoder.encode(list(texts)))

    f = AuthorsRAGDefender.reencoding(Model())
    first = f.filter(q, items)
    second = f.filter(q, items)
    assert calls == [10, 10] and first.removed_ids == second.removed_ids
