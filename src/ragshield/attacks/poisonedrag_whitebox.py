"""PoisonedRAG white-box: HotFlip the retrieval prefix against the index's own encoder.

Example::

    from ragshield.attacks.poisonedrag_whitebox import PoisonedRAGWhiteBoxAttack
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

    enc = SentenceTransformerEncoder()                  # the encoder the index was built with
    attack = PoisonedRAGWhiteBoxAttack(enc)             # passages I from the black-box LLM
    texts = attack.craft("what is the capital of australia", "Sydney", n=2, seed=0)

PoisonedRAG's white-box attacker (Zou et al., USENIX Security 2025) knows the retriever. Its
passage is ``S ⊕ I``: ``I`` satisfies the generation condition (the LLM-written passage of
the black-box attack), and ``S`` is optimised so that ``S ⊕ I`` is as similar as possible to
the question; ``S`` starts as the question itself and is refined by HotFlip token
substitutions (Ebrahimi et al. 2018), as in the corpus-poisoning attack of Zhong et al.
(2023) that PoisonedRAG follows. Each step: the gradient of cos(question, S ⊕ I) with
respect to the one-hot tokens of ``S`` ranks replacement tokens for one random position
(first-order gain ``(e_new − e_old)·∇``); the ``candidates`` best are scored exactly in one
batch and the best replaces the current token when it raises the similarity.

Scope: sentence-transformers encoders whose pipeline is a Hugging Face transformer +
mean pooling (+ normalisation), such as the packaged all-MiniLM-L6-v2; any other encoder is
an :class:`~ragshield.errors.InputError`. The returned text is decoded from the token ids and
its similarity re-measured with the encoder's own ``encode`` (:class:`WhiteBoxPassage`).
Step counts are CPU-sized (ours): Zhong et al. run thousands of steps on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ragshield.attacks.llm_passages import CraftedPassage
from ragshield.attacks.poisonedrag import PoisonedRAGAttack
from ragshield.embed.base import Encoder
from ragshield.embed.sentence_transformer import DefaultEncoder
from ragshield.errors import InputError, check_int, check_query


@dataclass(frozen=True)
class WhiteBoxPassage:
    """One optimised passage: ``text = prefix + " " + body``, with the similarity to the
    question before (prefix = the question) and after optimisation, measured by
    ``encoder.encode`` on the final strings."""

    text: str
    prefix: str
    body: str
    similarity_before: float
    similarity_after: float
    generated_by: str


class PoisonedRAGWhiteBoxAttack(DefaultEncoder):
    """PoisonedRAG white-box passages (a :class:`~ragshield.attacks.base.CorpusAttack`).

    Parameters
    ----------
    encoder: the retriever's encoder (a sentence-transformers one); ``None`` = packaged
        MiniLM.
    generator: writes the ``I`` part, as for :class:`PoisonedRAGAttack` (``"template"``
        = no LLM).
    steps: HotFlip steps per passage.
    candidates: replacement tokens scored exactly per step.
    """

    name = "poisonedrag-whitebox"

    def __init__(
        self,
        encoder: Encoder | None = None,
        generator: object = None,
        *,
        steps: int = 30,
        candidates: int = 32,
    ) -> None:
        self.encoder = encoder
        self.generator = generator
        self.steps = steps
        self.candidates = candidates
        self._blackbox: PoisonedRAGAttack | None = None

    @property
    def blackbox_(self) -> PoisonedRAGAttack:
        if self._blackbox is None:
            self._blackbox = PoisonedRAGAttack(self.generator)
        return self._blackbox

    @property
    def generated_by(self) -> str:
        return self.blackbox_.generated_by

    def craft(self, question: str, target_answer: str, n: int, *, seed: int = 0) -> list[str]:
        return [p.text for p in self.craft_passages(question, target_answer, n, seed=seed)]

    def craft_passages(
        self, question: str, target_answer: str, n: int, *, seed: int = 0
    ) -> list[WhiteBoxPassage]:
        owner = type(self).__name__
        check_int(self.steps, "steps", owner, low=0)
        check_int(self.candidates, "candidates", owner, low=1)
        bodies: list[CraftedPassage] = self.blackbox_.craft_passages(
            question, target_answer, n, seed=seed
        )
        return [
            self.optimize(question, b.body, seed=seed + i, generated_by=b.generated_by)
            for i, b in enumerate(bodies)
        ]

    # ------------------------------------------------------------------ HotFlip

    def _parts(self) -> tuple[Any, Any, Any]:
        """``(tokenizer, transformer, embedding matrix)`` of a mean-pooling ST encoder."""
        model = getattr(self.encoder_, "model_", None)
        tok = hf = None
        mean = False
        try:
            tok = model.tokenizer  # type: ignore[union-attr]
            hf = model[0].auto_model  # type: ignore[index]
            pooling = model[1]  # type: ignore[index]
            mean = getattr(pooling, "pooling_mode", None) == "mean" or (
                getattr(pooling, "pooling_mode_mean_tokens", False) is True  # older releases
            )
        except (AttributeError, TypeError, IndexError, KeyError):
            pass
        if hf is None or tok is None or not mean:
            raise InputError(
                "the white-box attack needs a sentence-transformers encoder with mean pooling "
                f"(got {type(self.encoder_).__name__}); use 'poisonedrag-blackbox' instead."
            )
        return tok, hf, hf.get_input_embeddings().weight

    def optimize(
        self, question: str, body: str, *, seed: int = 0, generated_by: str = "template"
    ) -> WhiteBoxPassage:
        """HotFlip the prefix of ``question + " " + body`` towards the question."""
        import torch

        check_query(question)
        check_query(body, what="passage body")
        tok, hf, weight = self._parts()
        was_training = bool(hf.training)
        hf.eval()
        gen = torch.Generator().manual_seed(seed)
        q_vec = torch.from_numpy(np.asarray(self.encoder_.encode([question])[0]))
        s_ids = tok(question.strip(), add_special_tokens=False)["input_ids"]
        i_ids = tok(body.strip(), add_special_tokens=False)["input_ids"]
        limit = int(getattr(tok, "model_max_length", 512) or 512)
        limit = min(limit, int(getattr(self.encoder_.model_, "max_seq_length", limit) or limit))  # type: ignore[attr-defined]
        i_ids = i_ids[: max(0, limit - 2 - len(s_ids))]
        cls_id, sep_id = tok.cls_token_id, tok.sep_token_id
        banned = torch.zeros(weight.shape[0], dtype=torch.bool)
        banned[list(tok.all_special_ids)] = True
        for t, i in tok.get_vocab().items():
            if t.startswith("[unused"):
                banned[i] = True

        def ids_of(prefix: torch.Tensor) -> torch.Tensor:
            return torch.cat(
                [
                    torch.tensor([cls_id]),
                    prefix,
                    torch.tensor(i_ids, dtype=torch.long),
                    torch.tensor([sep_id]),
                ]
            )

        def pooled(embeds: torch.Tensor) -> torch.Tensor:
            mask = torch.ones(embeds.shape[:2])
            out = hf(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
            vec = out.mean(dim=1)
            return torch.nn.functional.normalize(vec, dim=-1)

        def sims(prefixes: torch.Tensor) -> torch.Tensor:
            batch = torch.stack([ids_of(p) for p in prefixes])
            with torch.no_grad():
                out = hf(input_ids=batch, attention_mask=torch.ones_like(batch)).last_hidden_state
                vec = torch.nn.functional.normalize(out.mean(dim=1), dim=-1)
            return vec @ q_vec

        try:
            prefix = torch.tensor(s_ids, dtype=torch.long)
            current = float(sims(prefix.unsqueeze(0))[0])
            for _ in range(self.steps):
                if len(prefix) == 0:
                    break
                one_hot = torch.nn.functional.one_hot(ids_of(prefix), weight.shape[0]).to(
                    weight.dtype
                )
                one_hot.requires_grad_(True)
                sim = pooled((one_hot @ weight).unsqueeze(0))[0] @ q_vec
                (grad,) = torch.autograd.grad(sim, one_hot)
                pos = int(torch.randint(len(prefix), (1,), generator=gen))
                # d sim / d one-hot[v] = e_v · ∇_embedding: HotFlip's first-order gain of
                # each replacement (the e_old term is the same for all); +1 skips [CLS]
                gain = grad[pos + 1].clone()
                gain[banned] = -float("inf")
                gain[prefix[pos]] = -float("inf")
                top = torch.topk(gain, self.candidates).indices
                cands = prefix.unsqueeze(0).repeat(len(top), 1)
                cands[:, pos] = top
                scores = sims(cands)
                j = int(torch.argmax(scores))
                if float(scores[j]) > current:
                    prefix, current = cands[j], float(scores[j])
        finally:
            if was_training:
                hf.train()
        text_prefix = tok.decode(prefix.tolist()).strip()
        before_text = f"{question.strip()} {body.strip()}"
        after_text = f"{text_prefix} {body.strip()}"
        before, after = self.encoder_.encode([before_text, after_text]) @ q_vec.numpy()
        return WhiteBoxPassage(
            after_text, text_prefix, body.strip(), float(before), float(after), generated_by
        )
