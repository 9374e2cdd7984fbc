"""The dense-group stage of :meth:`RAGDefender.filter <.filter.RAGDefender.filter>` (tight,
then loose groups, removed only with attack evidence) and the paper's Stage 1 + 2 fallback.

Example::

    from ragshield.defenses.ragdefender import RAGDefender

    res = RAGDefender(encoder=enc).filter(question, retrieved)
    print(res.details["groups"], res.details["unevidenced"], res.details["spared"])

Why a module of its own: the groups are where the paper's density meets the evidence the
earlier stages (:mod:`.stages`) marked; on-topic retrievals are dense by nature, so a group
goes only with evidence, and the genuine passage it was written about is spared.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ragshield.defenses.ragdefender.evidence import (
    content_words,
    dense_groups,
    group_signature,
    outlier_to_spare,
    trigram_cosine_matrix,
)
from ragshield.defenses.ragdefender.math import (
    PairScores,
    _labels_to_groups,
    clustering_estimate,
    concentration_estimate,
    frequency_scores,
    n_pairs_for,
    top_n_by_score,
)
from ragshield.defenses.ragdefender.stages import EvidenceStages, Work


class GroupStages(EvidenceStages):
    """Dense groups with evidence, and the paper's own stages when ``multi_group`` is off."""

    def _stage_groups(
        self,
        query: str,
        sim: np.ndarray,
        texts: Sequence[str],
        scores: np.ndarray,
        mode: str,
        work: Work,
        details: dict[str, Any],
    ) -> None:
        """Dense groups (tight, then loose). With ``require_evidence`` a group is removed only
        when it carries attack evidence beyond density: a member that restates the question
        or is a typo copy, a density no natural neighbourhood of the index reaches
        (:meth:`evidence_threshold`), or — for a loose group — the signature of an evidenced
        tight group (the target answer). On-topic retrievals are dense by nature; density
        alone removed ~40 % of their benign passages."""
        dense = self.evidence_threshold()
        shift = self.bar_shift()  # the index's neighbourhoods may be tighter than the bars
        levels = [
            ("tight", self.grouping.tight_threshold + shift, 2),
            ("loose", self.grouping.loose_threshold + shift, self.grouping.loose_min_size),
        ]
        signature: set[str] = set()
        signers: list[int] = []  # the tight groups' members the signature came from
        # a burst's members stay in the pool: that stage only adds removals, and without them
        # a planted passage outside the burst lost the group it went with (`add`'s screen)
        pool = np.flatnonzero(~work.removed | work.evidence | work.burst)
        # a page kept because a later member quotes it links no group of the next level:
        # had the copy not quoted it, it would have gone with the copy's group
        copied = np.zeros(len(texts), dtype=bool)
        for level, threshold, min_size in levels:
            for g in dense_groups(sim, pool, threshold, self.grouping.linkage):
                if g.size < min_size or (level == "loose" and work.removed[g].all()):
                    continue
                sub = sim[np.ix_(g, g)]
                density = float((sub.sum() - np.trace(sub)) / (g.size * (g.size - 1)))
                evidenced = (
                    bool(work.evidence[g].any()) or self._density(g, sub, texts, work) >= dense
                )
                if not evidenced and work.echo is not None and work.lex is not None:
                    evidenced = self._claim_group(g, query, texts, work)
                    if evidenced:
                        details["claim_groups"].append(g.tolist())
                by_signature = False
                if level == "loose" and self.grouping.loose_signature and signature:
                    bearing = [bool(signature & content_words(texts[i])) for i in g.tolist()]
                    details["signature_kept"].extend(
                        i for i, b in zip(g.tolist(), bearing, strict=True) if not b
                    )
                    g = g[bearing]
                    if g.size < self.evidence.signature_min_size and not work.evidence[g].any():
                        details["signature_kept"].extend(g.tolist())
                        continue  # one topic passage that happens to name the target answer
                    by_signature = not evidenced
                    evidenced = evidenced or g.size > 0
                    if g.size == 0:
                        continue
                if self.evidence.require_evidence and not evidenced:
                    details["unevidenced"].append({"level": level, "members": g.tolist(),
                                                   "density": density})  # fmt: skip
                    continue
                if (
                    g.size == 2
                    and mode == "multi_hop"
                    and sim[g[0], g[1]] < self.grouping.pair_threshold
                    and not work.evidence[g].any()
                ):
                    continue  # may be two golden passages of one multi-hop question
                originals = g[self._copy_originals(g, texts) & ~work.evidence[g]]
                spared: int | None = None
                if originals.size == 0 and self.grouping.spare_outlier:
                    spared, _ = outlier_to_spare(
                        sim, g, scores, self.grouping.query_weight, self.grouping.spare_margin
                    )
                    if spared is not None and work.evidence[spared]:
                        spared = None  # a restated or typo-copied passage is never spared
                protected = (work.victim[g] & ~work.evidence[g]) | np.isin(g, originals)
                quoted = work.sources(texts, g)  # a later member copies from it
                protected |= quoted
                details["quoted_kept"].extend(g[quoted].tolist())
                copied[g[quoted]] = True
                alone = np.zeros(g.size, dtype=bool)
                if self.grouping.spare_built:
                    alone = work.built_alone(g, min_size)
                    if by_signature and work.added[signers].all():
                        alone = work.built[g] & ~work.evidence[g]  # carriers of an added answer
                    if alone.any():  # the index orders them: an added member is no original
                        protected = (protected & ~work.added[g]) | alone
                        if spared is not None and work.added[spared]:
                            spared = None
                details["groups"].append({"level": level, "members": g.tolist(), "spared": spared,
                                          "density": density})  # fmt: skip
                if spared is not None:
                    details["spared"].append(spared)
                details["built_spared"].extend(g[alone & (g != spared)].tolist())
                hit = g[(g != spared) & ~protected]
                if level == "tight" and self._distinct_pages(hit, texts, work) >= 2:
                    signature |= group_signature([texts[i] for i in hit.tolist()], query)
                    signers.extend(hit.tolist())
                work.allowed[np.ix_(hit, hit)] = True
                for i in hit.tolist():
                    work.remove(
                        i, f"member of a dense group ({level}, average cosine >= {threshold})"
                    )
            pool = np.flatnonzero(~work.removed & ~copied)

    def _distinct_pages(self, g: np.ndarray, texts: Sequence[str], work: Work) -> int:
        """How many of ``g`` are not lexical near-copies of one another (3-gram cosine below
        ``group_lexical``). Why: a tight group's signature (the words all its members use
        beyond the question) is the answer a batch of generated passages pushes only when
        the batch holds two pages or more. Near-copies of one page — an edited copy beside
        the genuine paragraph, GARAG's typo copies — share that page's whole vocabulary, and
        the signature then took every on-topic passage of the loose level with them (SQuAD
        dev: one edited gold copy, ~30 % of the benign context removed).
        ``signature_distinct`` off: every group counts (even one member left)."""
        if not self.evidence.signature_distinct:
            return max(int(g.size), 2)
        lex = work.lexical(texts)
        distinct: list[int] = []
        for i in g.tolist():
            if all(lex[i, j] < self.knn.group_lexical for j in distinct):
                distinct.append(i)
        return len(distinct)

    def _density(self, g: np.ndarray, sub: np.ndarray, texts: Sequence[str], work: Work) -> float:
        """The group's mean pair cosine as density *evidence*: pairs that are lexical
        near-copies (3-gram cosine >= ``density_lexical``) do not count, because a real
        index holds mirrors and versions of a page by nature (the knn-group stage leaves them
        out for the same reason); a group held together only by such a pair has none."""
        mask = ~np.eye(g.size, dtype=bool)
        if self.evidence.density_lexical <= 1.0:
            mask &= work.lexical(texts)[np.ix_(g, g)] < self.evidence.density_lexical
        return float(sub[mask].mean()) if mask.any() else -1.0

    def _claim_group(self, g: np.ndarray, query: str, texts: Sequence[str], work: Work) -> bool:
        """A group that *claims* something together: its members all answer the question
        closely (mean question echo >= ``claim_echo``), say it in different words (mean
        character 3-gram cosine below ``paraphrase_lexical``: not natural near-copies) and
        share a word the question does not use (the answer they push)."""
        assert work.echo is not None and work.lex is not None
        if g.size < 2 or float(work.echo[g].mean()) < self.echo.claim_echo:
            return False
        sub = work.lex[np.ix_(g, g)]
        mean_lex = float((sub.sum() - np.trace(sub)) / (g.size * (g.size - 1)))
        if mean_lex >= self.echo.paraphrase_lexical:
            return False
        return bool(group_signature([texts[i] for i in g.tolist()], query))

    def _copy_originals(self, group: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """Members of a group that are the original of lexical near-copies inside it: GARAG
        makes typo copies of the golden passage, which then sits in their dense group. The
        cleanest of each near-copy cluster (lowest out-of-vocabulary rate, strictly below
        every copy's) is the original and stays; the copies go."""
        keep = np.zeros(group.size, dtype=bool)
        if not (self.copies.typo_copies and self.evidence.require_evidence) or group.size < 2:
            return keep
        members = [texts[i] for i in group.tolist()]
        lex = trigram_cosine_matrix(members)
        np.fill_diagonal(lex, 0.0)
        noise = self._noise(members)
        for i in range(group.size):
            copies = np.flatnonzero(lex[i] >= self.copies.lexical_threshold)
            same = np.array([members[j] == members[i] for j in copies], dtype=bool)
            cleaner = (noise[i] < noise[copies]) | (same & (i < copies))
            keep[i] = copies.size > 0 and bool(cleaner.all())  # exact duplicates: the first
        return keep

    def _stage_paper(
        self,
        sim: np.ndarray,
        vectors: np.ndarray,
        texts: Sequence[str],
        mode: str,
        work: Work,
        details: dict[str, Any],
    ) -> PairScores:
        """The paper's Stage 1 + 2 on what the earlier stages left (``multi_group=False``)."""
        n = sim.shape[0]
        rest = np.flatnonzero(~work.removed)
        sub = sim[np.ix_(rest, rest)]
        if rest.size >= 2 and mode == "single_hop":
            est = clustering_estimate(
                vectors[rest], [texts[i] for i in rest.tolist()], self.paper.m
            )
            n_adv_rest = est.n_adv
            details["groups"] = [rest[g].tolist() for g in _labels_to_groups(est.labels)]
            details["top_terms"] = list(est.terms.terms)
        elif rest.size >= 2:
            conc = concentration_estimate(sub)
            n_adv_rest = conc.n_adv
            details["groups"] = [rest[conc.flagged].tolist(), rest[~conc.flagged].tolist()]
        else:
            n_adv_rest = 0
        sub_ps = frequency_scores(sub, n_pairs_for(n_adv_rest), self.paper.p)
        for i in rest[top_n_by_score(sub_ps.f, n_adv_rest)].tolist():
            work.remove(i, f"top-{n_adv_rest} frequency score f_i (Eq. 7)")
        f = np.zeros(n)
        f[rest] = sub_ps.f
        return PairScores(
            rest[sub_ps.pairs] if sub_ps.pairs.size else sub_ps.pairs, sub_ps.pair_sims, f
        )
