"""RAGFort cascade: the math of Eq. 5 / Algorithm 1 on toy distributions, the generator on
toy logit callables and on tiny randomly initialised transformers models (real mechanics,
no download), and one real Qwen draft/reference answer when those models are cached.
"""

from __future__ import annotations

import importlib
import itertools
import math

import numpy as np
import pytest

from ragshield.errors import InputError
from ragshield.generate import cascade_math as cm
from ragshield.generate.cascade import (
    CascadeDecoding,
    CascadeGenerator,
    CascadeRule,
    ChunkCopyIndex,
)

CHUNK = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"
CORPUS = [
    CHUNK + " mike november oscar papa zulu",
    "say " + CHUNK + " and golf or zulu.",
    "the patient has a fever and a cough, the doctor says rest and fluids.",
    "Context: Question: Answer: You are a helpful assistant, below is a query from a user.",
]


# ---------------------------------------------------------------------------------------
# fixtures: a tokenizer trained locally with `tokenizers`, tiny Qwen2 models from a config
# ---------------------------------------------------------------------------------------
def _build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<unk>", "<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS * 5, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>")


@pytest.fixture(scope="module")
def tokenizer():
    return _build_tokenizer()


def _tiny_model(vocab: int, seed: int, eos: int):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        initializer_range=0.5,  # peaky distributions, so greedy ties are unlikely
        eos_token_id=eos,
    )
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():  # a zero EOS row: logit 0 is never the argmax, so greedy runs long
        model.lm_head.weight[eos] = 0.0
    return model


@pytest.fixture(scope="module")
def tiny_pair(tokenizer):
    vocab = len(tokenizer)
    eos = tokenizer.eos_token_id
    return _tiny_model(vocab, 0, eos), _tiny_model(vocab, 1, eos)


def _full_greedy(model, ids: list[int], n: int, eos: int) -> list[int]:
    """Reference decoding without any cache: recompute the whole prefix every step."""
    import torch

    out: list[int] = []
    for _ in range(n):
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([ids + out])).logits[0, -1]
        x = int(torch.argmax(logits))
        out.append(x)
        if x == eos:
            break
    return out


# ---------------------------------------------------------------------------------------
# pure math (CI always runs these)
# ---------------------------------------------------------------------------------------
class TestMath:
    def test_softmax_rows_sum_to_one_and_temperature_sharpens(self):
        logits = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
        p = cm.softmax(logits)
        assert np.allclose(p.sum(axis=1), 1.0)
        assert np.allclose(p[1], 1 / 3)
        assert cm.softmax(logits[0], 0.5).max() > p[0].max()
        with pytest.raises(ValueError, match="temperature must be > 0"):
            cm.softmax(logits, 0.0)

    def test_total_variation_hand_values(self):
        assert cm.total_variation(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(1)
        p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
        assert cm.total_variation(p, q) == pytest.approx(0.3)
        assert cm.total_variation(p, p) == 0.0

    @pytest.mark.parametrize(
        ("q", "p", "q_z", "p_z", "alpha", "eta", "expected"),
        [
            # max q = .7 ; max p = .4, D_TV = .3: .7 < .4 - 0 -> keep draft
            ([0.7, 0.2, 0.1], [0.4, 0.4, 0.2], 0.0, 0.0, 0.0, 0.0, 0),
            # reference more confident: .4 < .8 - 0 -> defer
            ([0.4, 0.4, 0.2], [0.8, 0.1, 0.1], 0.0, 0.0, 0.0, 0.0, 1),
            # same, but D_TV = .4 and alpha = 1: .4 < .8 - .4 false -> keep draft
            ([0.4, 0.4, 0.2], [0.8, 0.1, 0.1], 0.0, 0.0, 1.0, 0.0, 0),
            # draft copies (q_z=.6) much more than reference (p_z=.1): .7 < .4 + 1*6 -> defer
            ([0.7, 0.2, 0.1], [0.4, 0.4, 0.2], 0.6, 0.1, 0.0, 1.0, 1),
            # equal copy mass and tiny eta: .7 < .4 + .1*1 false -> keep draft
            ([0.7, 0.2, 0.1], [0.4, 0.4, 0.2], 0.3, 0.3, 0.0, 0.1, 0),
            # draft == reference with eta > 0 and copy mass: .5 < .5 + eta -> defer
            ([0.5, 0.5], [0.5, 0.5], 0.5, 0.5, 1.0, 0.5, 1),
        ],
    )
    def test_rejection_rule_eq5(self, q, p, q_z, p_z, alpha, eta, expected):
        assert cm.rejection_rule(np.array(q), np.array(p), q_z, p_z, alpha, eta) == expected

    def test_copy_ratio_zero_over_zero_is_zero(self):
        assert cm.copy_ratio(0.0, 0.0) == 0.0
        assert cm.copy_ratio(0.5, 0.25) == pytest.approx(2.0)
        assert cm.copy_ratio(0.5, 0.0) > 1e9

    def test_target_distribution_mixes_per_row(self):
        q = np.array([[0.6, 0.4], [0.6, 0.4]])
        p = np.array([[0.1, 0.9], [0.1, 0.9]])
        pi = cm.target_distribution(q, p, np.array([0, 1]))
        assert np.allclose(pi, [[0.6, 0.4], [0.1, 0.9]])

    def test_acceptance_and_residual_hand_values(self):
        q = np.array([0.5, 0.3, 0.2])
        pi = np.array([0.2, 0.3, 0.5])
        assert cm.acceptance_probability(pi, q, 0) == pytest.approx(0.4)
        assert cm.acceptance_probability(pi, q, 2) == 1.0
        # max(0, pi - q) = [0, 0, .3] -> all mass on token 2
        assert np.allclose(cm.residual_distribution(pi, q), [0, 0, 1])
        # nothing to reject when pi == q: the residual falls back to pi itself
        assert np.allclose(cm.residual_distribution(q, q), q)

    @pytest.mark.parametrize("seed", range(5))
    def test_emitted_token_law_equals_pi(self, seed):
        rng = np.random.default_rng(seed)
        q = rng.dirichlet(np.ones(7))
        p = rng.dirichlet(np.ones(7) * 0.3)
        for r in (0, 1):
            pi = cm.target_distribution(q, p, r)
            assert np.allclose(cm.emitted_distribution(q, pi), pi, atol=1e-12)

    def test_draft_equal_reference_emits_reference_law(self):
        p = np.array([0.05, 0.6, 0.25, 0.1])
        r = cm.rejection_rule(p, p, q_z=0.3, p_z=0.3, alpha=0.5, eta=1.0)
        pi = cm.target_distribution(p, p, r)
        assert np.allclose(cm.emitted_distribution(p, pi), p)
        # the rule itself: D_TV = 0 and q(z)/p(z) = 1, so any eta > 0 defers
        assert r == 1

    def test_verify_block_sampling_matches_pi_by_monte_carlo(self):
        q = np.array([[0.6, 0.3, 0.1]])
        pi = np.array([[0.2, 0.2, 0.6], [1.0, 0.0, 0.0]])
        rng = np.random.default_rng(0)
        counts = np.zeros(3)
        n = 20_000
        for _ in range(n):
            x = cm.draw(q[0], rng)
            v = cm.verify_block([x], q, pi, rng)
            tok = x if v.n_accepted == 1 else cm.draw(v.next_distribution, rng)
            counts[tok] += 1
        assert np.allclose(counts / n, pi[0], atol=0.015)

    def test_verify_block_greedy_first_disagreement(self):
        q = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]])
        pi = np.array([[0.9, 0.1], [0.3, 0.7], [0.7, 0.3], [0.5, 0.5]])
        v = cm.verify_block([0, 0, 0], q, pi, None)
        assert v.n_accepted == 1 and v.rejected
        assert cm.draw(v.next_distribution, None) == 1
        all_ok = cm.verify_block([0], q[:1], pi[[0, 3]], None)
        assert all_ok.n_accepted == 1 and not all_ok.rejected
        with pytest.raises(ValueError, match="needs 3 draft rows and 4 target rows"):
            cm.verify_block([0, 0, 0], q, pi[:3], None)

    def test_draw_never_picks_zero_mass_tokens(self):
        rng = np.random.default_rng(1)
        dist = np.array([0.0, 0.5, 0.0, 0.5, 0.0])
        picks = {cm.draw(dist, rng) for _ in range(500)}
        assert picks == {1, 3}


class TestCopyIndex:
    def test_copy_set_is_the_chunk_continuation(self):
        idx = ChunkCopyIndex([[1, 2, 3, 4, 5], [9, 2, 3, 7]], span=3)
        assert sorted(idx.copy_set([8, 2, 3]).tolist()) == [4, 7]
        assert idx.copy_set([3, 4]).tolist() == [5]
        assert idx.copy_set([4, 3]).size == 0
        assert idx.copy_set([2]).size == 0  # shorter than span - 1: no copy yet

    def test_span_one_means_any_chunk_token(self):
        idx = ChunkCopyIndex([[1, 2], [2, 5]], span=1)
        assert sorted(idx.copy_set([]).tolist()) == [1, 2, 5]


# ---------------------------------------------------------------------------------------
# the generator on toy logit callables (exact control over q and p)
# ---------------------------------------------------------------------------------------
def _single(tokenizer, word: str) -> int:
    ids = tokenizer(word, add_special_tokens=False)["input_ids"]
    assert len(ids) == 1, f"{word!r} is not one token of the test tokenizer: {ids}"
    return int(ids[0])


def _fixed(dist: np.ndarray):
    logits = np.log(np.maximum(dist, 1e-30))

    def fn(prefixes):
        return np.tile(logits, (len(prefixes), 1))

    return fn


class TestCascadeOnCallables:
    def _first_token_law(self, tokenizer, draft, reference, n=1500, **kw):
        vocab = len(tokenizer)
        counts = np.zeros(vocab)
        for seed in range(n):
            gen = CascadeGenerator(
                draft,
                reference,
                tokenizer,
                gamma=1,
                max_new_tokens=2,
                do_sample=True,
                seed=seed,
                use_chat_template=False,
                **kw,
            )
            out = gen.generate("What?", ["ctx"])
            counts[out.details["completion_ids"][0]] += 1
        return counts / n

    def _two_dists(self, tokenizer):
        vocab = len(tokenizer)
        a, b, c = (_single(tokenizer, w) for w in (" alpha", " bravo", " golf"))
        q = np.full(vocab, 1e-9)
        q[[a, b, c]] = [0.6, 0.3, 0.1]
        p = np.full(vocab, 1e-9)
        p[[a, b, c]] = [0.1, 0.2, 0.7]
        return q / q.sum(), p / p.sum(), (a, b, c)

    def _cascade(self, tokenizer, **kw):
        """A cascade over the two fixed laws of :meth:`_two_dists`: draft q, reference p."""
        q, p, _ = self._two_dists(tokenizer)
        return CascadeGenerator(_fixed(q), _fixed(p), tokenizer, **kw)

    def test_deferring_everywhere_emits_the_reference_law(self, tokenizer):
        q, p, toks = self._two_dists(tokenizer)
        # max q = .6 < max p = .7 with alpha = 0: r = 1 at every position
        law = self._first_token_law(tokenizer, _fixed(q), _fixed(p), alpha=0.0, eta=0.0)
        assert np.allclose(law[list(toks)], [0.1, 0.2, 0.7], atol=0.04)

    def test_never_deferring_emits_the_draft_law(self, tokenizer):
        q, p, toks = self._two_dists(tokenizer)
        law = self._first_token_law(tokenizer, _fixed(q), _fixed(p), alpha=1e6, eta=0.0)
        assert np.allclose(law[list(toks)], [0.6, 0.3, 0.1], atol=0.04)

    def test_draft_equal_reference_emits_the_reference_law(self, tokenizer):
        _, p, toks = self._two_dists(tokenizer)
        law = self._first_token_law(tokenizer, _fixed(p), _fixed(p))
        assert np.allclose(law[list(toks)], [0.1, 0.2, 0.7], atol=0.04)

    def _copy_models(self, tokenizer):
        """Draft: copies CHUNK token by token (bigram on the chunk); reference: says 'zulu'."""
        vocab = len(tokenizer)
        chunk = tokenizer(" " + CHUNK, add_special_tokens=False)["input_ids"]
        nxt = {a: b for a, b in itertools.pairwise(chunk)}
        zulu = _single(tokenizer, " zulu")

        def draft(prefixes):
            rows = np.full((len(prefixes), vocab), -10.0)
            for i, pre in enumerate(prefixes):
                rows[i, nxt.get(pre[-1], chunk[0])] = 10.0
            return rows

        def reference(prefixes):
            rows = np.full((len(prefixes), vocab), -10.0)
            rows[:, zulu] = 5.0
            return rows

        return draft, reference, chunk

    def test_copy_term_moves_copying_positions_to_the_reference(self, tokenizer):
        draft, reference, chunk = self._copy_models(tokenizer)
        common = {"gamma": 4, "alpha": 1e3, "max_new_tokens": 24, "use_chat_template": False}
        copying = CascadeGenerator(draft, reference, tokenizer, eta=0.0, **common)
        guarded = CascadeGenerator(draft, reference, tokenizer, eta=1e9, **common)
        a = copying.generate("Tell me everything.", [CHUNK])
        b = guarded.generate("Tell me everything.", [CHUNK])

        def longest_copy(text: str) -> int:
            ids = tokenizer(" " + text, add_special_tokens=False)["input_ids"]
            best = 0
            for i in range(len(ids)):
                for j in range(len(chunk)):
                    k = 0
                    while i + k < len(ids) and j + k < len(chunk) and ids[i + k] == chunk[j + k]:
                        k += 1
                    best = max(best, k)
            return best

        assert a.details["copy_deferrals"] == 0
        assert b.details["copy_deferrals"] > 0
        assert longest_copy(a.text) >= 4
        assert longest_copy(b.text) < 4  # span=4: a 4-token copy is never completed

    def test_forward_counts(self, tokenizer):
        gen = self._cascade(
            tokenizer, gamma=3, max_new_tokens=10, use_chat_template=False, alpha=1e6
        )
        d = gen.generate("What?", ["ctx"]).details
        assert d["draft_forwards"] == d["drafted"]
        assert d["reference_forwards"] == d["blocks"]
        assert d["accepted"] == d["drafted"]  # alpha huge: never defers, never rejects
        assert d["flops"] is None  # callables carry no parameter count

    def test_prompt_style_and_cache_identity(self, tokenizer):
        plain = self._cascade(tokenizer, use_chat_template=False)
        bare = self._cascade(tokenizer, use_chat_template=False, prompt_style="ragfort")
        assert tokenizer.decode(bare._prompt_ids("What?", ["ctx"])).startswith("Context:")
        assert "helpful assistant" in tokenizer.decode(plain._prompt_ids("What?", ["ctx"]))
        assert plain.cache_identity() != bare.cache_identity()
        assert self._cascade(tokenizer, gamma=2).cache_identity()["gamma"] == 2
        with pytest.raises(InputError, match="unknown prompt style"):
            self._cascade(tokenizer, prompt_style="x").warm_up()

    def test_gamma_zero_is_reference_only(self, tokenizer):
        gen = self._cascade(
            tokenizer,
            gamma=0,
            max_new_tokens=5,
            use_chat_template=False,
            reference_params=1000,
            draft_params=10,
        )
        out = gen.generate("What?", ["ctx"])
        assert out.details["draft_forwards"] == 0
        assert out.details["reference_forwards"] == out.completion_tokens == 5
        assert out.text.split() == ["golf"] * 5  # argmax p
        assert out.details["flops"] == pytest.approx(2 * 1000 * 5)

    def test_sampling_is_deterministic_under_a_seed(self, tokenizer):
        kw = {"do_sample": True, "max_new_tokens": 12, "use_chat_template": False, "alpha": 0.1}
        one = self._cascade(tokenizer, seed=7, **kw)
        two = self._cascade(tokenizer, seed=7, **kw)
        texts = {
            self._cascade(tokenizer, seed=s, **kw).generate("Q?", ["c"]).text for s in range(6)
        }
        assert one.generate("Q?", ["c"]).text == two.generate("Q?", ["c"]).text
        assert len(texts) > 1

    def test_stop_string_cuts_the_answer(self, tokenizer):
        vocab = len(tokenizer)
        golf, alpha, nl = (_single(tokenizer, w) for w in (" golf", " alpha", "\n"))

        def alternate(prefixes):  # "\n golf alpha golf alpha ..."
            rows = np.full((len(prefixes), vocab), -10.0)
            for i, pre in enumerate(prefixes):
                last = pre[-1]
                rows[i, golf if last in (alpha, nl) else alpha if last == golf else nl] = 10.0
            return rows

        gen = CascadeGenerator(
            alternate,
            alternate,
            tokenizer,
            max_new_tokens=30,
            stop=["\n", "alpha golf"],
            use_chat_template=False,
        )
        out = gen.generate("Q?", ["c"])
        assert out.text == "golf"  # the leading newline did not stop it; "alpha golf" did
        assert out.completion_tokens < 30

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            (
                {"gamma": -1},
                r"The 'gamma' parameter of CascadeGenerator must be an int >= 0\. Got -1 instead\.",
            ),
            (
                {"alpha": -0.5},
                r"The 'alpha' parameter of CascadeGenerator must be a float in \[0\.0, inf\]",
            ),
            ({"span": 0}, r"The 'span' parameter of CascadeGenerator must be an int >= 1"),
            (
                {"temperature": 0},
                r"The 'temperature' parameter of CascadeGenerator must be a float in \(0\.0",
            ),
            ({"stop": "\n"}, r"The 'stop' parameter of CascadeGenerator must be a list"),
        ],
    )
    def test_bad_parameters_fail_on_first_use(self, tokenizer, kwargs, message):
        _, p, _ = self._two_dists(tokenizer)
        gen = CascadeGenerator(_fixed(p), _fixed(p), tokenizer, **kwargs)  # storing never fails
        with pytest.raises(InputError, match=message):
            gen.generate("Q?", ["c"])

    @pytest.mark.parametrize(
        "given",
        [
            {"rule": CascadeRule(gamma=2, eta=0.0), "decoding": CascadeDecoding(seed=3)},
            {"rule": {"gamma": 2, "eta": 0.0}, "decoding": {"seed": 3}},
            {"gamma": 2, "eta": 0.0, "seed": 3},
            {"rule": CascadeRule(gamma=7, eta=0.0), "gamma": 2, "seed": 3},  # flat wins
        ],
    )
    def test_options_by_group_table_or_flat_name_are_one(self, tokenizer, given):
        """Issue #22: the constructor takes two groups (a dataclass or a config table) and
        every field by its own name too (ragfort configs, benchmarks); reading or assigning
        a flat name reaches its frozen group, and the answer is the same either way."""
        _, p, _ = self._two_dists(tokenizer)
        gen = CascadeGenerator(_fixed(p), _fixed(p), tokenizer, **given)
        assert gen.rule == CascadeRule(gamma=2, eta=0.0) and gen.gamma == 2
        assert gen.decoding == CascadeDecoding(seed=3) and gen.seed == 3
        gen.max_new_tokens = 5
        assert gen.decoding == CascadeDecoding(seed=3, max_new_tokens=5)
        flat = CascadeGenerator(
            _fixed(p), _fixed(p), tokenizer, gamma=2, eta=0.0, seed=3, max_new_tokens=5
        )
        assert gen.generate("Q?", ["c"]).text == flat.generate("Q?", ["c"]).text
        assert gen.cache_identity() == flat.cache_identity()

    def test_constructor_takes_at_most_twelve_names_and_refuses_unknown_ones(self, tokenizer):
        import inspect

        named = [
            n
            for n, q in inspect.signature(CascadeGenerator).parameters.items()
            if q.kind is not q.VAR_KEYWORD
        ]
        assert len(named) <= 12, named
        with pytest.raises(TypeError, match="did you mean 'gamma'"):
            CascadeGenerator(None, None, gama=2)
        with pytest.raises(TypeError, match="no parameter 'gamma' in decoding"):
            CascadeGenerator(None, None, decoding={"gamma": 2})

    def test_bad_inputs(self, tokenizer):
        _, p, _ = self._two_dists(tokenizer)
        gen = CascadeGenerator(_fixed(p), _fixed(p), tokenizer)
        with pytest.raises(InputError, match="bare string"):
            gen.generate("Q?", "one context")
        with pytest.raises(InputError, match="question is empty"):
            gen.generate("  ", ["c"])
        with pytest.raises(InputError, match="needs the tokenizer"):
            CascadeGenerator(_fixed(p), _fixed(p)).generate("Q?", ["c"])
        with pytest.raises(InputError, match="item 1 is not"):
            gen.generate("Q?", ["c", 3])
        with pytest.raises(InputError, match="The 'draft' parameter"):
            CascadeGenerator(42, _fixed(p), tokenizer).generate("Q?", ["c"])

    def test_vocabulary_mismatch_is_reported(self, tokenizer):
        _, p, _ = self._two_dists(tokenizer)
        gen = CascadeGenerator(_fixed(p[:-3]), _fixed(p), tokenizer, use_chat_template=False)
        with pytest.raises(InputError, match="vocabularies differ"):
            gen.generate("Q?", ["c"])


# ---------------------------------------------------------------------------------------
# tiny real transformers models (random weights, real forward passes and KV caches)
# ---------------------------------------------------------------------------------------
class TestCascadeOnTinyModels:
    def test_kv_cache_rollback_matches_full_recompute(self, tiny_pair):
        import torch

        from ragshield.generate.cascade import _HFScorer

        model = tiny_pair[0]
        scorer = _HFScorer(model)
        seq = [5, 9, 13, 40, 41, 42, 43, 44]
        scorer.logits(seq, 1)
        branch = [*seq[:5], 77, 78]  # roll back 3 tokens, then continue differently
        got = scorer.logits(branch, 3)
        with torch.inference_mode():
            full = model(input_ids=torch.tensor([branch])).logits[0, -3:].numpy()
        assert np.allclose(got, full, atol=1e-4)
        assert scorer.counter.tokens == len(seq) + 3  # only the un-cached tail was fed

    def test_same_model_as_draft_and_reference_equals_plain_greedy(self, tokenizer, tiny_pair):
        model = tiny_pair[1]
        gen = CascadeGenerator(model, model, tokenizer, gamma=3, max_new_tokens=15)
        out = gen.generate("Does the patient have a fever?", [CORPUS[1]])
        prompt = gen._prompt_ids("Does the patient have a fever?", [CORPUS[1]])
        expected = _full_greedy(model, prompt, 15, tokenizer.eos_token_id)
        expected = [t for t in expected if t != tokenizer.eos_token_id]
        assert out.completion_tokens == len(expected)
        assert out.text == tokenizer.decode(expected, skip_special_tokens=True).strip()
        assert out.details["rejections"] == 0

    def test_prompt_longer_than_the_context_window_is_refused(self, tokenizer, tiny_pair):
        gen = CascadeGenerator(*tiny_pair, tokenizer, max_new_tokens=2000)
        with pytest.raises(InputError, match="exceeds the model's context of 2048 tokens"):
            gen.generate("Does the patient have a fever?", [CORPUS[1]])

    def test_two_models_cost_accounting(self, tokenizer, tiny_pair):
        draft, reference = tiny_pair
        gen = CascadeGenerator(draft, reference, tokenizer, gamma=4, max_new_tokens=12, alpha=0.0)
        out = gen.generate("Does the patient have a fever?", [CORPUS[1]])
        d = out.details
        n_params = sum(p.numel() for p in reference.parameters())
        assert d["reference_forwards"] == d["blocks"] >= 3
        assert d["reference_tokens_processed"] >= out.prompt_tokens + out.completion_tokens - 1
        assert d["flops_reference"] == pytest.approx(2 * n_params * d["reference_tokens_processed"])
        assert d["flops_reference_only"] == pytest.approx(
            2 * n_params * (out.prompt_tokens + out.completion_tokens)
        )
        assert 0.0 <= d["acceptance_rate"] <= 1.0
        assert out.timings["generate"] > 0
        # greedy: the same call gives the same answer
        assert gen.generate("Does the patient have a fever?", [CORPUS[1]]).text == out.text


# ---------------------------------------------------------------------------------------
# the real Qwen2.5-Coder 0.5B -> 1.5B pair, when `ragshield.models` has cached it
# ---------------------------------------------------------------------------------------
def _cached_qwen_pair():
    try:
        models = importlib.import_module("ragshield.models")
    except ImportError:  # pragma: no cover
        return None, "ragshield.models is missing"
    fetch = getattr(models, "fetch", None)
    if fetch is None:
        return None, "ragshield.models.fetch is not implemented yet"
    try:
        return (fetch("qwen2.5-0.5b"), fetch("qwen2.5-1.5b")), ""
    except Exception as exc:  # the packaged parts are not installed here
        return None, f"Qwen2.5-Coder draft/reference not available offline: {exc}"


@pytest.mark.llm
@pytest.mark.slow
def test_real_qwen_cascade_answer():
    paths, reason = _cached_qwen_pair()
    if paths is None:
        pytest.skip(reason)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(paths[1])
    draft = AutoModelForCausalLM.from_pretrained(paths[0], dtype=torch.float32).eval()
    ref = AutoModelForCausalLM.from_pretrained(paths[1], dtype=torch.float32).eval()
    gen = CascadeGenerator(draft, ref, tok, max_new_tokens=24, stop=["\n"])
    ctx = ["The Zorblat river flows through the city of Quenmar and is 412 km long."]
    out = gen.generate("How long is the Zorblat river?", ctx)
    assert "412" in out.text
    assert out.details["reference_forwards"] < out.completion_tokens + 1
    assert math.isfinite(out.details["flops"])
