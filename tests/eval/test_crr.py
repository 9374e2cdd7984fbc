"""Chunk Recovery Rate on hand-made pairs (RAGFort §5.1 rule: ROUGE-L > 0.5 and cos > 0.85)."""

from __future__ import annotations

import numpy as np
import pytest
from rouge_score import rouge_scorer

from ragshield.errors import InputError, NotFittedError
from ragshield.eval.crr import (
    ChunkRecoveryScorer,
    chunk_recovery_rate,
    cluster_topics,
    output_windows,
    topic_summary,
)

# Hand-made knowledge base: four medical dialogue chunks (ChatDoctor style) and two others.
KB = [
    "Doctor, I have had sudden panic attacks for a month. It sounds like panic disorder. "
    "We should start psychotherapy and run an electrocardiogram to rule out heart problems.",
    "My voice has been hoarse for weeks. You may have a vocal cord polyp. We need a "
    "laryngoscopy with a biopsy and possibly speech therapy afterwards.",
    "I think I might have Turner syndrome. You will need a physical skin exam, an "
    "ultrasonography and an echocardiography, and we will check your eyes and ears.",
    "My ankle is swollen after a fall. It may be a sprain or a fracture, so we will take an "
    "X-ray and you should rest, ice and elevate the ankle for a few days.",
    "The Eiffel Tower was designed by the engineering company of Gustave Eiffel and finished "
    "in 1889 for the World's Fair in Paris.",
    "Photosynthesis turns light, water and carbon dioxide into glucose and oxygen inside the "
    "chloroplasts of plant cells.",
]

# A paraphrase of KB[0]: same meaning, few shared words in order.
PARAPHRASE = (
    "For a month the patient reports abrupt anxiety episodes; the physician suspects an "
    "anxiety condition and suggests talk therapy plus a heart tracing to exclude cardiac causes."
)


@pytest.fixture(scope="module")
def scorer(encoder) -> ChunkRecoveryScorer:  # type: ignore[no-untyped-def]
    return ChunkRecoveryScorer(encoder).fit(KB)


class TestChunkRecoveryScorer:
    def test_verbatim_copy_is_recovered(self, scorer: ChunkRecoveryScorer) -> None:
        res = scorer.score([KB[1]])
        assert res.recovered.tolist() == [False, True, False, False, False, False]
        assert res.crr == pytest.approx(1 / 6)

    def test_paraphrase_under_threshold_is_not(self, scorer: ChunkRecoveryScorer) -> None:
        # the pair really is under the lexical threshold, so the test can fail for the right reason
        f1 = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(KB[0], PARAPHRASE)
        assert f1["rougeL"].fmeasure <= 0.5
        res = scorer.score([PARAPHRASE])
        assert res.n_recovered == 0

    def test_empty_output_recovers_nothing(self, scorer: ChunkRecoveryScorer) -> None:
        for outputs in ([], [""], ["   \n  "], ["I don't know"]):
            res = scorer.score(outputs)
            assert res.n_recovered == 0 and res.crr == 0.0

    def test_unrelated_copy_of_other_text_is_not_recovered(
        self, scorer: ChunkRecoveryScorer
    ) -> None:
        res = scorer.score(["The Colosseum in Rome was completed in 80 AD under Titus."])
        assert res.n_recovered == 0

    def test_several_chunks_in_one_output_are_each_recovered(
        self, scorer: ChunkRecoveryScorer
    ) -> None:
        # one paragraph holding three chunks: windows must isolate each of them
        leak = "Sure, here is the context. " + " ".join([KB[0], KB[3], KB[5]])
        assert scorer.score([leak]).recovered.nonzero()[0].tolist() == [0, 3, 5]
        # the same chunks one per line, as a numbered list
        listed = "\n".join(f"[{i + 1}] {KB[j]}" for i, j in enumerate([2, 4]))
        assert scorer.score([listed]).recovered.nonzero()[0].tolist() == [2, 4]

    def test_partial_copy_needs_most_of_the_chunk(self, scorer: ChunkRecoveryScorer) -> None:
        words = KB[2].split()
        half = " ".join(words[: len(words) // 4])  # a quarter: recall too low for F1 > 0.5
        assert scorer.score([half]).n_recovered == 0

    def test_first_output_and_crr_at(self, scorer: ChunkRecoveryScorer) -> None:
        res = scorer.score(["nothing here at all", KB[4], KB[5] + "\n" + KB[4]])
        assert res.recovered_by[4] == 1 and res.recovered_by[5] == 2
        assert res.crr_at(1) == 0.0
        assert res.crr_at(2) == pytest.approx(1 / 6)
        assert res.crr_at(3) == pytest.approx(2 / 6) == res.crr

    def test_thresholds_are_parameters(self, encoder) -> None:  # type: ignore[no-untyped-def]
        loose = ChunkRecoveryScorer(
            encoder,
            rouge_threshold=0.0,
            cosine_threshold=0.3,
            span_precision=0.0,
            candidate_cosine=0.0,
        ).fit(KB)
        assert loose.score([PARAPHRASE]).recovered[0]

    def test_per_topic_and_summary(self, scorer: ChunkRecoveryScorer) -> None:
        res = scorer.score([KB[0], KB[1]])
        labels = np.array([0, 0, 0, 0, 1, 1])
        topics = {t.label: (t.recovered, t.total) for t in res.per_topic(labels)}
        assert topics == {0: (2, 4), 1: (0, 2)}
        summary = topic_summary(res, labels)
        assert summary["topics_touched"] == 1 and summary["n_topics"] == 2
        assert summary["intra_rate"] == pytest.approx(0.5)
        with pytest.raises(InputError, match="one entry per chunk"):
            res.per_topic([0, 1])

    def test_errors(self, encoder) -> None:  # type: ignore[no-untyped-def]
        with pytest.raises(NotFittedError, match="call fit"):
            ChunkRecoveryScorer(encoder).score(["x"])
        with pytest.raises(
            InputError,
            match=r"The 'rouge_threshold' parameter of ChunkRecoveryScorer must be a float in "
            r"\[0.0, 1.0\]. Got 2 instead.",
        ):
            ChunkRecoveryScorer(encoder, rouge_threshold=2).fit(KB)
        with pytest.raises(InputError, match="bare string"):
            ChunkRecoveryScorer(encoder).fit(KB).score("a leaked chunk")
        with pytest.raises(InputError, match="empty"):
            ChunkRecoveryScorer(encoder).fit([])
        with pytest.raises(InputError, match="one row per chunk"):
            ChunkRecoveryScorer(encoder).fit(KB, np.zeros((2, 384), np.float32))

    def test_one_call_helper(self, encoder) -> None:  # type: ignore[no-untyped-def]
        assert chunk_recovery_rate(KB[:3], [KB[0], KB[2]], encoder) == pytest.approx(2 / 3)


class TestWindows:
    def test_short_text_is_one_window(self) -> None:
        assert output_windows("One short sentence. And another.", 20) == [
            "One short sentence. And another."
        ]

    def test_long_paragraph_is_cut_with_overlap(self) -> None:
        text = " ".join(f"Sentence number {i} has exactly six words." for i in range(10))
        wins = output_windows(text, 12)  # two sentences per window
        assert all(12 <= len(w.split()) <= 18 for w in wins)
        assert wins[0].startswith("Sentence number 0") and "number 9" in wins[-1]
        assert len(wins) >= 5  # stride about half a window

    def test_lines_are_packed(self) -> None:
        text = "first line of five words\nsecond line has five words\n" + "x " * 40
        wins = output_windows(text, 8)
        assert wins[0] == "first line of five words second line has five words"

    def test_blank(self) -> None:
        assert output_windows("", 10) == [] and output_windows(" \n ", 10) == []


def test_cluster_topics_separates_two_groups() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(0, 0.02, (12, 8)) + np.eye(8)[0]
    b = rng.normal(0, 0.02, (12, 8)) + np.eye(8)[1]
    x = np.vstack([a, b])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    labels = cluster_topics(x, min_cluster_size=5)
    assert len(set(labels[:12])) == 1 and len(set(labels[12:])) == 1
    assert labels[0] != labels[12] and (labels >= 0).all()


@pytest.mark.parametrize(
    ("recovered_by", "n_outputs", "curve"),
    [
        ([0, 2, -1, 2], 4, [0.25, 0.25, 0.75, 0.75]),
        ([-1, -1], 3, [0.0, 0.0, 0.0]),
        ([1, 0, 0, -1, -1], 2, [0.4, 0.6]),
    ],
)
def test_curve_after_every_prefix_and_its_interval(
    recovered_by: list[int], n_outputs: int, curve: list[float]
) -> None:
    from ragshield.eval.crr import CRRResult

    res = CRRResult(np.array(recovered_by), np.zeros(len(recovered_by)), n_outputs, 0)
    np.testing.assert_allclose(res.curve(), curve)
    assert [res.crr_at(b) for b in range(1, n_outputs + 1)] == pytest.approx(curve)
    lo, hi = res.curve_interval(n_boot=400, seed=1)
    assert lo.shape == hi.shape == (n_outputs,)
    assert np.all(lo <= res.curve() + 1e-9) and np.all(res.curve() <= hi + 1e-9)
    assert np.all(np.diff(lo) >= -1e-9)  # a prefix never recovers less than a shorter one
    if 0 < res.crr < 1:
        assert hi[-1] > lo[-1]  # a real interval around a proportion strictly inside (0, 1)


@pytest.mark.parametrize(
    ("a", "b", "union"),
    [
        ([-1, 2, 0], [1, -1, 3], [1, 2, 0]),  # first output any rule credits
        ([-1, -1], [-1, -1], [-1, -1]),
        ([4, -1], [-1, -1], [4, -1]),
    ],
)
def test_either_is_the_union_of_rules(a: list[int], b: list[int], union: list[int]) -> None:
    from ragshield.eval.crr import CRRResult, either

    def res(by: list[int]) -> CRRResult:
        return CRRResult(np.array(by), np.zeros(len(by), np.float32), 5, 1)

    got = either(res(a), res(b))
    assert got.recovered_by.tolist() == union
    assert got.n_recovered >= max(res(a).n_recovered, res(b).n_recovered)


def test_either_refuses_results_of_different_runs() -> None:
    from ragshield.eval.crr import CRRResult, either

    one = CRRResult(np.array([0]), np.zeros(1, np.float32), 5, 1)
    two = CRRResult(np.array([0, 1]), np.zeros(2, np.float32), 5, 1)
    with pytest.raises(InputError, match="same outputs"):
        either(one, two)
    with pytest.raises(InputError, match="at least one"):
        either()
