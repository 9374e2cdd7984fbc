"""Rule-based rewrites of a question, as an attacker who has read the defense tries them first.

Example::

    import random
    from ragshield.attacks.rewrite import REWRITES, statement_form

    statement_form("What is the capital of Australia?")   # "The capital of Australia is"
    REWRITES["drop"]("What is the capital of Australia?", random.Random(0))

Why: PoisonedRAG (Zou et al. 2025) prefixes each passage with the *verbatim* question
only because it is the cheapest way to win retrieval. A defense that treats "contains the
question word for word" as evidence is beaten by any small edit that keeps the passage
close to the question in embedding space: words dropped, replaced by synonyms, reordered,
a statement instead of a question, a few typos (issue #28). Every rewrite here is a pure
function of the question and a seeded :class:`random.Random`, needs no model, and never
returns the question unchanged when it has something to change.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from ragshield.text import FUNCTION_WORDS

#: Words an attacker may drop without losing the question's topic (function words).
STOPWORDS = FUNCTION_WORDS | {"these", "those", "whose", "than"}
_AUX = ("is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have",
        "had", "will", "would", "should")  # fmt: skip
_WH = ("what", "which", "who", "whom", "whose", "when", "where", "why", "how")
#: Where a wh-word goes in a statement ("When was X founded?" -> "The time when X was founded").
_LEAD = {
    "who": "The person who",
    "whom": "The person whom",
    "whose": "The one whose",
    "when": "The time when",
    "where": "The place where",
    "why": "The reason why",
    "how": "The way",
}
#: A small synonym table (ours) for words common in NQ / HotpotQA / SQuAD questions.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "film": ("movie", "picture"),
    "movie": ("film",),
    "city": ("town", "municipality"),
    "town": ("city",),
    "located": ("situated", "found"),
    "born": ("birthed",),
    "country": ("nation", "state"),
    "nation": ("country",),
    "largest": ("biggest",),
    "biggest": ("largest",),
    "big": ("large",),
    "small": ("little",),
    "smallest": ("tiniest",),
    "first": ("earliest", "initial"),
    "last": ("final", "latest"),
    "famous": ("well-known", "renowned"),
    "known": ("recognized",),
    "wrote": ("authored", "penned"),
    "written": ("authored",),
    "directed": ("helmed",),
    "director": ("filmmaker",),
    "song": ("track", "single"),
    "album": ("record", "LP"),
    "band": ("group",),
    "singer": ("vocalist",),
    "actor": ("performer",),
    "actress": ("performer",),
    "company": ("firm", "corporation"),
    "founded": ("established", "started"),
    "built": ("constructed", "erected"),
    "died": ("passed away",),
    "won": ("earned", "received"),
    "award": ("prize", "honor"),
    "team": ("club", "side"),
    "player": ("athlete",),
    "played": ("performed",),
    "president": ("head",),
    "capital": ("seat of government",),
    "river": ("waterway",),
    "population": ("number of inhabitants",),
    "same": ("identical",),
    "both": ("each",),
    "year": ("date",),
    "name": ("title",),
    "named": ("called",),
    "called": ("named",),
    "people": ("persons",),
    "book": ("novel", "volume"),
    "novel": ("book",),
    "show": ("program", "series"),
    "series": ("show",),
    "university": ("college",),
    "school": ("institution",),
    "war": ("conflict",),
    "state": ("province",),
    "begin": ("start",),
    "began": ("started",),
    "start": ("begin",),
    "started": ("began",),
    "many": ("numerous",),
    "old": ("aged",),
    "older": ("elder",),
    "created": ("made", "produced"),
    "made": ("created", "produced"),
    "released": ("issued", "put out"),
    "largest city": ("biggest city",),
}
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


def stem(question: str) -> str:
    """The question without its final punctuation."""
    return question.strip().rstrip("?.! ").strip()


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def drop_words(question: str, rng: random.Random, rate: float = 0.3) -> str:
    """Drop about ``rate`` of the words (function words first; at least one), keeping the
    topic words retrieval needs. The default drops ~30 % — enough that no 4-word window
    of the question need survive in order (ours)."""
    words = stem(question).split()
    if len(words) < 3:
        return stem(question)
    func = [i for i, w in enumerate(words) if w.lower() in STOPWORDS]
    other = [i for i, w in enumerate(words) if w.lower() not in STOPWORDS]
    n = max(1, round(rate * len(words)))
    rng.shuffle(func)
    rng.shuffle(other)
    gone = set((func + other)[:n])
    return " ".join(w for i, w in enumerate(words) if i not in gone)


def replace_synonyms(question: str, rng: random.Random) -> str:
    """Replace every word with an entry in :data:`SYNONYMS` by a seeded choice; when none
    has one, swap the wh-word for a paraphrase ("what" -> "which") so the text changes."""
    text = stem(question)
    hits = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal hits
        w = m.group(0)
        opts = SYNONYMS.get(w.lower())
        if not opts:
            return w
        hits += 1
        rep = rng.choice(opts)
        return _cap(rep) if w[0].isupper() else rep

    out = _WORD.sub(sub, text)
    if hits:
        return out
    swaps = {"what": "which", "which": "what", "who": "which person", "when": "at what time",
             "where": "in what place", "how many": "what number of"}  # fmt: skip
    low = out.lower()
    for a, b in swaps.items():
        if low.startswith(a + " "):
            return _cap(b) + out[len(a) :]
    return f"{out}, exactly"


def reorder(question: str, rng: random.Random) -> str:
    """Move a clause: split at a comma / conjunction / preposition near the middle and put
    the second part first ("What is the capital of X" -> "of X, what is the capital");
    a seeded choice among the split points."""
    words = stem(question).split()
    if len(words) < 4:
        return " ".join(reversed(words))
    cuts = [
        i for i, w in enumerate(words)
        if 1 <= i <= len(words) - 2 and (w.lower() in ("of", "in", "for", "by", "and", "with",
                                                       "from", "on", "at", "that")
                                         or words[i - 1].endswith(","))
    ]  # fmt: skip
    at = rng.choice(cuts) if cuts else len(words) // 2
    head, tail = words[:at], words[at:]
    tail[-1] = tail[-1].rstrip(",")
    head = [head[0].lower() if head[0] in ("What", "Which", "Who", "When", "Where", "How",
                                           "Why", "Is", "Are", "Was", "Were", "Did", "Does",
                                           "Do") else head[0], *head[1:]]  # fmt: skip
    return _cap(" ".join(tail)) + ", " + " ".join(head).rstrip(",")


def statement_form(question: str) -> str:
    """The question as the start of a statement an attacker completes with the target:
    "What is the capital of X?" -> "The capital of X is"; "When was X founded?" ->
    "The time when X was founded"; "Which film came first, A or B?" -> "The film that
    came first, A or B, is"; "Are A and B in the same place?" -> "Whether A and B in the
    same place"; a declarative question ("... in which state?") -> "... in the state"."""
    words = stem(question).split()
    if not words:
        return ""
    w0 = words[0].lower()
    rest = words[1:]
    if w0 in _AUX:
        return "Whether " + " ".join(rest)
    if w0 in ("what", "which") and rest and rest[0].lower() in _AUX:
        return _cap(" ".join(rest[1:])) + f" {rest[0].lower()}"
    if w0 in ("what", "which") and rest:
        return f"The {' '.join(rest[:1])} that {' '.join(rest[1:])} is".replace("  ", " ")
    if w0 == "how" and rest and rest[0].lower() in ("many", "much"):
        return f"The number of {' '.join(rest[1:])} is"
    if w0 in _LEAD:
        if rest and rest[0].lower() in ("do", "does", "did"):
            return f"{_LEAD[w0]} {' '.join(rest[1:])}"
        if rest and rest[0].lower() in _AUX and len(rest) >= 2:
            aux, body = rest[0].lower(), rest[1:]
            if len(body) >= 2 and re.search(r"(ed|en|wn|rn|lt|ght)$", body[-1]):
                return f"{_LEAD[w0]} {' '.join(body[:-1])} {aux} {body[-1]}"
            return f"{_LEAD[w0]} {' '.join(body)} {aux}"
        return f"{_LEAD[w0]} {' '.join(rest)}"
    low = [w.lower() for w in words]
    for i, w in enumerate(low):  # declarative question: "... in which state?"
        if w in ("which", "what") and i + 1 < len(words):
            return " ".join([*words[:i], "the", *words[i + 1 :]])
    return "Regarding " + " ".join(words)


def typos(question: str, rng: random.Random, rate: float = 0.25) -> str:
    """One character edit (swap, drop, double, substitute) in ``rate`` of the words of 4+
    letters (at least one) — GARAG-style noise (Cho et al. 2024) on the prefix only."""
    return " ".join(edit_words(stem(question).split(" "), rng, rate, "aeiourstnl", fold=True))


def edit_words(
    words: list[str], rng: random.Random, rate: float, alphabet: str, *, fold: bool = False
) -> list[str]:
    """``words`` with one character edit (swap, drop, double, substitute from ``alphabet``)
    in ``rate`` of those of >= 4 letters (at least one): the shape of a GARAG perturbation.
    ``fold`` compares the substitute with the letter's lower case (never a no-op edit of a
    capital). Shared by the prefix typos here and the scan's typo copies
    (:func:`ragshield.eval.plant.typo_copy`)."""
    words = list(words)
    long = [i for i, w in enumerate(words) if len(w) >= 4]
    for i in rng.sample(long, max(1, round(rate * len(long)))) if long else []:
        w = words[i]
        j = rng.randrange(1, len(w) - 1)
        op = rng.randrange(4)
        if op == 0 and w[j - 1] != w[j]:
            w = w[: j - 1] + w[j] + w[j - 1] + w[j + 1 :]
        elif op == 1:
            w = w[:j] + w[j + 1 :]
        elif op == 2:
            w = w[:j] + w[j] + w[j:]
        else:
            letter = w[j].lower() if fold else w[j]
            w = w[:j] + rng.choice([c for c in alphabet if c != letter]) + w[j + 1 :]
        words[i] = w
    return words


#: Rewrite name -> ``(question, rng) -> prefix``; the attacks name them.
REWRITES: dict[str, Callable[[str, random.Random], str]] = {
    "drop": drop_words,
    "synonym": replace_synonyms,
    "reorder": reorder,
    "statement": lambda q, _rng: statement_form(q),
    "typo": typos,
}


def answer_variants(answer: str) -> list[str]:
    """Other wordings of the same (wrong) answer, each still carrying a word of it so a
    reader and the harness's substring check see the claim: "John Smith" -> "Smith",
    "J. Smith"; "3" -> "three"; "1850" -> "the year 1850"; anything -> "{a} itself",
    "{a} (officially)". The answer itself comes first; no duplicates."""
    a = answer.strip()
    out = [a]
    words = a.split()
    if len(words) >= 2 and all(w[:1].isupper() for w in words):
        out += [words[-1], f"{words[0][0]}. {' '.join(words[1:])}"]
    if a.isdigit():
        small = [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ]
        if int(a) < len(small):
            out.append(small[int(a)])
        elif len(a) == 4:
            out.append(f"the year {a}")
    low = a.lower()
    if low in ("yes", "no"):
        out += ["Yes, indeed" if low == "yes" else "No, not at all", low.upper()]
    out += [f"{a} (officially)", f"precisely {a}"]
    return list(dict.fromkeys(out))
