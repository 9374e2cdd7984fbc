"""Knowledge bases of the extraction evaluation: the chunks an attacker tries to recover and
the legitimate questions that measure utility, loaded from the shared data and encoded once.

Example::

    from ragshield.eval.extraction_data import build_store, encode_cached, load_knowledge_base

    kb = load_knowledge_base("chatdoctor", data_dir="../shared/data", limit=1000)
    store = build_store(kb, encode_cached(kb.texts, encoder, "runs/vectors"), encoder.name)

The harness (:mod:`ragshield.eval.extraction`) runs the attacks against them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragshield.embed.base import Encoder
from ragshield.errors import DataFormatError, InputError, check_int
from ragshield.store.faiss_store import FaissStore
from ragshield.types import Passage


@dataclass(frozen=True)
class UtilityQuestion:
    """A legitimate question: ``gold_ids`` are the chunks that answer it. ``answer`` is the
    reference answer string (Wikipedia) or ``None`` (ChatDoctor: the gold record's
    ``metadata["answer"]`` is the reference)."""

    question: str
    gold_ids: tuple[str, ...]
    answer: str | None = None


@dataclass(frozen=True)
class KnowledgeBase:
    name: str
    passages: tuple[Passage, ...]
    questions: tuple[UtilityQuestion, ...]

    @property
    def texts(self) -> list[str]:
        return [p.text for p in self.passages]


def seeded_subset(n: int, limit: int | None, seed: int) -> np.ndarray:
    """`limit` of `n` positions, drawn with `seed` (all of them, in order, without a limit)."""
    if limit is None or limit >= n:
        return np.arange(n)
    check_int(limit, "limit", "load_knowledge_base", low=1)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def load_chatdoctor(
    path: str | os.PathLike[str], *, limit: int | None = None, seed: int = 0
) -> KnowledgeBase:
    """ChatDoctor/GenMedGPT records (``[{instruction, input, output}]``): one record = one
    chunk (patient message, newline, doctor answer); ``limit`` draws a seeded subset."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"knowledge base file {str(p)!r} does not exist.")
    try:
        records = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(p, exc.lineno, f"invalid JSON: {exc.msg}") from exc
    if not isinstance(records, list) or not records:
        raise DataFormatError(p, None, "expected a non-empty JSON list of records")
    passages: list[Passage] = []
    questions: list[UtilityQuestion] = []
    seen: set[str] = set()
    for i in seeded_subset(len(records), limit, seed):
        rec = records[int(i)]
        if not isinstance(rec, dict) or not all(
            isinstance(rec.get(k), str) for k in ("input", "output")
        ):
            raise DataFormatError(p, None, f"record {int(i)} lacks string 'input' and 'output'")
        q, a = rec["input"].strip(), rec["output"].strip()
        text = f"{q}\n{a}"
        if not q or not a or text in seen:
            continue
        seen.add(text)
        pid = f"cd{int(i)}"
        passages.append(Passage(pid, text, metadata={"question": q, "answer": a}))
        questions.append(UtilityQuestion(q, (pid,)))
    return KnowledgeBase(p.stem, tuple(passages), tuple(questions))


def load_wikipedia(
    poisoning_dir: str | os.PathLike[str],
    datasets: Sequence[str] = ("nq", "hotpotqa"),
    *,
    limit: int | None = None,
    seed: int = 0,
) -> KnowledgeBase:
    """The golden Wikipedia passages of ``poisoning/{nq,hotpotqa}`` as a knowledge base; the
    target questions with their correct answers are the utility questions."""
    from ragshield.eval.datasets import load_poisoning

    ids: dict[str, str] = {}
    passages: list[Passage] = []
    questions: list[UtilityQuestion] = []
    for ds in datasets:
        for case in load_poisoning(Path(poisoning_dir) / ds):
            gold: list[str] = []
            for text in (case.golden, *case.supporting):
                if text not in ids:
                    ids[text] = f"{ds}-{len(passages)}"
                    passages.append(Passage(ids[text], text, metadata={"dataset": ds}))
                gold.append(ids[text])
            questions.append(UtilityQuestion(case.question, tuple(gold), case.correct_answer))
    keep = seeded_subset(len(passages), limit, seed)
    kept = {passages[int(i)].id for i in keep}
    return KnowledgeBase(
        "wikipedia",
        tuple(passages[int(i)] for i in keep),
        tuple(q for q in questions if any(g in kept for g in q.gold_ids)),
    )


def load_knowledge_base(
    name: str,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    limit: int | None = None,
    seed: int = 0,
) -> KnowledgeBase:
    """``"chatdoctor"``, ``"wikipedia"`` (both under ``data_dir``, the shared data folder) or
    a path to a JSON file in the ChatDoctor schema."""
    root = Path(data_dir) if data_dir is not None else None
    if name in ("chatdoctor", "wikipedia"):
        if root is None or not root.is_dir():
            raise InputError(
                f"the {name!r} knowledge base needs the shared data folder: pass data_dir "
                f"(got {str(root) if root else None!r})."
            )
        if name == "chatdoctor":
            return load_chatdoctor(
                root / "extraction" / "chatdoctor5k.json", limit=limit, seed=seed
            )
        return load_wikipedia(root / "poisoning", limit=limit, seed=seed)
    return load_chatdoctor(name, limit=limit, seed=seed)


def encode_cached(
    texts: Sequence[str], encoder: Encoder, cache_dir: str | os.PathLike[str] | None = None
) -> np.ndarray:
    """Encode, reusing ``cache_dir/<hash>.npy`` when the same texts were encoded by the same
    encoder before (a 5k-chunk base takes minutes on a contended CPU)."""
    if cache_dir is None:
        return encoder.encode(list(texts))
    h = hashlib.blake2b(encoder.name.encode(), digest_size=16)
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\x00")
    path = Path(cache_dir) / f"vectors-{h.hexdigest()}.npy"
    if path.is_file():
        vecs = np.load(path, allow_pickle=False)
        if vecs.shape[0] == len(texts):
            return vecs
    vecs = encoder.encode(list(texts))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, vecs)
    os.replace(tmp, path)
    return vecs


def build_store(kb: KnowledgeBase, vectors: np.ndarray, encoder_name: str = "") -> FaissStore:
    store = FaissStore(int(vectors.shape[1]), encoder_name=encoder_name)
    store.add(list(kb.passages), vectors)
    return store
