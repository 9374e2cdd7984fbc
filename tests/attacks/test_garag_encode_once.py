"""The typo search encodes each copy text once and still picks the texts it picked before.

The expected texts below were written by the search *before* it cached encodings (commit
ac543db, each generation encoded whole), with a character-trigram encoder whose vector of
a text does not depend on the batch it is encoded in; the same check on the packaged MiniLM
(5 SQuAD questions, identical texts) is in docs/results-llm-engine.md.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import pytest

from ragshield.attacks.garag import TypoAttack

EIFFEL = (
    "who designed the eiffel tower",
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. It is "
    "named after the engineer Gustave Eiffel, whose company designed and built the tower "
    "for the 1889 World's Fair. Locally nicknamed the Iron Lady, it was initially criticised "
    "by some of France's leading artists and intellectuals for its design.",
    ["Gustave Eiffel"],
    {"population": 8, "generations": 6},
)
SHORT = (  # a short passage: children often repeat an earlier copy
    "what is the capital of australia",
    "Canberra is the capital of Australia.",
    ["Canberra"],
    {"population": 6, "generations": 10, "rate": 0.5},
)


class TrigramEncoder:
    """Hashed character trigrams, L2-normalised: a text's vector is the same in any batch."""

    dim = 64

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        out = np.zeros((len(texts), self.dim))
        for i, t in enumerate(texts):
            for j in range(len(t) - 2):
                out[i, zlib.crc32(t[j : j + 3].lower().encode()) % self.dim] += 1
        return out / np.linalg.norm(out, axis=1, keepdims=True)


# fmt: off
BEFORE = [
    (EIFFEL, 0, (
        "Te REiffel Tower iw a wrought-iron lattice tower pn the Champ re Mars in Parsi. It is named after the engineer FGustave Eiffekl, whose company designed anc built the tower for the 1889 World's Fair. Locally nicknamed the Iron Lady, kt was initially criticised gy some of France's leadinfg artists and intellectuals for ita esign.",
        "Te REiffel Tower is a wrought-iron lattce tower pn the Champ dre Mars ib Parsi. It is named after the engineer FGustave Efifel, whose company designed anc built the tower for the 1889 World's Fair. Locally nicknamed the Iron Lady, kt was initially criticised gy some of France's leading artists and intellectuals for ita dsesign.",
        "The REiffel Tower iw a wrought-iron lattce tower in the Champ re Mars in Parsi. It is named after the engineer FGustave Eicfel, whose company designed anc built the tower for the 1889 Worlc's Fair. Locally nicknamed the Iron Lady, kt was initially criticised by some of France's leadinfg artists and intellectuals for ita esign.",
    )),
    (EIFFEL, 3, (
        "The Effel Tower is a wrought-iron lattice tower on ythe Chamlp de Mqrs in Paeris. It is named after the engineer Gustave Eieffel, whsoe compay designed and built the tower for the 1889 World's Fair. Locally nicknamed tje Iron Lady, it wa initiaplly criticised by some of France's leading artists adn intellectuals fo it design.",
        "The Effel Tower is a wrought-iron lattice tower on ythe Chamlp de Masr in Paeris. It is named after the engineer Gustave Eieffel, whsoe compay designed and built the tower for the 1889 World's Fair. Locally nicknamed tje Iron Lady, it wa initiaplly criticised by some of France's leading artists adn intellectuals fo it design.",
        "The Eifefl Tower is a wrought-iron lattice tower on the Champ de Masr in Paeris. It is named after the engineer Gustave Eirffel, whsoe compay designed and built the tower for the 1889 World's Fair. Locally nicknaemd th Iron Lady, it wa initiaplly criticised by some of Frnace's leading artists adn intellectuals fro it design.",
    )),
    (SHORT, 0, (
        'Canberar is the cpital of Australi.',
        'Canberar is the capital or Australi.',
        'Canberar is the capital kf Australi.',
    )),
    (SHORT, 3, (
        'Canberea ids the sapital of Australia.',
        'Canberea izs the sapital of Australia.',
        'Canberea iz the sapital of Australia.',
    )),
]
# fmt: on


@pytest.mark.parametrize(("case", "seed", "expected"), BEFORE)
def test_same_texts_as_before_each_text_encoded_once(
    case: tuple[str, str, list[str], dict[str, float]], seed: int, expected: tuple[str, ...]
) -> None:
    question, passage, answers, size = case
    enc = TrigramEncoder()
    got = TypoAttack(enc, **size).craft_from(question, passage, 3, seed=seed, answers=answers)  # type: ignore[arg-type]
    assert tuple(got) == expected
    copies = [t for batch in enc.batches[1:] for t in batch]  # the first is the question
    assert len(copies) == len(set(copies))  # no copy text encoded twice
    generations = int(size["generations"])
    assert len(enc.batches) <= 2 + generations  # still one batch per generation at most
