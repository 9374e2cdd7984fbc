"""Adversarial-suffix attack: a GCG-style token string appended to a poisoned passage.

Example (transfer variant, no model)::

    from ragshield.attacks.suffix import AdversarialSuffixAttack, universal_suffixes

    print([s.id for s in universal_suffixes()])          # published GCG strings
    attack = AdversarialSuffixAttack()                   # PoisonedRAG-style carrier + suffix
    texts = attack.craft("who wrote the iliad", "Virgil", n=2, seed=0)

Example (white-box optimiser against a local causal LM; slow on CPU)::

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from ragshield.attacks.suffix import GCGSuffixOptimizer

    tok = AutoTokenizer.from_pretrained(folder)
    lm = AutoModelForCausalLM.from_pretrained(folder)
    opt = GCGSuffixOptimizer(lm, tok, n_tokens=10, steps=20, batch_size=32)
    res = opt.optimize(question, contexts, adv_index=0, target="Virgil")
    print(res.initial_loss, "->", res.best_loss, repr(res.suffix))

Two variants, as the issue asks:

(a) *Transfer*: the published universal suffixes of Zou et al. 2023 (GCG), shipped as
    fixtures in ``attacks/data/gcg_suffixes.json``, appended to poisoned passages.
(b) *White-box*: :class:`GCGSuffixOptimizer`, greedy coordinate gradient (Zou et al. 2023,
    Algorithm 1) or plain random search over tokens (Andriushchenko et al. 2024), against
    any Hugging Face causal LM passed in as objects. The objective is the negative
    log-probability of the attacker's target answer right after the RAG prompt
    (:func:`ragshield.generate.prompt.build_prompt`) in which the poisoned passage carries
    the suffix; lower loss = the generator is more likely to answer the target.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import numpy as np

from ragshield.errors import InputError, check_int, check_query
from ragshield.generate.prompt import build_prompt

#: PoisonedRAG-style carrier (S = question, I = a statement of the target answer) used
#: when no real poisoned passage is supplied.
DEFAULT_CARRIER = "{question}. The answer to this question is {answer}."

_MARK = "\u2063SUFFIX\u2063"  # invisible separators: never produced by a real passage


@dataclass(frozen=True)
class UniversalSuffix:
    id: str
    suffix: str
    source: str


@lru_cache(maxsize=1)
def universal_suffixes() -> tuple[UniversalSuffix, ...]:
    """The published GCG suffixes shipped with ragshield (verbatim, with their source)."""
    raw = resources.files("ragshield.attacks").joinpath("data/gcg_suffixes.json").read_text("utf-8")
    data = json.loads(raw)
    return tuple(UniversalSuffix(s["id"], s["suffix"], s["source"]) for s in data["suffixes"])


def append_suffix(passage: str, suffix: str) -> str:
    """``passage`` + one space + ``suffix``: how GCG appends its string to the input."""
    return f"{passage.rstrip()} {suffix.strip()}"


class AdversarialSuffixAttack:
    """Poisoned passages carrying an adversarial suffix (a :class:`CorpusAttack`).

    Parameters
    ----------
    suffixes: suffix strings; ``None`` = the published GCG strings
        (:func:`universal_suffixes`, without the ``gcg-init`` control), or the output of
        :class:`GCGSuffixOptimizer`.
    carriers: optional question -> poisoned passages (e.g. PoisonedRAG's); otherwise the
        ``carrier`` template is filled with the question and the target answer.
    carrier: template with ``{question}`` and ``{answer}``.
    """

    name = "suffix"

    def __init__(
        self,
        suffixes: Sequence[str] | None = None,
        carriers: Mapping[str, Sequence[str]] | None = None,
        *,
        carrier: str = DEFAULT_CARRIER,
    ) -> None:
        self.suffixes = suffixes
        self.carriers = carriers
        self.carrier = carrier

    def _suffixes(self) -> list[str]:
        if self.suffixes is None:
            return [s.suffix for s in universal_suffixes() if s.id != "gcg-init"]
        if isinstance(self.suffixes, str) or not self.suffixes:
            raise InputError(
                "The 'suffixes' parameter of AdversarialSuffixAttack must be a non-empty list "
                f"of strings. Got {self.suffixes!r} instead."
            )
        return [str(s) for s in self.suffixes]

    def craft(self, question: str, target_answer: str, n: int, *, seed: int = 0) -> list[str]:
        check_query(question)
        check_int(n, "n", "AdversarialSuffixAttack.craft", low=0)
        suffixes = self._suffixes()
        carriers = [t for t in (self.carriers or {}).get(question, ()) if t.strip()]
        if not carriers:
            q = question.strip().rstrip("?").strip()
            carriers = [self.carrier.replace("{question}", q).replace("{answer}", target_answer)]
        rng = random.Random(seed)
        order = list(range(len(carriers)))
        rng.shuffle(order)
        out: list[str] = []
        seen: set[str] = set()
        # distinct carriers first (one suffix each, cycling), then other suffix pairings
        for k in range(len(carriers) * len(suffixes)):
            if len(out) == n:
                break
            c = order[k % len(carriers)]
            s = suffixes[(k + seed) % len(suffixes)]
            text = append_suffix(carriers[c], s)
            if text not in seen:
                seen.add(text)
                out.append(text)
        return out


# --------------------------------------------------------------------------- optimiser


@dataclass
class SuffixResult:
    """What one optimisation produced. ``losses[i]`` is the best loss after step ``i``."""

    suffix: str
    suffix_ids: list[int]
    initial_loss: float
    best_loss: float
    retokenized_loss: float
    losses: list[float] = field(default_factory=list)
    steps: int = 0
    seconds: float = 0.0
    method: str = "gcg"


class GCGSuffixOptimizer:
    """Greedy coordinate gradient / random search for a RAG adversarial suffix.

    Parameters
    ----------
    model, tokenizer: a Hugging Face causal LM and its tokenizer (objects, loaded by the
        caller from a local folder; nothing is downloaded here).
    n_tokens: suffix length in tokens (GCG: 20).
    steps: optimisation steps (GCG: 500; CPU runs use tens).
    topk: candidate tokens per position from the gradient (GCG: 256).
    batch_size: candidate suffixes evaluated per step (GCG: 512).
    method: ``"gcg"`` (gradient-guided candidates) or ``"random"`` (uniform candidates,
        no gradient: works with any model, weaker per step).
    seed: makes candidate sampling reproducible.
    prompt_builder: ``(question, contexts) -> prompt``; default the papers' RAG prompt.
    ascii_only: restrict the suffix to printable ASCII tokens (as GCG's default filter).

    Candidates whose text does not re-tokenise to the same ids are skipped (GCG's
    consistency filter), so the returned string really is the optimised token sequence;
    ``retokenized_loss`` re-checks that from the string.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        n_tokens: int = 20,  # Zou et al. 2023 (GCG) experiments: 20-token suffix
        steps: int = 50,
        topk: int = 256,  # Zou et al. 2023 (GCG) experiments: top-k = 256
        batch_size: int = 64,  # Zou et al. 2023 use B = 512; smaller for CPU
        method: Literal["gcg", "random"] = "gcg",
        seed: int = 0,
        prompt_builder: Callable[[str, Sequence[str]], str] = build_prompt,
        ascii_only: bool = True,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.n_tokens = n_tokens
        self.steps = steps
        self.topk = topk
        self.batch_size = batch_size
        self.method = method
        self.seed = seed
        self.prompt_builder = prompt_builder
        self.ascii_only = ascii_only
        self._allowed: Any = None

    def _check(self) -> None:
        owner = type(self).__name__
        check_int(self.n_tokens, "n_tokens", owner, low=1)
        check_int(self.steps, "steps", owner, low=0)
        check_int(self.topk, "topk", owner, low=1)
        check_int(self.batch_size, "batch_size", owner, low=1)
        if self.method not in ("gcg", "random"):
            raise InputError(
                f"The 'method' parameter of {owner} must be one of 'gcg', 'random'. "
                f"Got {self.method!r} instead."
            )

    # ------------------------------------------------------------------ tokens

    def _encode(self, text: str, *, special: bool = False) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=special)["input_ids"]
        return [int(i) for i in ids]

    def allowed_tokens(self) -> Any:
        """Bool tensor over the vocabulary: tokens a suffix may use (no special tokens;
        printable ASCII only when ``ascii_only``)."""
        import torch

        if self._allowed is None:
            vocab = int(self.model.get_input_embeddings().weight.shape[0])
            ok = np.ones(vocab, dtype=bool)
            special = set(getattr(self.tokenizer, "all_special_ids", []) or [])
            for i in range(vocab):
                if i in special:
                    ok[i] = False
                    continue
                if self.ascii_only:
                    s = self.tokenizer.decode([i])
                    ok[i] = bool(s) and s.isascii() and s.isprintable() and bool(s.strip())
            self._allowed = torch.from_numpy(ok)
        return self._allowed

    def _pieces(
        self, question: str, contexts: Sequence[str], adv_index: int, target: str
    ) -> tuple[list[int], list[int], list[int]]:
        ctx = list(contexts)
        ctx[adv_index] = f"{ctx[adv_index].rstrip()} {_MARK}"
        prompt = self.prompt_builder(question, ctx)
        if prompt.count(_MARK) != 1:
            raise InputError("the prompt builder must include every context exactly once.")
        before, after = prompt.split(_MARK)
        before = before.rstrip(" ")
        return (
            self._encode(before, special=True),
            self._encode(after),
            self._encode(" " + target.strip()),
        )

    # ------------------------------------------------------------------ loss

    def _losses(self, prefix: list[int], suffixes: Any, after: list[int], target: list[int]) -> Any:
        """Per-candidate mean cross-entropy of the target tokens (batched, no grad)."""
        import torch

        b = suffixes.shape[0]
        ids = torch.cat(
            [
                torch.tensor(prefix).expand(b, -1),
                suffixes,
                torch.tensor(after + target).expand(b, -1),
            ],
            dim=1,
        )
        with torch.no_grad():
            logits = self.model(input_ids=ids).logits
        t = len(target)
        pred = logits[:, -t - 1 : -1, :].float()
        tgt = torch.tensor(target).expand(b, -1)
        ce = torch.nn.functional.cross_entropy(pred.transpose(1, 2), tgt, reduction="none")
        return ce.mean(dim=1)

    def _gradient(self, prefix: list[int], suffix: Any, after: list[int], target: list[int]) -> Any:
        """d loss / d one-hot(suffix): the GCG coordinate gradient, shape (n_tokens, V)."""
        import torch

        emb_layer = self.model.get_input_embeddings()
        w = emb_layer.weight
        one_hot = torch.zeros(suffix.shape[0], w.shape[0], dtype=w.dtype)
        one_hot[torch.arange(suffix.shape[0]), suffix] = 1.0
        one_hot.requires_grad_(True)
        embeds = torch.cat(
            [
                emb_layer(torch.tensor(prefix)).detach(),
                one_hot @ w,
                emb_layer(torch.tensor(after + target)).detach(),
            ],
            dim=0,
        ).unsqueeze(0)
        logits = self.model(inputs_embeds=embeds).logits[0]
        t = len(target)
        loss = torch.nn.functional.cross_entropy(logits[-t - 1 : -1].float(), torch.tensor(target))
        (grad,) = torch.autograd.grad(loss, one_hot)
        return grad

    @contextmanager
    def _eval_mode(self) -> Iterator[None]:
        """Dropout off while scoring; the caller's train/eval mode is restored afterwards."""
        was_training = bool(getattr(self.model, "training", False))
        self.model.eval()
        try:
            yield
        finally:
            if was_training:
                self.model.train()

    def target_loss(
        self, question: str, contexts: Sequence[str], adv_index: int, target: str
    ) -> float:
        """Mean target cross-entropy with the contexts exactly as given (string level)."""
        import torch

        prompt = self.prompt_builder(question, list(contexts))
        p = self._encode(prompt, special=True)
        t = self._encode(" " + target.strip())
        ids = torch.tensor([p + t])
        with self._eval_mode(), torch.no_grad():
            logits = self.model(input_ids=ids).logits[0]
        ce = torch.nn.functional.cross_entropy(logits[-len(t) - 1 : -1].float(), torch.tensor(t))
        return float(ce)

    # ------------------------------------------------------------------ search

    def optimize(
        self,
        question: str,
        contexts: Sequence[str],
        adv_index: int,
        target: str,
        *,
        init: str | None = None,
        log: Callable[[str], None] | None = None,
    ) -> SuffixResult:
        """Optimise a suffix for ``contexts[adv_index]`` so the model answers ``target``."""
        import torch

        self._check()
        check_query(question)
        if isinstance(contexts, str) or not contexts:
            raise InputError("contexts must be a non-empty list of passage texts.")
        if not 0 <= adv_index < len(contexts):
            raise InputError(
                f"adv_index ({adv_index}) must index the contexts (0..{len(contexts) - 1})."
            )
        if not target.strip():
            raise InputError("the target answer is empty.")
        t0 = time.perf_counter()
        gen = torch.Generator().manual_seed(self.seed)
        with self._eval_mode():
            prefix, after, tgt = self._pieces(question, contexts, adv_index, target)
            allowed = self.allowed_tokens()
            allowed_ids = torch.nonzero(allowed).flatten()
            suffix = self._init_suffix(init, allowed_ids, gen)
            current = float(self._losses(prefix, suffix.unsqueeze(0), after, tgt)[0])
            initial, best, best_ids = current, current, suffix.clone()
            history: list[float] = []
            for step in range(self.steps):
                cands = self._candidates(prefix, suffix, after, tgt, allowed, allowed_ids, gen)
                if cands.shape[0] == 0:
                    history.append(best)
                    continue
                losses = self._losses(prefix, cands, after, tgt)
                j = int(torch.argmin(losses))
                # GCG keeps the best candidate of the batch; random search only improves.
                if self.method == "gcg" or float(losses[j]) < current:
                    suffix, current = cands[j].clone(), float(losses[j])
                if current < best:
                    best, best_ids = current, suffix.clone()
                history.append(best)
                if log is not None:
                    log(f"step {step + 1}/{self.steps}: loss {current:.4f} (best {best:.4f})")
            text = self.tokenizer.decode(best_ids.tolist())
            ctx = list(contexts)
            ctx[adv_index] = append_suffix(ctx[adv_index], text)
            retok = self.target_loss(question, ctx, adv_index, target)
        return SuffixResult(
            suffix=text,
            suffix_ids=[int(i) for i in best_ids.tolist()],
            initial_loss=initial,
            best_loss=best,
            retokenized_loss=retok,
            losses=history,
            steps=self.steps,
            seconds=time.perf_counter() - t0,
            method=self.method,
        )

    def _init_suffix(self, init: str | None, allowed_ids: Any, gen: Any) -> Any:
        """GCG starts from "! ! ! …"; fall back to random allowed tokens."""
        import torch

        ids = self._encode(init if init is not None else " !" * self.n_tokens)
        if len(ids) >= self.n_tokens:
            return torch.tensor(ids[: self.n_tokens])
        pick = torch.randint(len(allowed_ids), (self.n_tokens - len(ids),), generator=gen)
        return torch.cat([torch.tensor(ids, dtype=torch.long), allowed_ids[pick]])

    def _candidates(
        self,
        prefix: list[int],
        suffix: Any,
        after: list[int],
        target: list[int],
        allowed: Any,
        allowed_ids: Any,
        gen: Any,
    ) -> Any:
        """``batch_size`` single-token swaps that survive the re-tokenisation filter."""
        import torch

        n = suffix.shape[0]
        b = self.batch_size
        pos = torch.randint(n, (b,), generator=gen)
        if self.method == "gcg":
            grad = self._gradient(prefix, suffix, after, target)
            grad[:, ~allowed] = float("inf")
            k = min(self.topk, int(allowed.sum()))
            top = torch.topk(-grad, k, dim=1).indices  # (n, k)
            new_tok = top[pos, torch.randint(k, (b,), generator=gen)]
        else:
            new_tok = allowed_ids[torch.randint(len(allowed_ids), (b,), generator=gen)]
        cands = suffix.unsqueeze(0).repeat(b, 1)
        cands[torch.arange(b), pos] = new_tok
        keep = [
            i
            for i in range(b)
            if not torch.equal(cands[i], suffix)
            and self._encode(self.tokenizer.decode(cands[i].tolist())) == cands[i].tolist()
        ]
        return cands[keep] if keep else cands[:0]
