"""InjectionGuard: a sentence/window-level prompt-injection filter (deterministic rules +
a classifier head on MiniLM sentence vectors, thresholded per index).

Example::

    from ragshield.defenses.injection.detector import InjectionGuard
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

    guard = InjectionGuard(encoder=SentenceTransformerEncoder())
    guard.precompute(index_texts)             # index time: sentences scored once
    res = guard.filter(question, retrieved)   # flagged sentences removed, with reasons
    for d in res.decisions:
        print(d.reason, d.scores["suspicion"], d.text)

Or in a chain, ``--filter ecosaferag,injection-guard``: the pipeline hands the guard the
threshold recorded when the index was built (``meta.json`` → ``profile.injection``, see
:mod:`ragshield.defenses.injection.calibration`).

Why sentences and short windows: a classifier that scores a whole passage dilutes an
instruction buried in a genuine paragraph (PEERS.md: 8 of 10 caught alone, 8–10 % once
buried). Each passage is cut into sentences (``sentencex``, plus line breaks and
"colon + capital" clauses); each sentence is scored on its own and inside the two windows
it shares with its neighbours (the mean of the two unit vectors, or with
``windows="text"`` the encoding of the joined text), so an instruction split over two
sentences is still read whole. A sentence is removed when

* a deterministic rule fires on it (:mod:`ragshield.defenses.injection.rules`: role/turn
  markers, tool-call syntax, encoded instructions, exfiltration URLs) — always; or
* its score, ``max(own, window with the previous, window with the next)``, reaches the
  threshold: the index's own calibration at ``operating_point`` (``"fpr1"``: ≤ 1 % of the
  index's sentences would be flagged; ``"fpr0.1"``, the default: ≤ 0.1 %), else the
  head's training operating point, unless ``threshold`` is given explicitly; or
* a calibrated signal fires on it (:mod:`ragshield.defenses.injection.signals`: a whole
  sentence in another language than its passage and the index, or more disguised words —
  zero-width, look-alike letters, leetspeak — than the index's own sentences reach; each at
  the index's own 1 % / 0.1 % point, so neither reads what the sentence says); or
* (``hysteresis``, at ``fpr0.1``) it neighbours a removed sentence (by the classifier, a
  rule or a signal) and its own score reaches the looser ``neighbour_point`` (the index's
  5 % point of own scores; ``"fpr1"`` the 1 % point): the weaker half of a split
  instruction.

The head's score of a sentence that reads as a notice to a person or a description of AI
(:func:`ragshield.defenses.injection.features.mention_kind`: benign text that mentions
instructions rather than giving them to a model) is multiplied by the head's
``mention_discount`` before the threshold; calibration applies the same discount, so the
index's own text keeps its flag rate. The rules still apply in full. A sentence that is
less on-topic for its passage than the passage's other sentences are
(:func:`ragshield.defenses.injection.context.offtopic`) has its score raised by the head's
``offtopic_boost`` (a noisy-OR; calibrated the same way): a planted instruction is off-topic
for its paragraph, a security article's sentences are on-topic for each other.

Every score is computed on :func:`ragshield.defenses.injection.text.normalize`'s output
(NFKC, format characters removed, homoglyphs, spaced letters and leetspeak folded), so the
obfuscated spelling of an instruction scores as the plain one; a sentence that reports a
quoted instruction in a third-person frame is scored on its frame
(:func:`ragshield.defenses.injection.rules.classifier_view`: text *describing* an
imperative is not one).

Suspicion (``Decision.scores["suspicion"]``): the head's probability for a classifier flag
(≥ the threshold), 1.0 for a rule flag; ``scope="passage"`` removes the flagged sentence's
whole passage (``injection_collateral`` for its other sentences), and so does the default
``scope="restated"`` when the passage restates the question verbatim: a passage written to
be retrieved for the question (PoisonedRAG's prefix) holds no genuine text to keep, and the
rest of an instruction it carries — the second half of a split one, the line after a
flagged "you are now DAN", an encoded block under its flagged label — is often worded so
that no sentence of it reaches a threshold alone (why the prefixed placement was caught
less than in-passage: its passage is the question and the instruction, so the relation to
the passage has no genuine sentences to measure the instruction against). A passage that
restates the question in other words (``restated_span``: most of its content words in one
stretch, any order, typos allowed, with up to three words before it in its sentence) is also
scored with that stretch cut off: an attacker who rewords the question drops its question
mark, and the question's words then dilute the instruction's first sentence they run into.

Training corpora (the packaged head; details and licences in
``benchmarks/train_injection_head.py``): ``bastioncorpus`` 0.6.0 (MIT; 118 labelled
injections in five languages + 63 benign look-alikes, the even-numbered benign rows only),
ragshield's own instruction templates and EcoSafeRAG baits (Apache-2.0, this repository),
instructions (English and, in the script's own wording, German/French/Spanish/Italian) and
benign text *about* instructions written for the training script (security writing built
from parts, reported speech, quoted injections in third-person frames, second-person
notices, how-to steps; Apache-2.0), and benign sentences of the *dev* halves of
``ontopic/`` (SQuAD v1.1 dev articles at even title positions, CC BY-SA 4.0; HotpotQA dev
questions that are not poisoning targets, CC BY-SA 4.0). No test-split text (SQuAD odd
articles, HotpotQA targets, the evaluation's hard negatives) is used for training or
tuning. The head reads the sentence vector and the ``addressed`` feature
(:mod:`ragshield.defenses.injection.features`: is the reader spoken to?).

Over 500 lines because sentence cutting, window scoring, the calibrated thresholds and the
hysteresis that joins a split instruction are one decision per sentence; the rules, the
head, the signals and the normalisation already live in their own modules.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from numbers import Real
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from ragshield.defenses.base import check_retrieved
from ragshield.defenses.injection import language as lang_id
from ragshield.defenses.injection.context import (
    SCOPES,
    Removal,
    echo,
    restates,
    restating_span,
    without_span,
)
from ragshield.defenses.injection.head import InjectionHead
from ragshield.defenses.injection.rules import classifier_view, rule_hits
from ragshield.defenses.injection.scoring import (
    NEIGHBOUR_POINTS,
    Neighbours,
    Scored,
    head_rows,
    mention_mask,
    pair_scores,
    segment,
    window_flags,
    window_scores,
)
from ragshield.defenses.injection.signals import SIGNAL, Signals, signal_flags
from ragshield.defenses.injection.text import disguised_words, normalize
from ragshield.defenses.params import Boolean, Interval, Options, ParamTable, StagedParams
from ragshield.defenses.ragdefender.coverage import question_coverage
from ragshield.embed.base import Encoder, l2_normalize
from ragshield.errors import InputError, check_query
from ragshield.types import Decision, FilterResult, RetrievedPassage

if TYPE_CHECKING:
    from ragshield.store.profile import IndexProfile

__all__ = [
    "CLASSIFIER", "COLLATERAL", "OPERATING_POINTS", "RULE", "InjectionGuard", "Scored",
    "head_rows", "mention_mask", "pair_scores", "segment", "window_flags", "window_scores",
]  # fmt: skip

#: Operating point name -> the share of the index's own sentences allowed to be flagged.
OPERATING_POINTS: Mapping[str, float] = {"fpr1": 0.01, "fpr0.1": 0.001}
RULE, CLASSIFIER, COLLATERAL = "injection_rule", "injection_classifier", "injection_collateral"
OperatingPoint = Literal["fpr1", "fpr0.1"]


class InjectionGuard(StagedParams):
    """Sentence/window-level injection filter (a :class:`PassageFilter`).

    Parameters
    ----------
    encoder: the sentence encoder the head was trained on (MiniLM by default).
    operating_point: ``"fpr1"`` or ``"fpr0.1"`` (default): which calibrated threshold is used.
    threshold: an explicit score threshold in (0, 1]; overrides any calibration.
    rules: apply the deterministic rules (``False``: classifier only, for ablations).
    classifier: apply the classifier head (``False``: rules only).
    scope: a flag removes the ``"sentence"`` or its whole ``"passage"``; ``"restated"``
        (the default): the whole passage when it restates the question, verbatim
        (:func:`~ragshield.defenses.injection.context.restates`: PoisonedRAG's retrieval
        prefix, so none of it is genuine text) or edited (``restated_coverage``,
        ``restated_echo``), else the sentence; on a Q&A index (the profile's
        ``qa_corpus``: an FAQ entry restates its question) the sentence.
    restated_coverage: with ``scope="restated"``, the question's letter-level coverage
        (0-100, :func:`~ragshield.defenses.ragdefender.coverage.question_coverage`: words
        dropped, replaced, reordered, typos) at which a flagged passage counts as restating
        it; ``None``: not read.
    restated_echo: likewise, the cosine between the question and a sentence of a flagged
        passage (:func:`~ragshield.defenses.injection.context.echo`: a paraphrase); ``None``
        (the default): not read — a genuine page answering the question sits there too.
        Both are read only for passages already flagged: no cost on clean traffic.
    restated_span: likewise, the share of the question's content words a stretch of the
        passage must restate, in any order and with typos
        (:func:`~ragshield.defenses.injection.context.restating_span`); when one does, the
        passage is also scored with that stretch cut off (the instruction it ran into is
        read alone) and goes whole if either reading flags something; ``None``: not read.
        Unlike the two above it is read on every passage (a word alignment, 0.2-0.4 ms); the
        cut passage is encoded again only where a stretch is found (2 % of dev top-10
        passages at 0.7).
    removal: the four above as one
        :class:`~ragshield.defenses.injection.context.Removal` (what a flag removes), its
        dataclass, a table of its fields, or ``None`` for the defaults; each field also by its
        own name (``scope="passage"``, ``restated_span=None``).
    head: path to a head JSON; ``None`` = the packaged head.
    language: ``sentencex`` language code for segmentation.
    max_chars: characters of a passage read; the rest is cut (never reaches the generator).
    cache_size: passages whose scores are kept by text hash (:meth:`precompute` fills it).
    signals: the calibrated signals beside the head
        (:class:`~ragshield.defenses.injection.signals.Signals`: ``language_switch``,
        ``disguise``), its dataclass, a table of its fields, or ``None`` for the defaults;
        each field also by its own name (``disguise=False``).
    neighbours: how a sentence's neighbours count
        (:class:`~ragshield.defenses.injection.scoring.Neighbours`: ``windows``, pairs of
        neighbours scored together; ``hysteresis`` and ``neighbour_point``, how far a flagged
        sentence's neighbours are held), each field also by its own name (``windows="text"``).
    """

    name = "injection-guard"
    _parameter_constraints: ClassVar[ParamTable] = {
        "operating_point": [Options(*OPERATING_POINTS)],
        "threshold": [Interval(Real, 0.0, 1.0, closed="right"), None],
        "rules": [Boolean()],
        "classifier": [Boolean()],
        "windows": [Boolean(), Options("text")],
        "hysteresis": [Boolean()],
        "scope": [Options(*SCOPES)],
        "restated_coverage": [Interval(Real, 0.0, 100.0, closed="both"), None],
        "restated_echo": [Interval(Real, -1.0, 1.0, closed="both"), None],
        "restated_span": [Interval(Real, 0.0, 1.0, closed="right"), None],
        "max_chars": [Interval(int, 1, None)],
        "cache_size": [Interval(int, 0, None)],
        "language_switch": [Boolean()],
        "language_window": [Interval(int, 2, None), None],
        "disguise": [Boolean()],
        "neighbour_point": [Options(*NEIGHBOUR_POINTS)],
    }
    _stages: ClassVar[Mapping[str, type]] = {
        "removal": Removal, "signals": Signals, "neighbours": Neighbours,
    }  # fmt: skip
    _own_params = (
        "operating_point", "threshold", "rules", "classifier", "head", "language", "max_chars",
        "cache_size",
    )  # fmt: skip
    removal: Removal
    signals: Signals
    neighbours: Neighbours

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        # issue #23: <= 1 % of index text; fpr0.1 is the dev choice (docs/results-injection.md:
        # the only point with dev hard negatives <= 0.05, with the mention discount)
        operating_point: OperatingPoint = "fpr0.1",
        threshold: float | None = None,
        rules: bool = True,
        classifier: bool = True,
        head: str | None = None,
        language: str = "en",
        max_chars: int = 20_000,  # as EcoSafeRAG (issue #15): bounds one passage's cost
        cache_size: int = 16_384,  # passages (~6 sentences each: a few MB of scores)
        removal: Removal | Mapping[str, Any] | None = None,  # defaults and dev notes: Removal
        signals: Signals | Mapping[str, Any] | None = None,
        neighbours: Neighbours | Mapping[str, Any] | None = None,
        **flat: Any,
    ) -> None:
        self.encoder = encoder
        self.operating_point = operating_point
        self.threshold = threshold
        self.rules = rules
        self.classifier = classifier
        self.head = head
        self.language = language
        self.max_chars = max_chars
        self.cache_size = cache_size
        self._set_stages({"removal": removal, "signals": signals, "neighbours": neighbours}, flat)
        self.calibration_: dict[str, Any] | None = None
        self._head: InjectionHead | None = None
        self._cache: dict[bytes, Scored] = {}
        self._languages: tuple[str, ...] | None = None
        self._qa_corpus = False

    # ------------------------------------------------------------------ setup

    def _check_setup(self) -> None:
        if self.encoder is None and self.classifier:
            raise InputError(
                "InjectionGuard needs an encoder to embed sentences: pass encoder=... "
                "(or classifier=False for the rules alone)."
            )

    def head_(self) -> InjectionHead:
        if self._head is None:
            self._head = (
                InjectionHead.packaged() if self.head is None else InjectionHead.load(self.head)
            )
        return self._head

    def warm_up(self) -> None:
        """Load the encoder and the head now rather than on the first query."""
        self.head_()
        warm = getattr(self.encoder, "warm_up", None)
        if callable(warm):
            warm()

    def calibrate(self, profile: IndexProfile) -> None:
        """Read a passage restating the question as normal on a Q&A index (its profile's
        ``qa_corpus``): there ``scope="restated"`` removes the flagged sentence only."""
        self._qa_corpus = bool(profile.qa_corpus)

    def calibrate_injection(self, data: Mapping[str, Any]) -> None:
        """Take the index's calibration (``profile["injection"]``, written at index time)."""
        thresholds = data.get("thresholds")
        if not isinstance(thresholds, Mapping) or not all(
            isinstance(thresholds.get(k), (int, float)) for k in OPERATING_POINTS
        ):
            raise InputError(
                "unreadable injection calibration in the index (thresholds missing); "
                "rebuild the index"
            )
        recorded = data.get("head")  # a guard without the head reads only the signals'
        if (
            self.classifier
            and self.threshold is None
            and recorded is not None
            and recorded != self.head_().ident
        ):
            raise InputError(
                f"this index's injection calibration was measured with the injection head "
                f"{recorded}, and this guard runs {self.head_().ident} (a ragshield upgrade "
                "retrained it): the thresholds do not hold for its scores. Rebuild the index "
                "(ragshield index CORPUS --out NEW_DIR) to recalibrate it, or set the guard's "
                "threshold yourself ([defenses.injection-guard] threshold = ...)"
            )
        self.calibration_ = dict(data)
        langs = data.get("languages")
        self._languages = tuple(sorted(langs)) if isinstance(langs, Mapping) and langs else None

    def threshold_(self) -> float:
        """The score threshold in force and where it comes from is :meth:`threshold_source`."""
        if self.threshold is not None:
            return float(self.threshold)
        if self.calibration_ is not None:
            return float(self.calibration_["thresholds"][self.operating_point])
        return float(self.head_().thresholds.get(self.operating_point, 0.5))

    def discount_(self) -> float:
        """The head's mention discount, or the one the index was calibrated with (an index
        calibrated before the discount existed records none: its thresholds hold for
        undiscounted scores, so none is applied until it is rebuilt)."""
        if self.calibration_ is not None and self.threshold is None:
            return float(self.calibration_.get("mention_discount", 1.0))
        return float(self.head_().mention_discount)

    def boost_(self) -> float:
        """The head's off-topic boost, or the one the index was calibrated with (an index
        calibrated before the boost existed records none: 0 until it is rebuilt)."""
        if self.calibration_ is not None and self.threshold is None:
            return float(self.calibration_.get("offtopic_boost", 0.0))
        return float(self.head_().offtopic_boost)

    def low_threshold_(self) -> float | None:
        """The looser threshold :func:`window_flags` holds neighbours of a flagged sentence
        to (``hysteresis`` at ``fpr0.1``: the ``neighbour_point`` — the index's 5 % point of
        own scores, or its ``fpr1`` point when that is asked for or was not recorded), else
        ``None``."""
        if not self.hysteresis or self.threshold is not None or self.operating_point != "fpr0.1":
            return None
        if self.calibration_ is not None:
            fpr1 = float(self.calibration_["thresholds"]["fpr1"])
            loose = self.calibration_.get("neighbour_threshold")
            if self.neighbour_point == "fpr5" and isinstance(loose, (int, float)):
                return min(float(loose), fpr1)
            return fpr1
        t = self.head_().thresholds.get("fpr1")
        return None if t is None else float(t)

    def window_text_(self) -> bool:
        """Whether windows are scored on their joined text: as the index was calibrated
        (its thresholds hold for that scoring only; an index calibrated before the option
        records none and keeps the mean-vector windows), else ``windows == "text"``."""
        if self.calibration_ is not None and self.threshold is None:
            return bool(self.calibration_.get("window_text", False))
        return self.windows == "text"

    def languages_(self) -> tuple[str, ...] | None:
        """The index's own languages (from its calibration), ``None`` when unknown or when
        the language-switch signal is off or its model is not installed."""
        if not self.language_switch or self._languages is None or not lang_id.available():
            return None
        return self._languages

    def language_window_(self) -> int | None:
        """Words per span of the language switch: the index's record when calibrated (its
        thresholds hold for that reading; an index calibrated before spans existed: whole
        sentences), else this guard's ``language_window`` (what calibration records). A
        guard set to ``None`` reads whole sentences whatever the index recorded (against
        span thresholds, which are at least as high: fewer flags, never more)."""
        if self.signals.language_window is None or self.calibration_ is None:
            return self.signals.language_window
        w = self.calibration_.get("language_window")
        return int(w) if isinstance(w, int) and not isinstance(w, bool) else None

    def language_threshold_(self) -> float | None:
        """The index's language-switch threshold at ``operating_point`` (``None``: off)."""
        return self._signal_threshold("language_thresholds", self.language_switch, 0.0)

    def disguise_threshold_(self) -> float | None:
        """The index's disguised-word threshold at ``operating_point`` (``None``: off)."""
        return self._signal_threshold("disguise_thresholds", self.disguise, 1.0)

    def _signal_threshold(self, key: str, on: bool, floor: float) -> float | None:
        cal = self.calibration_
        table = cal.get(key) if on and cal is not None else None
        if not isinstance(table, Mapping) or self.operating_point not in table:
            return None
        return max(float(table[self.operating_point]), floor)

    def threshold_source(self) -> str:
        if self.threshold is not None:
            return "explicit"
        return "index" if self.calibration_ is not None else "head default"

    # ------------------------------------------------------------------ scoring

    def _clip(self, text: str) -> tuple[str, bool]:
        if len(text) <= self.max_chars:
            return text, False
        cut = text[: self.max_chars]
        space = cut.rfind(" ", self.max_chars - 200)
        return (cut[:space] if space > 0 else cut), True

    def _key(self, text: str, discount: float, window_text: bool, boost: float) -> bytes:
        win = int(bool(self.windows)) + int(bool(self.windows) and window_text)
        sig = f"{','.join(self.languages_() or ())}\x00{self.language_window_()}\x00{int(self.disguise)}"
        raw = f"{self.language}\x00{win}\x00{discount}\x00{boost}\x00{sig}\x00{text}".encode()
        return hashlib.blake2b(raw, digest_size=16).digest()

    def score_texts(self, texts: Sequence[str]) -> list[Scored]:
        """Sentences, scores and rule hits of each text (cached; new ones encoded in one
        call). Scores are 0 when the classifier is off."""
        self._validate_params()
        discount = self.discount_()
        window_text = self.window_text_()
        boost = self.boost_()
        keys = [self._key(t, discount, window_text, boost) for t in texts]
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._cache}
        fresh: dict[bytes, Scored] = {}
        if todo:
            segs = {k: segment(t, self.language) for k, t in todo.items()}
            norm = [normalize(s) for ss in segs.values() for s in ss]
            vecs = (
                head_rows(
                    self.head_(),
                    l2_normalize(self.encoder.encode([classifier_view(t) for t in norm])),
                    norm,
                )
                if self.classifier and norm and self.encoder is not None
                else None
            )
            # the mention check only matters when it discounts (an older index: factor 1)
            mask = mention_mask(norm) if vecs is not None and discount < 1.0 else None
            joined: list[np.ndarray] = []
            if vecs is not None and self.encoder is not None and self.windows and window_text:
                views = [classifier_view(t) for t in norm]
                at, texts2 = 0, []
                for ss in segs.values():
                    texts2 += [f"{views[at + j]} {views[at + j + 1]}" for j in range(len(ss) - 1)]
                    at += len(ss)
                pv = l2_normalize(self.encoder.encode(texts2)) if texts2 else np.zeros((0, 1))
                at = 0
                for ss in segs.values():
                    m = max(len(ss) - 1, 0)
                    joined.append(pv[at : at + m])
                    at += m
            at = 0
            langs = self.languages_()
            for p, (k, ss) in enumerate(segs.items()):
                n = len(ss)
                own = pair = np.zeros(0, dtype=np.float64)
                if vecs is not None and n:
                    own, pair = pair_scores(
                        self.head_(),
                        vecs[at : at + n],
                        None if mask is None else mask[at : at + n],
                        discount,
                        joined[p] if joined and n > 1 else None,
                        boost,
                    )
                    if not self.windows:
                        pair = np.zeros(0, dtype=np.float64)
                elif n:
                    own = np.zeros(n, dtype=np.float64)
                nrm = norm[at : at + n]
                at += n
                margins = (
                    lang_id.sentence_margins(nrm, langs, self.language_window_()) if langs else None
                )
                fresh[k] = Scored(
                    tuple(ss),
                    own,
                    pair,
                    tuple(tuple(rule_hits(s)) for s in ss),
                    foreign=(
                        lang_id.switch_margins(nrm, langs, margins)
                        if langs and margins is not None
                        else None
                    ),
                    margins=margins,
                    disguised=(
                        np.array([disguised_words(s) for s in ss], dtype=np.float64)
                        if self.disguise
                        else None
                    ),
                )
            for k, v in fresh.items():
                if self.cache_size <= 0:
                    break
                while len(self._cache) >= self.cache_size:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[k] = v
        return [fresh[k] if k in fresh else self._cache[k] for k in keys]

    def precompute(self, texts: Sequence[str]) -> int:
        """Score passages ahead of queries (index time); returns how many are cached."""
        if isinstance(texts, str):
            raise InputError("precompute expects a list of texts, got a bare string.")
        self._validate_params()
        for start in range(0, len(texts), 512):
            self.score_texts([self._clip(t)[0] for t in texts[start : start + 512]])
        return len(self._cache)

    def _switches_in_retrieved(self, r: RetrievedPassage, sc: Scored) -> np.ndarray | None:
        """The language switches of a passage, read against the passage *as retrieved*:
        when an earlier filter of a chain trimmed it (``metadata["original_text"]``), a
        sentence that now stands alone or among a few still switches from the rest of the
        original paragraph (:mod:`~ragshield.defenses.injection.language`)."""
        orig = r.passage.metadata.get("original_text")
        langs = self.languages_()
        if sc.foreign is None or sc.margins is None or not langs:
            return sc.foreign
        if not isinstance(orig, str) or orig == r.text:
            return sc.foreign
        out = sc.foreign.copy()
        for j in np.flatnonzero((sc.margins > 0) & ~np.isfinite(sc.foreign)):
            rest = normalize(self._clip(orig)[0].replace(sc.sentences[j], " ", 1))
            if lang_id.reads_as_own(rest, langs):
                out[j] = sc.margins[j]
        return out

    # ------------------------------------------------------------------ the call

    def _goes_whole(self, query: str, sc: Scored) -> bool:
        """Whether a flag in this passage removes all of it (``scope``): a passage written
        to be retrieved for the question holds no genuine text to keep."""
        if self.scope != "restated":
            return self.scope == "passage"
        if self._qa_corpus or not sc.sentences:
            return False
        if restates(sc.sentences, query).any():
            return True
        text = " ".join(sc.sentences)
        if self.restated_coverage is not None and (
            question_coverage(query, [text])[0] >= self.restated_coverage
        ):
            return True
        if self.restated_echo is None or self.encoder is None:
            return False
        vecs = l2_normalize(np.asarray(self.encoder.encode([query, *sc.sentences]), np.float32))
        return echo(vecs[0], vecs[1:]) >= self.restated_echo

    def _flags(
        self,
        r: RetrievedPassage,
        sc: Scored,
        t: float,
        low: float | None,
        t_lang: float | None,
        t_dis: float | None,
    ) -> tuple[np.ndarray, np.ndarray | None, list[str | None]]:
        """``(flagged, by rule or signal, the signal's reason per sentence)`` of a passage;
        the bars are read once per call by :meth:`filter`, not once per passage and reading."""
        by_rule = np.array([bool(h) for h in sc.rules], dtype=bool) if self.rules else None
        flag = (
            window_flags(sc.own, sc.pair, t, low, by_rule)
            if self.classifier
            else np.zeros(len(sc.sentences), bool)
        )
        foreign = self._switches_in_retrieved(r, sc) if t_lang is not None else None
        sig, why = signal_flags(foreign, sc.disguised, t_lang, t_dis)
        if sig.any():  # a signal counts like a rule (held neighbours, the same report)
            by_rule = sig if by_rule is None else by_rule | sig
            if self.classifier:
                flag = window_flags(sc.own, sc.pair, t, low, by_rule)
        if by_rule is not None and by_rule.size:
            flag = flag | by_rule
        return flag, by_rule, why

    def _cut_readings(self, query: str, texts: Sequence[str]) -> list[Scored | None]:
        """Per passage, its scores with the stretch restating the question cut off
        (``restated_span``; ``None`` where no stretch restates it or the scope does not
        read it), all new texts encoded in one call."""
        out: list[Scored | None] = [None] * len(texts)
        if self.scope != "restated" or self._qa_corpus or self.restated_span is None:
            return out
        cuts: dict[int, str] = {}
        for i, text in enumerate(texts):
            span = restating_span(text, query, self.restated_span)
            if span is not None:
                cuts[i] = without_span(text, span)
        for i, sc in zip(cuts, self.score_texts(list(cuts.values())), strict=True):
            out[i] = sc
        return out

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        t0 = time.perf_counter()
        self._validate_params()
        check_query(query)
        items = check_retrieved(retrieved, type(self).__name__, self.encoder)
        clipped = [self._clip(r.text) for r in items]
        scored = self.score_texts([t for t, _ in clipped])
        cut_scored = self._cut_readings(query, [t for t, _ in clipped])
        t = self.threshold_() if self.classifier else float("nan")
        low = self.low_threshold_() if self.classifier else None
        bars = (t, low, self.language_threshold_(), self.disguise_threshold_())
        kept: list[RetrievedPassage] = []
        removed: list[RetrievedPassage] = []
        decisions: list[Decision] = []
        n_flagged = 0
        for i, (r, sc, cut) in enumerate(zip(items, scored, cut_scored, strict=True)):
            flag, by_rule, why = self._flags(r, sc, *bars)
            best = sc.scores
            if cut is not None:  # read with the restated question cut off (restated_span)
                cut_flag, _, _ = self._flags(r, cut, *bars)
                flagged_cut = [s for s, f in zip(cut.sentences, cut_flag, strict=True) if f]
                by_cut = np.array(
                    [any(c in s or s in c for c in flagged_cut) for s in sc.sentences], bool
                )
                if flagged_cut and by_cut.size and not by_cut.any():
                    by_cut[0] = True  # the cut sentence reads otherwise than any original
                if by_cut.any():
                    best = np.maximum(best, float(cut.scores[cut_flag].max(initial=0.0)) * by_cut)
                    flag = flag | by_cut
            n_flagged += int(flag.sum())
            whole = bool(flag.any()) and (cut is not None or self._goes_whole(query, sc))
            for j, s in enumerate(sc.sentences):
                if not (flag[j] or whole):
                    continue
                ruled = by_rule is not None and bool(by_rule[j])
                reason = RULE if ruled else (CLASSIFIER if flag[j] else COLLATERAL)
                if ruled:
                    hits = sc.rules[j] if self.rules else ()
                    reason = f"{RULE}:{'+'.join(hits)}" if hits else f"{SIGNAL}:{why[j]}"
                decisions.append(
                    Decision(
                        index=i,
                        passage_id=r.id,
                        reason=reason,
                        unit="sentence",
                        text=s,
                        scores={
                            "suspicion": 1.0 if ruled else float(best[j]),
                            "score": float(best[j]),
                            "threshold": t,
                            "position": float(j),
                        },
                    )
                )
            keep = ~flag if not whole else np.zeros(len(sc.sentences), bool)
            if clipped[i][1]:
                decisions.append(
                    Decision(
                        index=i, passage_id=r.id, reason="truncated_over_max_chars",
                        unit="passage", scores={"suspicion": 0.0, "chars": float(len(r.text))},
                    )
                )  # fmt: skip
            if not keep.any():
                removed.append(r)
                if not sc.sentences:
                    decisions.append(
                        Decision(index=i, passage_id=r.id, reason="empty_passage",
                                 scores={"suspicion": 0.0})
                    )  # fmt: skip
                continue
            if keep.all() and not clipped[i][1]:
                kept.append(r)
                continue
            text = " ".join(s for s, k in zip(sc.sentences, keep, strict=True) if k)
            meta = {**dict(r.passage.metadata), "original_text": r.text}
            kept.append(
                RetrievedPassage(
                    passage=replace(r.passage, text=text, metadata=meta),
                    score=r.score,
                    rank=r.rank,
                    embedding=None,
                )
            )
        return FilterResult(
            name=self.name,
            kept=tuple(kept),
            removed=tuple(removed),
            decisions=tuple(decisions),
            details={
                "threshold": t,
                "threshold_source": self.threshold_source(),
                "operating_point": self.operating_point,
                "n_flagged_sentences": n_flagged,
            },
            seconds=time.perf_counter() - t0,
        )
