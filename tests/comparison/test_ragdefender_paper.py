"""RAGDefender checked against the paper's worked example and the authors' package.

* Appendix A of the paper (seed ``ragdefender.txt``): the query "Where is the capital of
  France?", r1-r4 adversarial, r5 golden. The paper reports, with its Stella embeddings:
  clusters {r1..r4} / {r5}, T_top = {capital, France, city} (m = 3), N_TF-IDF = 4,
  N_adv = 4, N_pairs = 6, all six pairs inside r1..r4, R_adv = {r1..r4}. We rebuild
  embeddings with exactly those properties and run the whole algorithm on the real texts.
* The authors' package ``ragdefender`` 0.2.0 (optional; ``pip install --no-deps ragdefender
  pandas``): same Stage-2 selection and the same Ward clustering; the known TF-IDF
  divergence (case-sensitive substring test in their code) is pinned here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from paper_samples import APPENDIX_A
from ragshield.defenses.ragdefender import (
    PaperRAGDefender,
    RAGDefender,
    clustering_estimate,
    cosine_matrix,
    frequency_scores,
    n_pairs_for,
    tfidf_top_terms,
    top_n_by_score,
)
from ragshield.types import Passage, RetrievedPassage

# The appendix example has no attack evidence beyond density (no passage restates the
# question, no typo copy), so ragshield's default keeps it; its density rules alone — the
# default before real-retrieval evaluation — are what reproduce the paper's example.
#: the density-only behaviour of earlier releases (no evidence stages, no question coverage)
DENSITY = RAGDefender(require_evidence=False, restated_question=False, coverage_threshold=101.0)

QUERY = "Where is the capital of France?"
PAPER_QUERY_SCORES = [0.6917, 0.6876, 0.6547, 0.6490, 0.5951]  # Appendix A, sim(q, r_i)


def paper_consistent_vectors(seed: int = 0) -> np.ndarray:
    """r1-r4 tightly grouped (cosine ≈ 0.9), r5 apart (≈ 0.45): the structure the paper
    reports for its embeddings (§7 measures 0.976 among adversarial passages)."""
    rng = np.random.default_rng(seed)
    dim = 128

    def unit() -> np.ndarray:
        v = rng.standard_normal(dim)
        return v / np.linalg.norm(v)

    centre = unit()
    rows = []
    for _ in range(4):
        noise = unit()
        noise -= (noise @ centre) * centre
        noise /= np.linalg.norm(noise)
        rows.append(0.95 * centre + math.sqrt(1 - 0.95**2) * noise)
    other = unit()
    other -= (other @ centre) * centre
    other /= np.linalg.norm(other)
    rows.append(0.5 * centre + math.sqrt(0.75) * other)
    return np.vstack(rows).astype(np.float32)


def appendix_set(vectors: np.ndarray | None) -> list[RetrievedPassage]:
    return [
        RetrievedPassage(
            passage=Passage(id=f"r{i + 1}", text=t),
            score=s,
            rank=i,
            embedding=None if vectors is None else vectors[i],
        )
        for i, (t, s) in enumerate(zip(APPENDIX_A, PAPER_QUERY_SCORES, strict=True))
    ]


class TestAppendixA:
    @pytest.mark.parametrize("m", [3, 5])
    def test_faithful_removes_exactly_r1_to_r4(self, m: int) -> None:
        res = PaperRAGDefender(mode="single_hop", m=m).filter(
            QUERY, appendix_set(paper_consistent_vectors())
        )
        assert res.removed_ids == ["r1", "r2", "r3", "r4"]
        assert res.kept_ids == ["r5"]
        d = res.details
        assert sorted(map(sorted, d["groups"])) == [[0, 1, 2, 3], [4]]
        assert d["n_tfidf"] == 4 and d["n_adv"] == 4
        assert len(d["pairs"]) == 6 and all(4 not in p for p in d["pairs"])
        if m == 3:
            assert set(d["top_terms"]) == {"capital", "france", "city"}

    def test_improved_removes_exactly_r1_to_r4(self) -> None:
        res = DENSITY.filter(QUERY, appendix_set(paper_consistent_vectors()))
        assert res.removed_ids == ["r1", "r2", "r3", "r4"]
        assert res.details["n_adv"] == 4

    @pytest.mark.parametrize("seed", range(5))
    def test_stable_over_embedding_draws(self, seed: int) -> None:
        vecs = paper_consistent_vectors(seed)
        for f in (PaperRAGDefender(m=3), DENSITY):
            assert f.filter(QUERY, appendix_set(vecs)).kept_ids == ["r5"]

    @pytest.mark.slow
    def test_with_minilm(self, encoder) -> None:
        """With the packaged MiniLM (not the paper's Stella) the example is *not* dense:
        r1-r4 are 0.46-0.64 similar (four different false cities) and r2 (Strasbourg) sits
        as close to the golden r5 as to r1, r3, r4. Measured outcome, pinned loosely:

        * faithful: Ward splits {r1, r3, r4} / {r2, r5}; N_TF-IDF = 4 > 5/2 so
          N_adv = 5 - 2 = 3 and r1, r3, r4 go — r2 stays.
        * improved: no pair reaches the tight level (0.75); r1, r3, r4 form a loose group
          (average cosine >= 0.55) and go — r2 stays as well.

        Both keep the golden r5; neither reaches the paper's "exactly r1-r4" on MiniLM.
        """
        vecs = encoder.encode(APPENDIX_A)
        paper = PaperRAGDefender(m=3).filter(QUERY, appendix_set(vecs))
        assert "r5" in paper.kept_ids
        assert set(paper.removed_ids) <= {"r1", "r2", "r3", "r4"}
        assert paper.details["n_tfidf"] == 4 and paper.details["n_adv"] >= 3
        ours = DENSITY.filter(QUERY, appendix_set(vecs))
        assert "r5" in ours.kept_ids
        assert set(ours.removed_ids) <= {"r1", "r2", "r3", "r4"}
        assert len(ours.removed_ids) >= 3
        # the default: r1, r2, r4 spell out the question (coverage >= 85), r2 at the group's
        # edge is spared; no density evidence on MiniLM (max pair 0.64), so r3 stays too
        default = RAGDefender().filter(QUERY, appendix_set(vecs))
        assert sorted(default.removed_ids) == ["r1", "r4"]


class TestAuthorsPackage:
    """Same inputs through ``ragdefender`` 0.2.0's own classes (skipped if not installed)."""

    @pytest.fixture(autouse=True)
    def _pkg(self) -> None:
        # a submodule, not the bare name: tests/defenses/ragdefender/ (mirroring src) is
        # importable as a namespace package "ragdefender" when the authors' package is absent
        pytest.importorskip("ragdefender.identification", reason="authors' package not installed")
        pytest.importorskip("torch")

    @pytest.mark.parametrize("seed", range(6))
    def test_stage2_selection_matches(self, seed: int) -> None:
        import torch
        from ragdefender.identification import IdentifyAdversarial

        rng = np.random.default_rng(seed)
        n = 12
        centre = rng.standard_normal(64)
        x = rng.standard_normal((n, 64))
        x[: n // 2] += 2.5 * centre  # a dense half, so the top pairs are well separated
        texts = [f"p{i}" for i in range(n)]
        sim = cosine_matrix(x)
        for n_adv in (1, 3, 5):
            ours = top_n_by_score(frequency_scores(sim, n_pairs_for(n_adv), 2.0).f, n_adv)
            theirs = IdentifyAdversarial(None, p=2).select(
                texts, n_adv, embeddings=torch.tensor(x, dtype=torch.float32)
            )
            assert sorted(ours.tolist()) == sorted(theirs)

    def test_clustering_matches(self) -> None:
        import torch
        from ragdefender.grouping.clustering import ClusteringBasedGrouping

        vecs = paper_consistent_vectors()
        ours = clustering_estimate(vecs, APPENDIX_A, 3)
        grouping = ClusteringBasedGrouping(None, m=3)
        theirs_n_adv = grouping.estimate_n_adv(APPENDIX_A, embeddings=torch.tensor(vecs))
        assert ours.n_min == 1
        # Their vote never finds "france" (case-sensitive substring of a lower-cased term
        # in "France"), so N_TF-IDF is 3 for them and 4 (as in the paper) for us; with
        # n_min = 1 both still reach N_adv = |R| - n_min = 4 here.
        assert grouping._n_tfidf(APPENDIX_A) == 3
        assert tfidf_top_terms(APPENDIX_A, 3).n_tfidf == 4
        assert ours.n_adv == theirs_n_adv == 4
