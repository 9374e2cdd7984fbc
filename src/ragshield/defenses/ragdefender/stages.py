"""The evidence stages of :meth:`RAGDefender.filter <.filter.RAGDefender.filter>`, in the
order it runs them, and the state they share (:class:`Work`).

Example::

    from ragshield.defenses.ragdefender import RAGDefender

    res = RAGDefender(encoder=enc).filter(question, retrieved)
    print(res.details["coverage_group"], res.details["knn_group"], res.details["echo"])

Why a module of its own: each stage reads one per-stage parameter dataclass
(:mod:`.settings`) and one computation module (:mod:`.typos`, :mod:`.coverage`,
:mod:`.echo`, :mod:`.groups`, :mod:`.claims`); the filter class only wires them. A stage
marks passages in :class:`Work` (removed, evidence, victim) with a reason; the dense-group
stage (:mod:`.grouping`) then reads that evidence. Over 500 lines because the stages are
one ordered sequence over one shared :class:`Work`; a module per stage would hide the order.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ragshield.defenses.params import StagedParams
from ragshield.defenses.ragdefender.claims import (
    claim_words,
    lone_claims,
    near_copy_conflicts,
    number_conflicts,
    union_consensus,
    unsupported_consensus,
)
from ragshield.defenses.ragdefender.coverage import question_coverage
from ragshield.defenses.ragdefender.echo import EchoVectors, echo_scores
from ragshield.defenses.ragdefender.evidence import (
    content_words,
    dense_groups,
    group_signature,
    oov_rate,
    outlier_to_spare,
    restates_question,
    trigram_cosine_matrix,
    typo_copies,
)
from ragshield.defenses.ragdefender.groups import DEFAULT_BARS, knn_group_members
from ragshield.defenses.ragdefender.index_support import RARE_SHARE, unheld_words
from ragshield.defenses.ragdefender.provenance import (
    BUILT,
    is_later,
    quoted_sources,
    spare_originals,
    unquoted,
)
from ragshield.defenses.ragdefender.settings import (
    STAGES,
    CopyParams,
    CoverageParams,
    EchoParams,
    EvidenceParams,
    GroupingParams,
    KnnParams,
    PaperParams,
)
from ragshield.defenses.ragdefender.typos import normalise_to_question
from ragshield.embed.base import Encoder
from ragshield.store.calibration_novelty import Novelty
from ragshield.text import split_sentences


class Work:
    """What the stages of one :meth:`RAGDefender.filter` call decide, shared between them."""

    def __init__(self, n: int, stamps: Sequence[_dt.datetime | None] | None = None) -> None:
        self.removed = np.zeros(n, dtype=bool)
        self.evidence = np.zeros(n, dtype=bool)  # restated or typo copy: attack evidence
        self.victim = np.zeros(n, dtype=bool)  # the original a typo copy was made from
        self.burst = np.zeros(n, dtype=bool)  # removed as an added burst (added_group_size)
        self.allowed = np.zeros((n, n), dtype=bool)  # pairs that feed Eq. 6
        self.reasons: dict[int, str] = {}
        self.echo: np.ndarray | None = None  # closest sentence to the question, per passage
        self.lex: np.ndarray | None = None  # character 3-gram cosine between passages
        self.second: np.ndarray | None = None  # 2nd retrieved neighbour, near-copies aside
        self.disagree: np.ndarray | None = None  # pairs stating different numbers
        self.coverage: np.ndarray | None = None  # question coverage per passage (0-100)
        # provenance.added_at per passage (read once per call), and which entered after the
        # index's build (:func:`~.provenance.is_later`)
        self.stamps: list[_dt.datetime | None] = list(stamps) if stamps is not None else [None] * n
        self.added = np.array([is_later(t) for t in self.stamps], dtype=bool)
        self.built = np.array([t == BUILT for t in self.stamps], dtype=bool)
        self._claims: dict[frozenset[str], list[frozenset[str]]] = {}  # per vocabulary
        self._quoted: dict[int, frozenset[int]] | None = None

    def claims(
        self, query: str, texts: Sequence[str], vocabulary: frozenset[str]
    ) -> list[frozenset[str]]:
        """:func:`~.claims.claim_words` of ``texts``, computed once per ``vocabulary`` (the
        lone-claim and the consensus stages share it)."""
        if vocabulary not in self._claims:
            self._claims[vocabulary] = claim_words(query, texts, vocabulary)
        return self._claims[vocabulary]

    def lexical(self, texts: Sequence[str]) -> np.ndarray:
        """:attr:`lex`, computed on first use (the coverage and the signal stages share it)."""
        if self.lex is None:
            self.lex = trigram_cosine_matrix(texts)
        return self.lex

    def disagreeing(self, texts: Sequence[str], query: str) -> np.ndarray:
        """:attr:`disagree`, computed on first use (:func:`~.claims.number_conflicts`)."""
        if self.disagree is None:
            self.disagree = number_conflicts(texts, query)
        return self.disagree

    def quoted_by(self, texts: Sequence[str]) -> dict[int, frozenset[int]]:
        """:func:`~.provenance.quoted_sources` of ``texts``, computed on first use (``{}``
        when no retrieved passage was added: the common case costs nothing)."""
        if self._quoted is None:
            self._quoted = quoted_sources(texts, self.stamps) if self.added.any() else {}
        return self._quoted

    def sources(self, texts: Sequence[str], members: np.ndarray) -> np.ndarray:
        """Which of ``members`` a strictly later one of them quotes and that has no attack
        evidence of its own: the page a copy was made from, which the copy's evidence must
        not take down (:func:`~.provenance.quoted_sources`)."""
        quoted = self.quoted_by(texts)
        if not quoted:
            return np.zeros(members.size, dtype=bool)
        inside = set(members.tolist())
        return np.array([bool(quoted.get(i, frozenset()) & inside) and not self.evidence[i]
                         for i in members.tolist()], dtype=bool)  # fmt: skip

    def built_alone(self, members: np.ndarray, least: int) -> np.ndarray:
        """Which of a group's ``members`` (indices) the index was built with, when the group
        holds an added passage and, without its added members, fewer than ``least`` would
        be left: those are no group of their own. Why: passages planted through ``ragshield
        add`` are written about a genuine page, so they gather round it, and the page went
        with them (SQuAD dev, PoisonedRAG: gold removed as a member of a loose group). A
        group of built passages alone, a poisoned build included, is judged as before. A
        member already caught (:attr:`evidence`) counts towards ``least`` but is never one
        of them: it stays out, in every stage that asks."""
        built = self.built[members]
        if not self.added[members].any() or int(built.sum()) >= least:
            return np.zeros(members.size, dtype=bool)
        return built & ~self.evidence[members]

    def remove(self, i: int, reason: str) -> None:
        self.removed[i] = True
        self.reasons.setdefault(i, reason)


class EvidenceStages(StagedParams):
    """The per-passage evidence stages; :class:`~.filter.RAGDefender` runs them in order."""

    encoder: Encoder | None
    paper: PaperParams
    grouping: GroupingParams
    copies: CopyParams
    evidence: EvidenceParams
    echo: EchoParams
    knn: KnnParams
    coverage: CoverageParams
    _vocabulary: frozenset[str] | None = None
    _group_bars: tuple[float, ...] = DEFAULT_BARS
    _index_words: frozenset[str] = frozenset()  # the index's common words (calibrate)
    _neighbourhood: float | None = None  # the index's median 9th-NN cosine (calibrate)
    _novelty: Mapping[str, Novelty] | None = None  # index-side novelty per passage (use_novelty)
    _stages = STAGES

    def __init__(self) -> None:
        self._echo = EchoVectors()

    def warm_up(self) -> None:
        """Load the whole-word WordPiece vocabulary of the packaged MiniLM (idempotent);
        it ships with the encoder package, so nothing is downloaded."""
        if self._vocabulary is None:
            from tokenizers import Tokenizer

            from ragshield.embed.sentence_transformer import packaged_model_path

            tok = Tokenizer.from_file(str(packaged_model_path() / "tokenizer.json"))
            self._vocabulary = frozenset(w for w in tok.get_vocab() if not w.startswith("##"))

    def _noise(self, texts: Sequence[str]) -> np.ndarray:
        self.warm_up()
        assert self._vocabulary is not None
        return oov_rate(texts, self._vocabulary)

    @property
    def scrutinises_added(self) -> bool:
        """Whether a stage judges passages that came through ``ragshield add`` harder
        (``lone_claim_added``, ``consensus_added_echo``, ``added_group_size``; each has an
        off value), which costs genuine additions on an index grown mostly that way
        (provenance.warn_if_mostly_added)."""
        return (self.coverage.lone_claim_added <= 2.0 or self.echo.consensus_added_echo <= 1.0
                or self.grouping.added_group_size >= 2)  # fmt: skip

    def bar_shift(self) -> float:
        """How far the similarity bars of the group and pair stages rise on this index: by as
        much as its typical top-10 neighbourhood (``IndexProfile.neighbourhood_similarity``)
        is tighter than ``loose_threshold``. Passage to passage: the tight and loose groups,
        the paraphrase pairs; passage to question: ``echo_threshold`` and ``consensus_echo``
        (in a tight index the retrieved passages sit closer to the question too).
        Why: the bars were chosen on encyclopedias whose ten nearest passages are looser
        than the loose bar (SQuAD 0.532, HotpotQA 0.295); on ChatDoctor (0.613) every
        retrieved set was a loose group, every close pair of patients' questions a
        "paraphrase pair" and three of them "a consensus close to the question", so one
        piece of evidence took a whole neighbourhood. 0 when ``neighbourhood_bars`` is off
        or the index was not profiled. ``lone_echo`` does not move (one passage; a Q&A
        index already needs two restating passages)."""
        if not self.grouping.neighbourhood_bars or self._neighbourhood is None:
            return 0.0
        return max(0.0, round(self._neighbourhood - self.grouping.loose_threshold, 4))

    def evidence_threshold(self) -> float:
        """Group density that no natural neighbourhood of the index reaches: the index's own
        calibration (``natural_similarity``, recorded at index time) when known, else
        ``dense_threshold``; never below the tight bar."""
        base = (
            self.evidence.dense_threshold
            if self.evidence.natural_similarity is None
            else self.evidence.natural_similarity
        )
        return max(base, self.grouping.tight_threshold + self.bar_shift())

    def _stage_typo_view(
        self, query: str, texts: list[str], vectors: np.ndarray, details: dict[str, Any]
    ) -> tuple[list[str], np.ndarray]:
        """Every later stage (but the typo-copy one, whose evidence *is* the typos) judges a
        passage as if its one-letter edits of question words were spelt right
        (:mod:`.typos`); the few passages this changes are re-encoded, so the planted-group
        density and the echo see through a typo'd question prefix."""
        if not self.copies.typo_view or not texts:
            return texts, vectors
        self.warm_up()
        assert self._vocabulary is not None
        fixed = [normalise_to_question(query, t, self._vocabulary) for t in texts]
        changed = [i for i, (_, c) in enumerate(fixed) if c > 0]
        details["typo_view"] = changed
        if not changed:
            return texts, vectors
        out = [t for t, _ in fixed]
        if self.encoder is not None:
            vectors = np.array(vectors, dtype=np.float32, copy=True)
            new = self._echo.whole(self.encoder, [out[i] for i in changed])
            vectors[changed] = new * np.linalg.norm(vectors[changed], axis=1, keepdims=True)
        return out, vectors

    @property
    def _restaters_needed(self) -> int:
        """Restating passages that make evidence: ``restate_min_passages``, 1 when unset
        (the index profile sets 2 on a Q&A corpus, where the gold entry restates)."""
        return self.evidence.restate_min_passages or 1

    def _stage_restated(
        self, query: str, texts: Sequence[str], work: Work, details: dict[str, Any]
    ) -> None:
        """Passages that contain the whole question verbatim: PoisonedRAG's black-box
        passages are ``question + "." + text`` so that they win retrieval. Natural text
        almost never restates a question of >= ``restate_min_words`` words word for word
        (real SQuAD / HotpotQA indexes: 0 of the benign top-10 passages of the dev
        questions), so one such passage is evidence on its own, with no group needed —
        except in a Q&A corpus, whose gold entry restates its question: there it takes
        ``restate_min_passages`` (the index profile sets 2; PoisonedRAG plants five)."""
        if not self.evidence.restated_question:
            return
        hits = np.flatnonzero(restates_question(query, texts, self.evidence.restate_min_words))
        if hits.size < self._restaters_needed:
            return
        for i in hits:
            work.remove(int(i), "restates the question verbatim (PoisonedRAG's retrieval trick)")
            work.evidence[i] = True
            details["restated"].append(int(i))

    def _stage_coverage(
        self,
        query: str,
        texts: Sequence[str],
        sim: np.ndarray,
        scores: np.ndarray,
        work: Work,
        details: dict[str, Any],
    ) -> None:
        """Several passages that each spell out most of the question, letter by letter
        (:func:`~.coverage.question_coverage` >= ``coverage_threshold``): a planted group
        that reworded, reordered, dropped words of or put typos in PoisonedRAG's question
        prefix. One or two such passages are no evidence: SQuAD's questions are written
        from their gold paragraph, which then spells them out (dev: 0.8 % of clean benign
        passages reach 85, max 95.9), and a gold paragraph beside one planted passage is a
        pair. ``coverage_min_group`` distinct ones are (lexical near-copies count once,
        ``group_lexical``: mirrors of the gold paragraph are one passage); the member at
        the group's edge and near the question is spared (:func:`outlier_to_spare`, the
        gold paragraph the group was written about: SQuAD dev, 48 of 50 such benign
        passages in fired groups spared on the seven reworded-prefix rows). When some
        members were already caught (verbatim restatements), a member that lacks every word
        they all push (:func:`group_signature`, the target answer) is the genuine one and
        stays as well: the gold paragraph beside PoisonedRAG's own passages."""
        if self.coverage.coverage_min_group > len(texts):
            return
        cov = question_coverage(query, texts, self.coverage.coverage_min_chars)
        work.coverage = cov
        details["coverage"] = cov.round(1).tolist()
        hi = np.flatnonzero(cov >= self.coverage.coverage_threshold)
        if hi.size < self.coverage.coverage_min_group:
            return
        lex = work.lexical(texts)
        distinct: list[int] = []
        for i in hi.tolist():
            if all(lex[i, j] < self.knn.group_lexical for j in distinct):
                distinct.append(i)
        if len(distinct) < self.coverage.coverage_min_group:
            return
        known = hi[work.evidence[hi]]  # already caught (a verbatim restatement)
        keep: set[int] = set()
        if known.size:  # what the caught ones push: a member without it is the genuine one
            sig = group_signature([texts[i] for i in known.tolist()], query)
            keep = {i for i in hi.tolist() if not work.evidence[i] and sig
                    and not sig & content_words(texts[i])}  # fmt: skip
        spared = self._spare(sim, hi, scores, work)
        details["coverage_spared"] = spared
        for i in hi.tolist():
            if i == spared or i in keep:
                continue
            work.remove(i, f"one of {len(distinct)} passages spelling out the question "
                           f"(coverage {cov[i]:.0f})")  # fmt: skip
            work.evidence[i] = True
            details["coverage_group"].append(i)

    def _spare(
        self, sim: np.ndarray, group: np.ndarray, scores: np.ndarray, work: Work
    ) -> int | None:
        """The member of a planted group at its edge and near the question
        (:func:`outlier_to_spare`: the genuine passage the group was written about), unless
        it is already caught (a verbatim restatement is never spared)."""
        spared, _ = outlier_to_spare(
            sim, group, scores, self.grouping.query_weight, self.grouping.spare_margin
        )
        return None if spared is None or work.evidence[spared] else spared

    def _lone_coverage(
        self, off: bool, query: str, texts: Sequence[str], work: Work
    ) -> np.ndarray | None:
        """The question coverage a lone-passage stage reads (computed once per call), or
        None when the stage is ``off`` or the index is a Q&A corpus, whose gold entry
        restates its question (store/profile.py)."""
        if off or self._restaters_needed > 1 or work.echo is None:
            return None
        if work.coverage is None:
            work.coverage = question_coverage(query, texts, self.coverage.coverage_min_chars)
        return work.coverage

    def _stage_lone_restatement(
        self, query: str, texts: Sequence[str], work: Work, details: dict[str, Any]
    ) -> None:
        """One passage that restates the question in other words: it spells the question
        out (coverage >= ``coverage_threshold``) *and* one of its sentences is as close to
        the question in embedding space as a restatement is (echo >= ``lone_echo``). A lone
        planted passage — CorruptRAG's meta-epistemic note, an edited copy of the gold page
        with a claim sentence inserted — must win retrieval on its own, so it carries the
        question; the verbatim check misses every rewording. Each measure alone occurs in
        natural text (SQuAD's questions are written from their gold paragraph: coverage up
        to 95.9, echo up to 0.94 on dev), both together in no benign top-10 passage of
        either dev split. The passage goes alone: it is no evidence against its group (the
        gold page an edit copies sits in that group)."""
        cov = self._lone_coverage(self.coverage.lone_echo > 1.0, query, texts, work)
        if cov is None or work.echo is None:
            return
        hits = (cov >= self.coverage.coverage_threshold) & (work.echo >= self.coverage.lone_echo)
        for i in np.flatnonzero(hits & ~work.removed).tolist():
            work.remove(i, f"restates the question in other words (coverage {cov[i]:.0f}, "
                           f"echo {work.echo[i]:.2f})")  # fmt: skip
            details["lone"].append(i)

    def _stage_lone_claim(
        self,
        query: str,
        texts: Sequence[str],
        ids: Sequence[str],
        work: Work,
        details: dict[str, Any],
    ) -> None:
        """A passage close to the question on both measures *together* (echo + coverage /
        100 >= ``lone_claim``, where the lone restatement wants each at its own bar) that
        claims a word no witness uses (:func:`~.claims.lone_claims`): witnesses are the
        retrieved passages not that close and not already removed, so planted passages
        cannot vouch for each other. Why: the filter-aware search keeps one or two passages
        per target that miss exactly one half of the lone restatement's conjunction (a
        typo'd or statement prefix: coverage 97, echo 0.83; a reordered one: echo 0.97,
        coverage 82), and each must carry its answer, which the genuine evidence lacks.
        With ``lone_claim_index`` > 0 and the index's word counts (``NoveltyTable.uses``)
        the index is a witness too: a candidate goes only when at least that share of its
        unsupported claim words occurs in no indexed passage outside the retrieved set
        (:mod:`.index_support`); one whose claims the index holds stays. Passages that came
        through ``ragshield add`` face ``lone_claim_added`` instead, and then only passages
        the index was built with vouch (provenance as scrutiny: planted passages arrive that
        way; an index with none added is judged as before); an added passage shorter than
        ``short_words`` faces ``lone_claim_short`` (planted passages are short by design)."""
        base, later = self.coverage.lone_claim, self.coverage.lone_claim_added
        added = work.added
        scrutiny = later <= 2.0 and bool(added.any())
        cov = self._lone_coverage(base > 2.0 and not scrutiny, query, texts, work)
        if cov is None or work.echo is None or work.lex is None:
            return
        bar = np.where(added, min(base, later), base) if scrutiny else np.full(len(texts), base)
        score = work.echo + cov / 100.0
        if scrutiny and self.coverage.lone_claim_short <= 2.0:
            near = added & (score >= self.coverage.lone_claim_short)
            short = self._short(query, texts, ids, work, np.flatnonzero(near).tolist())
            bar = np.where(short, np.minimum(bar, self.coverage.lone_claim_short), bar)
        close = score >= bar
        if not (close & ~work.removed).any():
            return
        words = work.claims(query, texts, self._index_words)
        # a passage this close, or caught, vouches for none; under scrutiny neither does one
        # that was added later (only what the index was built with can vouch)
        witnesses = ~close & ~work.removed & ~(added if scrutiny else False)
        found = lone_claims(words, close & ~work.removed, work.lex, self.knn.group_lexical,
                            witnesses)  # fmt: skip
        found = self._index_unheld(found, texts, ids, details)
        for i, claim in found.items():
            work.remove(i, f"restates the question (echo {work.echo[i]:.2f}, coverage "
                           f"{cov[i]:.0f}) with a claim no other passage makes "
                           f"({', '.join(claim[:3])})")  # fmt: skip
            details["lone_claim"].append(i)

    def _short(self, query: str, texts: Sequence[str], ids: Sequence[str], work: Work,
               which: list[int]) -> np.ndarray:  # fmt: skip
        """Which of ``which`` say little of their own: fewer than ``short_words`` words, or
        fewer than ``short_rare`` content words outside the question that are rare in the
        index *and attested* there — some other indexed passage uses the word, at most
        :data:`RARE_SHARE` of them do (a name no other passage knows, as an attacker invents
        for a made-up source, says nothing the index can place) — counted over the sentences
        each does not quote from an earlier retrieved page (:func:`~.provenance.unquoted`:
        the padding an attacker copies says nothing of its own)."""
        out = np.zeros(len(texts), dtype=bool)
        table = self._novelty
        uses = getattr(table, "uses", None) if table and self.coverage.short_rare else None
        most = max(1.0, RARE_SHARE * len(table or ()))
        q = content_words(query)
        for i, text in unquoted(texts, work.stamps, which).items():
            if len(text.split()) < self.coverage.short_words:
                out[i] = True
            elif uses is not None and table is not None:
                mine = int(ids[i] in table)  # its own use of a word is no attestation
                rare = sum(1 <= uses(w) - mine <= most for w in content_words(text) - q)
                out[i] = rare < self.coverage.short_rare
        return out

    def _index_unheld(
        self,
        found: dict[int, tuple[str, ...]],
        texts: Sequence[str],
        ids: Sequence[str],
        details: dict[str, Any],
    ) -> dict[int, tuple[str, ...]]:
        """The lone-claim candidates whose claims the index does not hold: at least
        ``lone_claim_index`` of each one's claim words occur in no indexed passage outside
        the retrieved set (:func:`~.index_support.unheld_words`); every candidate when the
        share is 0 or the index's word counts are unknown. The kept ones go to
        ``details["lone_claim_held"]``."""
        share, uses = self.coverage.lone_claim_index, getattr(self._novelty, "uses", None)
        if share <= 0 or uses is None or not found or self._novelty is None:
            return found
        mine = [content_words(t) for t in texts]
        in_index = [pid in self._novelty for pid in ids]
        out: dict[int, tuple[str, ...]] = {}
        for i, claim in found.items():
            unheld = unheld_words(claim, uses, mine, in_index)
            if len(unheld) >= share * len(claim):
                out[i] = unheld
            else:
                details["lone_claim_held"].append(i)
        return out

    def _stage_derivative(self, ids: Sequence[str], work: Work, details: dict[str, Any]) -> None:
        """A passage close to the question (echo >= ``derivative_echo``) that brings nothing
        its index neighbourhood does not already say: at most ``derivative_novelty`` of its
        (>= ``derivative_min_rare``) rare words are absent from its ten nearest index
        passages (:mod:`ragshield.store.calibration_novelty`). Genuine paragraphs bring new
        names, dates and terms (dev: 0 of the clean benign or gold passages of either
        encyclopedia flagged); a note written about the question from the gold page's own
        words plus a planted answer does not. It goes alone, no evidence against its group.
        Off without a novelty table (:meth:`~.filter.RAGDefender.use_novelty`), an encoder,
        or on a Q&A index (``IndexProfile.qa_corpus``): doctors answer from one template, so
        a genuine entry's rare words are its neighbours' too (ChatDoctor dev, first-sentence
        questions: 19 benign entries removed by this stage, benign removed 0.039 -> 0.045)."""
        e = self.evidence
        if self._novelty is None or work.echo is None or e.derivative_novelty < 0:
            return
        if self._restaters_needed > 1:
            return  # a Q&A index (store/profile.py): its entries share one template's words
        bar = e.derivative_echo + self.bar_shift()
        for i, pid in enumerate(ids):
            nov = self._novelty.get(pid)
            if nov is None or work.removed[i] or work.echo[i] < bar:
                continue
            if e.derivative_siblings and nov.siblings >= e.derivative_siblings:
                continue  # a series page: its siblings share its template (Novelty.siblings)
            if nov.rare >= e.derivative_min_rare and nov.share <= e.derivative_novelty:
                work.remove(i, f"adds almost nothing its index neighbours lack (novelty "
                               f"{nov.share:.2f} of {nov.rare} rare words, echo {work.echo[i]:.2f})")  # fmt: skip
                details["derivative"].append(i)

    def _stage_guard(self, sim: np.ndarray, work: Work, details: dict[str, Any]) -> bool:
        off = sim.copy()
        np.fill_diagonal(off, -np.inf)
        max_sim = float(off.max())
        passed = (
            (not self.grouping.guard)
            or max_sim >= self.grouping.guard_threshold
            or bool(work.evidence.any())
        )
        details["guard"] = {"passed": passed, "max_similarity": max_sim,
                            "threshold": self.grouping.guard_threshold if self.grouping.guard else None}  # fmt: skip
        return passed

    def _stage_typo_copies(
        self, sim: np.ndarray, texts: Sequence[str], work: Work, details: dict[str, Any]
    ) -> None:
        if not self.copies.typo_copies:
            return
        copies, pairs = typo_copies(
            sim, texts, self._noise,
            copy_threshold=self.copies.copy_threshold,
            lexical_threshold=self.copies.lexical_threshold,
            noise_margin=self.copies.noise_margin,
        )  # fmt: skip
        for c, o in pairs:
            work.remove(c, f"noisier near-copy of passage {o} (typo perturbation)")
            work.allowed[c, o] = work.allowed[o, c] = True
            work.victim[o] = True
        work.evidence |= copies
        details["typo_copies"] = pairs

    def _stage_signals(self, query: str, texts: Sequence[str], work: Work,
                       details: dict[str, Any]) -> None:  # fmt: skip
        """The inputs of the wording-free stages: character 3-gram cosine between passages
        and, with an encoder, each passage's question echo (its sentence closest to the
        question, :mod:`~ragshield.defenses.ragdefender.echo`)."""
        e, c, k = self.echo, self.copies, self.knn
        cv = self.coverage
        lone = cv.lone_echo <= 1.0 or cv.lone_claim <= 2.0 or cv.lone_claim_added <= 2.0
        if not (e.echo_pairs or e.claim_consensus or c.copy_conflicts or k.group_knn or lone):
            return
        work.lexical(texts)
        if self.encoder is None:
            return  # no sentence vectors without an encoder: echo evidence is skipped
        qv, sv, owner = self._echo.embed(self.encoder, query, texts)
        work.echo, _ = echo_scores(qv, sv, owner, len(texts))
        details["echo"] = work.echo.round(4).tolist()

    def group_bars(self) -> tuple[float, ...]:
        """The m-th-NN bars in use: ``group_similarity`` for every m when set, else the
        index's calibration, else :data:`~.groups.DEFAULT_BARS`."""
        if self.knn.group_similarity is not None:
            return (float(self.knn.group_similarity),) * len(self._group_bars)
        return self._group_bars

    def _stage_knn_groups(self, sim: np.ndarray, work: Work, details: dict[str, Any]) -> None:
        """A planted group: passages with m retrieved neighbours as close as only 0.1 % of
        the index's passages have m neighbours (:func:`~.groups.knn_group_members`). Only
        the flagged members go: made evidence, a benign one took its whole on-topic group
        with it (dev clean benign removed HotpotQA 0.002 -> 0.014, SQuAD 0.000 -> 0.013)."""
        hits = knn_group_members(sim, work.lex, self.group_bars(), self.knn.group_lexical)
        work.second = hits.kth[:, 0]
        if not self.knn.group_knn:
            return
        for i in np.flatnonzero(hits.members).tolist():
            m = int(hits.rank[i])
            work.remove(i, f"one of a group of {m + 1}+ passages closer to each other than "
                           f"the index's p99.9 {m}-th-neighbour cosine")  # fmt: skip
            details["knn_group"].append(i)

    def _stage_conflicts(
        self, query: str, texts: Sequence[str], work: Work, details: dict[str, Any]
    ) -> None:
        """Two lexical near-copies that differ in a few words disagree on a fact
        (:func:`~ragshield.defenses.ragdefender.claims.near_copy_conflicts`). The copy is removed when
        nothing else retrieved contains its differing words and either the original's words
        are supported elsewhere or the copy echoes the question more (an inserted claim
        sentence) by ``conflict_echo_margin``. Support counts only passages not already
        removed and not themselves written about the question (echo below
        ``echo_threshold``): an attacker who spreads his answer must not lend it support.
        Templated pages (seasons, editions) differ in facts too, but symmetrically: neither
        side wins, both stay."""
        if not self.copies.copy_conflicts or work.lex is None:
            return
        witnesses = ~work.removed
        if work.echo is not None:  # a passage written about the question is no witness
            witnesses &= work.echo < self.echo.echo_threshold + self.bar_shift()
        for c in near_copy_conflicts(texts, work.lex, self.copies.conflict_lexical, query,
                                     self.copies.conflict_max_diff, witnesses):  # fmt: skip
            if not c.words:
                continue  # the suspect only lacks words: a shorter copy, not a new claim
            mine, theirs = c.support
            louder = (
                work.echo is not None
                and work.echo[c.suspect] - work.echo[c.other] >= self.copies.conflict_echo_margin
            )
            if mine > 0 or not (theirs > 0 or louder) or work.removed[c.other]:
                continue
            work.remove(c.suspect, f"near-copy of passage {c.other} with a changed fact "
                                   f"({', '.join(c.words) or 'words removed'})")  # fmt: skip
            work.victim[c.other] = True  # no group evidence: its on-topic group is benign
            details["conflicts"].append({"suspect": c.suspect, "other": c.other,
                                         "words": list(c.words), "support": list(c.support)})  # fmt: skip
        if self.copies.inserted_claims:
            self._inserted_claims(texts, work, details)

    def _inserted_claims(self, texts: Sequence[str], work: Work, details: dict[str, Any]) -> None:
        """A near-copy that holds every sentence of another retrieved passage and adds one
        or two of its own, one of which is closer to the question than anything the
        original says (by ``conflict_echo_margin``, at ``echo_threshold`` or more): a claim
        sentence inserted into a genuine page (an edited gold copy whose answer was not in
        the page to replace). The copy goes, the original stays. A natural longer version
        of a page adds text that is not the passage's closest point to the question."""
        if work.echo is None or work.lex is None:
            return
        echo, bar = work.echo, self.echo.echo_threshold + self.bar_shift()
        ii, jj = np.nonzero(work.lex >= self.copies.conflict_lexical)
        for i, j in zip(ii.tolist(), jj.tolist(), strict=True):
            if i == j or work.removed[i] or work.removed[j]:
                continue
            if echo[i] < bar or echo[i] - echo[j] < self.copies.conflict_echo_margin:
                continue
            mine, theirs = split_sentences(texts[i]), set(split_sentences(texts[j]))
            extra = [s for s in mine if s not in theirs]
            if not theirs or not theirs <= set(mine) or not 1 <= len(extra) <= 2:
                continue
            work.remove(i, f"copy of passage {j} with an inserted claim ({extra[0][:60]!r})")
            work.victim[j] = True
            details["conflicts"].append({"suspect": i, "other": j, "words": [], "support": [],
                                         "inserted": True})  # fmt: skip

    def _stage_echo_pairs(
        self,
        query: str,
        texts: Sequence[str],
        sim: np.ndarray,
        work: Work,
        details: dict[str, Any],
    ) -> None:
        """Generated-kind density: two passages that both answer the question closely (a
        sentence within ``echo_threshold`` of it in embedding space) and say the same thing
        in different words (embedding cosine >= ``paraphrase_semantic``, character 3-gram
        cosine below ``paraphrase_lexical``). Natural near-copies are lexical and pass; a
        reworded, moved or dropped question changes neither measure. Both must also have a
        2nd retrieved neighbour within ``echo_group_margin`` of the index's 2nd-NN bar
        (:mod:`.groups`), off by default. Two passages that each state a number the other
        lacks are no pair (``numbers_disagree``, :func:`~.claims.number_conflicts`):
        they disagree on a fact, as the templated pages of a series do — the pair evidence
        took a whole on-topic retrieval of season pages on HotpotQA (8 of 10 benign
        passages removed)."""
        if not self.echo.echo_pairs or work.echo is None or work.lex is None:
            return
        echo = work.echo
        hi = echo >= self.echo.echo_threshold + self.bar_shift()
        semantic = self.echo.paraphrase_semantic + self.bar_shift()
        para = (sim >= semantic) & (work.lex < self.echo.paraphrase_lexical)
        para &= hi[:, None] & hi[None, :]
        if work.second is not None:  # the second signal: both sit in a dense neighbourhood
            dense = work.second >= self.group_bars()[0] - self.echo.echo_group_margin
            para &= dense[:, None] & dense[None, :]
        if self.echo.numbers_disagree and para.any():
            para &= ~work.disagreeing(texts, query)
        np.fill_diagonal(para, False)
        quoted = work.quoted_by(texts) if para.any() else {}
        for i in np.flatnonzero(para.any(axis=1)).tolist():
            j = int(np.flatnonzero(para[i])[0])
            partners = set(np.flatnonzero(para[i]).tolist())
            if quoted.get(i, frozenset()) & partners and not work.evidence[i]:
                work.victim[i] = True  # its partner quotes it: the copy's evidence is the copy's
                details["quoted_kept"].append(i)
                continue
            work.remove(i, f"paraphrase of passage {j}, both echoing the question "
                           f"(echo {echo[i]:.2f})")  # fmt: skip
            work.evidence[i] = True
            details["paraphrase_pairs"].append([i, j])

    def _stage_consensus(
        self,
        query: str,
        texts: Sequence[str],
        sim: np.ndarray,
        scores: np.ndarray,
        work: Work,
        details: dict[str, Any],
    ) -> None:
        """Claim consensus (:func:`~.claims.unsupported_consensus`): several distinct
        passages close to the question all use a word that no other retrieved passage
        uses — an answer only they give; a member stating numbers another member does not
        state (``numbers_disagree``) does not agree with them. ``consensus_min_group``
        passages at ``consensus_echo``, or a pair at ``consensus_pair_echo``: the
        filter-aware search learnt to plant two passages (the attacker's objective is
        several of its passages in the context with one answer the genuine ones do not
        carry; two is the least "several" can be), and two genuine passages that close to
        the question sharing a word nothing else retrieved uses occur in no dev clean set. They go, except the member
        at the group's edge and near the question (:func:`outlier_to_spare`: the genuine
        passage the group was written about), as in the coverage and dense-group stages.

        Provenance as scrutiny (``consensus_added_echo``): passages that came through
        ``ragshield add`` form a group at a lower echo, and only passages the index was
        built with count as the rest of the evidence; none of them is spared, and with
        ``consensus_added_carriers`` the other added passages using a pushed word go too.
        With ``consensus_added_copies``, added near-copies of each other count one each:
        mirrors of a built page are one witness, but an added copy takes a context slot of
        its own (the 0.5 B writer's five bodies are often one sentence varied).
        With ``consensus_added_alike``, such a group goes only when its members are alike
        (mean pairwise cosine, per pushed word): passages written for one question resemble
        each other, while the pages of one article added later share its topic words (the
        "claim") but each tells its own part (SQuAD dev with half the index added later: 19 such
        groups, mean cosine max 0.74; planted groups median 0.92-0.97, and the diverse
        ones, an answer spread, are what the lone-claim and group stages also see).
        Why: a body written to mislead need not restate the question (Tan et al.'s do not),
        so it sits under the echo bars a genuine paragraph can reach; what it cannot avoid
        is carrying its answer, and several planted bodies carry the same one. Off when
        every retrieved passage was added (nothing built to vouch). With ``spare_built``, a
        member the index was built with stays when it is the only built one among added
        members (:meth:`Work.built_alone`): planted passages name the answer their page
        gives too, and the page went with them."""
        p = self.echo
        if not p.claim_consensus or work.echo is None or work.lex is None:
            return
        vocabulary = self._index_words if p.consensus_vocabulary else frozenset()
        disagree = work.disagreeing(texts, query) if p.numbers_disagree else None
        shift = self.bar_shift()
        rules = [(p.consensus_echo, p.consensus_min_group)]
        if p.consensus_pair_echo <= 1.0 and p.consensus_min_group > 2:
            rules.append((p.consensus_pair_echo, 2))  # a pair, both closer to the question
        words = work.claims(query, texts, vocabulary)  # once for both rules and lone_claim
        found = [unsupported_consensus(query, texts, work.echo, bar + shift, size, work.lex,
                                       self.knn.group_lexical, vocabulary, disagree, words)
                 for bar, size in rules]  # fmt: skip
        added = work.added
        scrutiny = p.consensus_added_echo <= 1.0 and added.any() and (~added).any()
        if scrutiny:  # with consensus_added_copies, no added near-copy counts as a mirror
            copies = float("inf") if p.consensus_added_copies else self.knn.group_lexical
            found.append(unsupported_consensus(
                query, texts, work.echo, p.consensus_added_echo + shift,
                p.consensus_added_min_group, work.lex, copies, vocabulary,
                disagree, words, candidates=added, witnesses=~added,
                alike=self._alike(sim, details) if p.consensus_added_alike > 0 else None,
            ))  # fmt: skip
        c = union_consensus(found)
        if not c.members:
            return
        spared = self._spare(sim, np.array(c.members), scores, work)
        if scrutiny and spared is not None and added[spared]:
            spared = None  # the page a group was written about is one the index was built with
        details["consensus"] = {"members": list(c.members), "words": list(c.words)[:10],
                                "spared": spared}  # fmt: skip
        if scrutiny and p.consensus_added_carriers:
            pushed = frozenset(c.words)
            carriers = [i for i in np.flatnonzero(added & ~work.removed).tolist()
                        if i not in c.members and words[i] & pushed]  # fmt: skip
            for i in carriers:
                work.remove(i, f"added after the build and carries what the group of "
                               f"{len(c.members)} pushes ({', '.join(sorted(words[i] & pushed)[:3])})")  # fmt: skip
            details["consensus"]["carriers"] = carriers
        members = np.array(c.members)
        alone = np.zeros(members.size, dtype=bool)
        if self.grouping.spare_built:  # a lone built member is no consensus of its own
            alone = work.built_alone(members, 2)
        details["built_spared"].extend(members[alone & (members != spared)].tolist())
        for i in members[~alone].tolist():
            if i == spared:
                continue
            work.remove(i, f"one of {len(c.members)} passages close to the question agreeing "
                           f"on what nothing else retrieved says ({', '.join(c.words[:3])})")  # fmt: skip
            work.evidence[i] = True

    def _alike(self, sim: np.ndarray, details: dict[str, Any]) -> Callable[[Sequence[int]], bool]:
        """``consensus_added_alike``'s test of one group: its members' mean pairwise cosine
        reaches the bar (a lone member has no pair: the bar does not apply). Groups that
        fail are listed in ``details["consensus_unalike"]``."""
        bar = self.echo.consensus_added_alike

        def test(group: Sequence[int]) -> bool:
            m = np.asarray(group)
            if m.size < 2 or float(sim[np.ix_(m, m)][np.triu_indices(m.size, 1)].mean()) >= bar:
                return True
            details.setdefault("consensus_unalike", []).append(m.tolist())
            return False

        return test

    def _stage_added_group(
        self,
        query: str,
        texts: Sequence[str],
        sim: np.ndarray,
        work: Work,
        details: dict[str, Any],
    ) -> None:
        """A burst of added passages about one question: ``added_group_size`` or more that
        came through ``ragshield add``, each echoing the question (``added_group_echo``) and
        all pairwise alike (``added_group_similarity``, complete linkage: every pair, not an
        average), go — only the added members. Why: the paper's density, scoped by
        provenance. An attacker needs several context slots, so several passages written
        for one question, and passages written for one question resemble each other
        whatever they claim — a wrong answer made of the question's own words (one entity of
        a comparison) included, which no claim rule sees. Genuine additions about one
        question rarely come three at a time that alike. Off when nothing retrieved was
        built (nothing to scope against). It only adds removals: its members carry no
        evidence and stay in the dense-group stage's pool (:attr:`Work.burst`), so the
        groups, and what they remove, are what they were without it."""
        g = self.grouping
        added = work.added
        if g.added_group_size < 2 or work.echo is None or not added.any() or added.all():
            return
        shift = self.bar_shift()
        cand = np.flatnonzero(added & (work.echo >= g.added_group_echo + shift))
        if cand.size < g.added_group_size:
            return
        bar = g.added_group_similarity + shift
        if self.echo.numbers_disagree:  # the pages of a series are alike but disagree
            sim = np.where(work.disagreeing(texts, query), -1.0, sim)
        for grp in dense_groups(sim, cand, bar, "complete"):
            if grp.size < g.added_group_size:
                continue
            for i in grp.tolist():
                work.remove(i, f"one of {grp.size} passages added after the build, each close "
                               f"to the question and all alike (cosine >= {bar:.2f})")  # fmt: skip
            work.burst[grp] = True
            details["added_group"].append(grp.tolist())

    def _stage_provenance(
        self,
        query: str,
        texts: Sequence[str],
        work: Work,
        details: dict[str, Any],
    ) -> None:
        """Provenance, an extra layer after every other decision (:mod:`.provenance`): of two
        retrieved near-copies (``group_lexical`` 3-gram cosine) the one the index held first
        is spared and the later one removed (``provenance``: ``"restore"`` when the filter
        had removed the earlier one, ``"facts"`` also when the later one changes a fact).
        Passages without ``added_at`` on either side, or added at the same instant, keep the
        other stages' decision."""
        if self.copies.provenance == "off" or len(texts) < 2:
            return
        restore, drop, rows = spare_originals(
            self.copies.provenance, query, texts, work.stamps,
            work.lexical(texts), self.knn.group_lexical, work.removed,
            self.copies.conflict_max_diff,
        )  # fmt: skip
        for i in restore:
            work.removed[i] = False
            work.reasons.pop(i, None)
        for j, why in drop.items():
            old = work.reasons.get(j) if work.removed[j] else None
            work.removed[j] = True
            work.reasons[j] = why if old is None else f"{why}; also: {old}"
        details["provenance"] = rows
