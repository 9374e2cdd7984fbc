"""RAGFort intra-class protection: a draft/reference cascade with a copy-aware rejection rule.

A small *draft* model proposes γ tokens; the *reference* model scores the whole block in
one forward pass; Eq. 5 of RAGFort (§4.3) decides per position whether the emitted token
should follow the draft (r̂ = 0) or the reference (r̂ = 1); Algorithm 1 turns that into
speculative acceptance (min(1, p/q)) and a residual distribution on rejection, so every
emitted token is distributed as π = (1 − r̂)·q + r̂·p.

Example (any two causal LMs that share a tokenizer; the Qwen2.5-Coder 0.5B/1.5B pair in
MODELS.md is the intended one)::

    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(ref_dir)
    gen = CascadeGenerator(AutoModelForCausalLM.from_pretrained(draft_dir),
                           AutoModelForCausalLM.from_pretrained(ref_dir), tok)
    out = gen.generate("What causes panic attacks?", ["Panic disorder is ..."])
    print(out.text, out.details["reference_forwards"], out.details["flops"])

What z, q_t(z) and p_t(z) are here
    RAGFort defines q_t(z) as "the probability of generating chunk z" under the draft, but
    not at token level. Here z is the set of retrieved chunks (the contexts passed to
    ``generate``), tokenised with the shared tokenizer. At answer position t the *copy set*
    C_t holds every token y such that the last ``span − 1`` answer tokens followed by y
    form a contiguous token span of some retrieved chunk — i.e. the tokens that would
    continue (or extend) a verbatim copy of ``span`` tokens. Then q_t(z) = Σ_{y∈C_t} q_t(y)
    and p_t(z) = Σ_{y∈C_t} p_t(y): the probability each model puts on continuing a verbatim
    span of a retrieved chunk. When C_t is empty both are 0 and the η term is dropped
    (:func:`~ragshield.generate.cascade_math.copy_ratio`).

Models
    ``draft`` and ``reference`` may be ``transformers`` causal LMs (KV-cached here, the
    cache rolled back after rejected drafts), objects exposing one as ``.model_`` (and the
    tokenizer as ``.tokenizer_``), ragshield's llama.cpp generators (the packaged GGUF on
    its own engine, the cache rolled back the same way: :mod:`ragshield.generate.
    llama_cascade`; what ``make_generator`` returns when llama.cpp is installed), or plain
    callables ``f(prefixes) -> logits`` mapping a batch of token-id prefixes to next-token
    logits of shape ``(len(prefixes), vocab)``.

Cost accounting
    Forward passes and tokens processed are counted per model and per answer; FLOPs are
    estimated as 2·params·tokens (prefill included), next to the same estimate for decoding
    with the reference alone, which is what paper Table 3 compares. ``gamma=0`` runs the
    reference alone through the same prompt and decoding code: the undefended baseline.

How each model is asked for logits (KV cache, rollback) is :mod:`ragshield.generate.cascade_scorers`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ragshield.defenses.params import StagedParams
from ragshield.errors import InputError, check_float, check_int, check_query
from ragshield.generate import cascade_math as cm
from ragshield.generate.cascade_scorers import (  # noqa: F401  (_HFScorer: tests)
    _OWNER,
    LogitsFn,
    _Counter,
    _HFScorer,
    _make_scorer,
    _Scorer,
    _unwrap,
)
from ragshield.generate.prompt import build_messages, build_prompt, system_prompt
from ragshield.types import Generation


class ChunkCopyIndex:
    """Which next tokens would continue a verbatim span of a retrieved chunk.

    Built once per answer from the tokenised chunks: a map from every (span − 1)-token
    window of a chunk to the tokens that follow it anywhere in the chunks.
    """

    def __init__(self, chunks: Sequence[Sequence[int]], span: int) -> None:
        self.span = span
        width = span - 1
        table: dict[tuple[int, ...], set[int]] = {}
        for toks in chunks:
            t = list(toks)
            for k in range(len(t) - width):
                table.setdefault(tuple(t[k : k + width]), set()).add(int(t[k + width]))
        self._table = {key: np.fromiter(v, dtype=np.int64) for key, v in table.items()}
        self._empty = np.zeros(0, dtype=np.int64)

    def copy_set(self, answer: Sequence[int]) -> np.ndarray:
        """Token ids y for which ``answer[-(span-1):] + [y]`` is a chunk span (may be empty)."""
        width = self.span - 1
        if len(answer) < width:
            return self._empty
        key = tuple(int(a) for a in answer[len(answer) - width :])
        return self._table.get(key, self._empty)


@dataclass
class _Stats:
    blocks: int = 0
    drafted: int = 0
    accepted: int = 0
    rejections: int = 0
    deferrals: int = 0  # positions with r̂ = 1
    copy_positions: int = 0  # positions with a non-empty copy set
    copy_deferrals: int = 0
    from_reference: int = 0  # tokens drawn from a residual or the bonus distribution
    trace: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class CascadeRule:
    """Eq. 5 and Algorithm 1 of RAGFort: when the emitted token follows the reference.

    gamma: draft block size γ; ``0`` decodes with the reference alone (baseline).
    alpha: α, weight of D_TV(p, q) in Eq. 5; larger means fewer deferrals to the reference.
    eta: η, weight of q_t(z)/p_t(z) in Eq. 5; larger means deferring sooner when the draft
        leans harder than the reference towards copying a retrieved chunk.
    span: tokens of verbatim chunk text that count as copying (defines q_t(z), p_t(z)).
    """

    gamma: int = 5  # RAGFort §4.3 gives no γ; 5 is a common speculative block size
    alpha: float = 0.5  # RAGFort §4.3 gives no α (a Lagrange multiplier, Eq. 3)
    eta: float = 1.0  # RAGFort §4.3 gives no η (a Lagrange multiplier, Eq. 3)
    span: int = 4  # not in RAGFort: our token-level reading of "generating chunk z"


@dataclass(frozen=True)
class CascadeDecoding:
    """How the cascade's answer is prompted, sampled and cut.

    do_sample, temperature: sampling with temperature, or greedy decoding (the default).
    max_new_tokens, stop: generation stops at EOS, after ``max_new_tokens`` or at the first
        stop string (cut off the returned text).
    seed: seeds a fresh ``numpy`` generator per call, so one question gives one answer.
    use_chat_template: wrap the papers' prompt in the tokenizer's chat template if it has
        one (instruct models ramble on a raw ``Answer:`` prompt), else the plain prompt.
    prompt_style: ``"poisonedrag"`` or ``"ragfort"`` (see :mod:`ragshield.generate.prompt`).
    """

    do_sample: bool = False  # ours: greedy, as the other generators
    temperature: float = 1.0  # ours: the model's own distribution when sampling
    max_new_tokens: int = 128  # ours: RAGFort's attack prompts ask for long copies
    stop: Sequence[str] = ()  # ours: none; the pipeline's answers pass ["\n"]
    seed: int = 0  # ours
    use_chat_template: bool = True  # ours: instruct models ramble on a raw prompt
    prompt_style: str = "poisonedrag"  # ours: the papers' RAG prompt


class CascadeGenerator(StagedParams):
    """RAGFort's cascade (Algorithm 1, Eq. 5) as a ragshield :class:`Generator`.

    Parameters
    ----------
    draft, reference: the two causal LMs (see the module docstring for accepted forms).
        They must share the tokenizer and vocabulary; the vocabulary width is checked on
        the first forward pass.
    tokenizer: the shared ``transformers`` tokenizer; taken from ``reference.tokenizer_`` or
        ``draft.tokenizer_`` when omitted.
    rule: :class:`CascadeRule` (``gamma``, ``alpha``, ``eta``, ``span``: Eq. 5 and
        Algorithm 1) or a table of its fields.
    decoding: :class:`CascadeDecoding` (``do_sample``, ``temperature``,
        ``max_new_tokens``, ``stop``, ``seed``, ``use_chat_template``, ``prompt_style``)
        or a table of its fields. Every field of both is also taken, read and assigned by
        its own name (``CascadeGenerator(d, r, gamma=0)``, ``gen.seed = 3``), the names
        ``ragfort`` configs use.
    draft_params, reference_params: parameter counts for the FLOPs estimate when the models
        are callables (taken from the model otherwise).
    trace: keep a per-token record (source model, r̂, copy mass) in ``details["trace"]``.
    """

    name = "ragfort-cascade"
    _stages: ClassVar[Mapping[str, type]] = {"rule": CascadeRule, "decoding": CascadeDecoding}
    _own_params = ("draft", "reference", "tokenizer", "draft_params", "reference_params", "trace")
    rule: CascadeRule
    decoding: CascadeDecoding
    gamma: int
    alpha: float
    eta: float
    span: int
    do_sample: bool
    temperature: float
    max_new_tokens: int
    stop: Sequence[str]
    seed: int
    use_chat_template: bool
    prompt_style: str

    def __init__(
        self,
        draft: Any,
        reference: Any,
        tokenizer: Any = None,
        *,
        rule: CascadeRule | Mapping[str, Any] | None = None,
        decoding: CascadeDecoding | Mapping[str, Any] | None = None,
        draft_params: int | None = None,
        reference_params: int | None = None,
        trace: bool = False,
        **flat: Any,  # a field of rule or decoding by its own name (gamma=0, seed=3, ...)
    ) -> None:
        self.draft = draft
        self.reference = reference
        self.tokenizer = tokenizer
        self.draft_params = draft_params
        self.reference_params = reference_params
        self.trace = trace
        self._set_stages({"rule": rule, "decoding": decoding}, flat)
        self._tokenizer: Any = None
        self._draft_scorer: _Scorer | None = None
        self._ref_scorer: _Scorer | None = None

    # ---- set-up -------------------------------------------------------------------------
    def _validate(self) -> None:
        check_int(self.gamma, "gamma", _OWNER, low=0)
        check_float(self.alpha, "alpha", _OWNER, low=0.0, high=float("inf"))
        check_float(self.eta, "eta", _OWNER, low=0.0, high=float("inf"))
        check_int(self.span, "span", _OWNER, low=1)
        check_float(self.temperature, "temperature", _OWNER, low=0.0, high=100.0, low_open=True)
        check_int(self.max_new_tokens, "max_new_tokens", _OWNER, low=1)
        if isinstance(self.stop, str) or not all(isinstance(s, str) and s for s in self.stop):
            raise InputError(
                f"The 'stop' parameter of {_OWNER} must be a list of non-empty strings. "
                f"Got {self.stop!r} instead."
            )
        check_int(self.seed, "seed", _OWNER, low=0)
        system_prompt(self.prompt_style)
        for flag in ("do_sample", "use_chat_template", "trace"):
            if not isinstance(getattr(self, flag), bool):
                raise InputError(
                    f"The '{flag}' parameter of {_OWNER} must be a bool. "
                    f"Got {getattr(self, flag)!r} instead."
                )

    def cache_identity(self) -> dict[str, Any]:
        """Everything that changes the output for a given prompt (used by CachedGenerator)."""
        from ragshield.generate.cache import generator_identity

        settings = ("gamma", "alpha", "eta", "span", "do_sample", "temperature")
        return {
            "kind": "ragfort-cascade",
            "draft": generator_identity(self.draft),
            "reference": generator_identity(self.reference),
            **{k: getattr(self, k) for k in settings},
            "max_new_tokens": self.max_new_tokens,
            "stop": list(self.stop),
            "seed": self.seed,
            "use_chat_template": self.use_chat_template,
            "prompt_style": self.prompt_style,
        }

    def warm_up(self) -> None:
        """Validate parameters and wrap the models once; safe to call repeatedly."""
        if self._ref_scorer is not None:
            return
        self._validate()
        tok = self.tokenizer
        if tok is None:
            tok = getattr(self.reference, "tokenizer_", None) or getattr(
                self.draft, "tokenizer_", None
            )
        if tok is None:
            raise InputError(
                f"{_OWNER} needs the tokenizer the two models share: pass tokenizer=..."
            )
        self._tokenizer = tok
        self._draft_scorer = _make_scorer(self.draft, self.draft_params, "draft")
        self._ref_scorer = _make_scorer(self.reference, self.reference_params, "reference")

    @property
    def tokenizer_(self) -> Any:
        """The shared tokenizer (the argument, or the one the reference generator carries)."""
        self.warm_up()
        return self._tokenizer

    # ---- tokens -------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return len(self._encode(text))

    def _encode(self, text: str) -> list[int]:
        ids = self.tokenizer_(text, add_special_tokens=False)["input_ids"]
        return [int(i) for i in ids]

    def _prompt_ids(self, question: str, contexts: Sequence[str]) -> list[int]:
        tok = self.tokenizer_
        if self.use_chat_template and getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(
                build_messages(question, contexts, self.prompt_style),
                add_generation_prompt=True,
                tokenize=False,
            )
            return self._encode(str(text))
        return self._encode(build_prompt(question, contexts, self.prompt_style))

    def _eos_ids(self) -> set[int]:
        from ragshield.generate.local_hf import end_token_ids

        models = [_unwrap(obj) for obj in (self.reference, self.draft)]
        return set(end_token_ids(self.tokenizer_, *models))

    # ---- the cascade ----------------------------------------------------------------------
    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        """Answer ``question`` from ``contexts`` with Algorithm 1, block by block."""
        check_query(question)
        if isinstance(contexts, str):
            raise InputError("generate expects a list of context strings, got a bare string.")
        contexts = list(contexts)
        bad = [i for i, c in enumerate(contexts) if not isinstance(c, str)]
        if bad:
            raise InputError(f"contexts must all be strings; item {bad[0]} is not.")
        self.warm_up()
        assert self._draft_scorer is not None and self._ref_scorer is not None
        draft, ref = self._draft_scorer, self._ref_scorer
        draft.reset()
        ref.reset()
        t0 = time.perf_counter()
        rng = np.random.default_rng(self.seed) if self.do_sample else None
        prompt = self._prompt_ids(question, contexts)
        self._check_length(len(prompt))
        # Each chunk with and without a leading space: BPE tokenises a word differently at
        # the start of a text and after a space, and a copy can start either way.
        copy_index = ChunkCopyIndex(
            [self._encode(v) for c in contexts for v in (c, " " + c.lstrip())], self.span
        )
        eos = self._eos_ids()
        out: list[int] = []
        stats = _Stats()
        finished = False
        while not finished and len(out) < self.max_new_tokens:
            finished = self._block(prompt, out, copy_index, eos, rng, stats)
            if not finished and self.stop:
                done = self.tokenizer_.decode(out, skip_special_tokens=True).lstrip()
                finished = any(s in done for s in self.stop)
        if out and out[-1] in eos:
            out = out[:-1]
        # Leading whitespace is ignored for stop strings: instruct models often open their
        # turn with a newline, which must not end an answer that has not started.
        text = self.tokenizer_.decode(out, skip_special_tokens=True).lstrip()
        for s in self.stop:
            cut = text.find(s)
            if cut >= 0:
                text = text[:cut]
        seconds = time.perf_counter() - t0
        details = self._details(draft, ref, stats, len(prompt), len(out))
        details["completion_ids"] = out
        return Generation(
            text=text.strip(),
            prompt_tokens=len(prompt),
            completion_tokens=len(out),
            timings={
                "generate": seconds,
                "draft_forward": draft.counter.seconds,
                "reference_forward": ref.counter.seconds,
            },
            details=details,
        )

    def _check_length(self, n_prompt: int) -> None:
        for obj in (self.draft, self.reference):
            cfg = getattr(_unwrap(obj), "config", None)
            limit = getattr(cfg, "max_position_embeddings", None)
            if isinstance(limit, int) and n_prompt + self.max_new_tokens > limit:
                raise InputError(
                    f"the prompt has {n_prompt} tokens; with max_new_tokens="
                    f"{self.max_new_tokens} it exceeds the model's context of {limit} tokens. "
                    "Pass fewer or shorter contexts."
                )

    def _dist(self, logits: np.ndarray) -> np.ndarray:
        return cm.softmax(logits, self.temperature)

    def _block(
        self,
        prompt: list[int],
        out: list[int],
        copy_index: ChunkCopyIndex,
        eos: set[int],
        rng: np.random.Generator | None,
        stats: _Stats,
    ) -> bool:
        """One iteration of Algorithm 1; appends to ``out``; True when generation ended."""
        assert self._draft_scorer is not None and self._ref_scorer is not None
        prefix = prompt + out
        remaining = self.max_new_tokens - len(out)
        budget = min(self.gamma, remaining - 1)
        drafted: list[int] = []
        q_rows: list[np.ndarray] = []
        for _ in range(budget):  # lines 1–3: the draft proposes up to γ tokens
            q = self._dist(self._draft_scorer.logits(prefix + drafted, 1)[0])
            x = cm.draw(q, rng)
            q_rows.append(q)
            drafted.append(x)
            if x in eos:
                break
        g = len(drafted)
        p_logits = self._ref_scorer.logits(prefix + drafted, g + 1)  # lines 4–6, one pass
        p_rows = self._dist(p_logits)
        if q_rows and p_rows.shape[1] != q_rows[0].shape[0]:
            raise InputError(
                f"draft and reference vocabularies differ ({q_rows[0].shape[0]} vs "
                f"{p_rows.shape[1]} logits): the cascade needs two models that share a tokenizer."
            )
        pi_rows = np.empty_like(p_rows)
        rules: list[int] = []
        for j in range(g):  # lines 5–8: r̂ (Eq. 5) and π per position
            cset = copy_index.copy_set(out + drafted[:j])
            q_z = float(q_rows[j][cset].sum()) if cset.size else 0.0
            p_z = float(p_rows[j][cset].sum()) if cset.size else 0.0
            r = cm.rejection_rule(q_rows[j], p_rows[j], q_z, p_z, self.alpha, self.eta)
            rules.append(r)
            pi_rows[j] = cm.target_distribution(q_rows[j], p_rows[j], r)
            stats.deferrals += r
            if cset.size:
                stats.copy_positions += 1
                stats.copy_deferrals += r
            if self.trace:
                stats.trace.append({"token": drafted[j], "r": r, "q_z": q_z, "p_z": p_z})
        # Bonus position: "the verifier model is used to generate the starting token for the
        # next block" (§4.3), so π there is the reference's distribution.
        pi_rows[g] = p_rows[g]
        q_mat = np.vstack(q_rows) if q_rows else np.zeros((0, p_rows.shape[1]))
        verdict = cm.verify_block(drafted, q_mat, pi_rows, rng)  # lines 9–23
        kept = drafted[: verdict.n_accepted]
        stats.blocks += 1
        stats.drafted += g
        stats.accepted += verdict.n_accepted
        stats.rejections += int(verdict.rejected)
        out.extend(kept)
        if kept and kept[-1] in eos:
            return True
        nxt = cm.draw(verdict.next_distribution, rng)  # line 24
        stats.from_reference += 1
        out.append(nxt)
        return nxt in eos

    def _details(
        self, draft: _Scorer, ref: _Scorer, stats: _Stats, n_prompt: int, n_out: int
    ) -> dict[str, Any]:
        def flops(scorer: _Scorer) -> float | None:
            return None if scorer.params is None else 2.0 * scorer.params * scorer.counter.tokens

        d_flops, r_flops = flops(draft), flops(ref)
        total = None if d_flops is None or r_flops is None else d_flops + r_flops
        ref_only = None if ref.params is None else 2.0 * ref.params * (n_prompt + n_out)
        details: dict[str, Any] = {
            "gamma": self.gamma,
            "alpha": self.alpha,
            "eta": self.eta,
            "span": self.span,
            "draft_forwards": draft.counter.forwards,
            "reference_forwards": ref.counter.forwards,
            "draft_tokens_processed": draft.counter.tokens,
            "reference_tokens_processed": ref.counter.tokens,
            "blocks": stats.blocks,
            "drafted": stats.drafted,
            "accepted": stats.accepted,
            "rejections": stats.rejections,
            "deferrals": stats.deferrals,
            "copy_positions": stats.copy_positions,
            "copy_deferrals": stats.copy_deferrals,
            "from_reference": stats.from_reference,
            "acceptance_rate": stats.accepted / stats.drafted if stats.drafted else None,
            "flops_draft": d_flops,
            "flops_reference": r_flops,
            "flops": total,
            "flops_reference_only": ref_only,
        }
        if self.trace:
            details["trace"] = stats.trace
        return details
