"""Index-side novelty (:mod:`ragshield.store.calibration_novelty`) and the ``derivative``
stage that reads it: a passage close to the question whose rare words its index neighbours
nearly all use was written from what the index already says (a note about the gold page
plus a planted answer) and goes; a genuine page brings rare words of its own and stays, and
a note written *from* the page, or a copy of it, lends the page no support."""

from __future__ import annotations

import numpy as np
import pytest

from fakes import QuestionEncoder, near_vector, unit_vector
from ragshield.defenses.ragdefender import RAGDefender
from ragshield.errors import InputError
from ragshield.store.calibration_novelty import Novelty, NoveltyIndex, passage_novelty
from ragshield.types import Passage, RetrievedPassage

DIM = 64
GOLD = ("Catamount Ridge observatory opened in Vermillion county by astronomer Quillfeather "
        "with a brass telescope, a zinc dome, a cedar library, a granite stair and a copper "
        "orrery.")  # fmt: skip
# written from GOLD (four of its rare words) plus one planted word of its own
NOTE = "The Catamount Ridge observatory of Quillfeather: Marrakesh."
TYPO_COPY = GOLD.replace("telescope", "telescpoe").replace("library", "libary")
OTHERS = [
    "Harbour pilots guide tankers past shoals near Ostrava using sonar buoys and kelp charts.",
    "Monastery bees produce heather honey sold at midsummer fairs beside the abbey orchards.",
    "Railway signalmen in Tampere logged semaphore faults during the blizzard of the winter.",
    "Glassblowers of Murano anneal goblets slowly so that the lattice canes never crack.",
    "Falconers train gyrfalcons with leather lures on moorland ridges above the reservoir.",
]


def _index(texts: list[str], close: dict[int, tuple[int, float]]) -> np.ndarray:
    """Random unit vectors; ``close[i] = (j, c)`` puts passage i at cosine c to passage j."""
    v = [unit_vector(100 + i, DIM) for i in range(len(texts))]
    for i, (j, c) in close.items():
        v[i] = near_vector(v[j], c, 200 + i)
    return np.asarray(v, dtype=np.float32)


def test_a_note_written_from_a_page_is_not_novel_and_lends_the_page_nothing() -> None:
    texts = [GOLD, NOTE, *OTHERS]
    table = passage_novelty([f"p{i}" for i in range(len(texts))], texts,
                            _index(texts, {1: (0, 0.7)}))  # fmt: skip
    assert table["p1"].rare == 5 and table["p1"].share == pytest.approx(0.2)  # only Marrakesh
    assert table["p0"] == Novelty(1.0, 18)  # the note repeats 4 of its 18 rare words
    assert all(table[f"p{i}"].share >= 0.8 for i in range(2, len(texts)))


@pytest.mark.parametrize("close", [0.9, 0.7])  # an embedding copy / a typo'd word copy
def test_copies_lend_no_support(close: float) -> None:
    texts = [GOLD, TYPO_COPY, *OTHERS]
    table = passage_novelty([f"p{i}" for i in range(len(texts))], texts,
                            _index(texts, {1: (0, close)}))  # fmt: skip
    assert table["p0"].share == 1.0 and table["p1"].share == 1.0


def test_a_neighbour_that_brings_nothing_lends_nothing() -> None:
    # a second note, built from GOLD's words and NOTE's planted one, brings nothing itself
    # (first pass: 1 of 7 rare words its own): it supports NOTE's Marrakesh only when
    # source_share lets a passage that brings nothing lend support
    x = "Marrakesh observatory Catamount Vermillion county orrery telescope"
    texts = [GOLD, NOTE, x, *OTHERS]
    ids = [f"p{i}" for i in range(len(texts))]
    vectors = _index(texts, {1: (0, 0.7), 2: (1, 0.7)})
    assert passage_novelty(ids, texts, vectors)["p1"].share == pytest.approx(1 / 3, abs=1e-4)
    assert passage_novelty(ids, texts, vectors, source_share=0.0)["p1"].share == 0.0


def test_added_passages_are_judged_against_the_index() -> None:
    """A scan (or the filter-aware oracle) adds passages to a profiled index: each added
    one gets the value a whole recomputation gives it; the index's own keep theirs."""
    texts = [GOLD, NOTE, *OTHERS]
    ids = [f"p{i}" for i in range(len(texts))]
    vectors = _index(texts, {1: (0, 0.7)})
    whole = passage_novelty(ids, texts, vectors)
    rest = [i for i in range(len(texts)) if i != 1]
    base = NoveltyIndex([ids[i] for i in rest], [texts[i] for i in rest], vectors[rest])
    added = base.with_added(["p1"], [NOTE], vectors[[1]])
    assert added["p1"] == whole["p1"] == Novelty(0.2, 5, 1)  # GOLD: one sibling
    assert {k: v for k, v in added.items() if k != "p1"} == base.table
    assert base.with_added([], [], vectors[:0]) == base.table


UNIQUE = ["Ashford Brennan Colwick Dunmore Elsworth Farleigh",
          "Garside Hallam Ingleby Jarrow Kelham Lindley",
          "Marston Netley Oakham Pelham Quarley Radley",
          "Selsey Tadley Upton Ventnor Warsop Yarmouth",
          "Zennor Alnwick Bampton Cawston Dalton Eyam"]  # fmt: skip
# one template, five years: the shared words make them siblings (Jaccard ~0.4), not copies
SERIES = [f"The {1921 + i} Quillfeather Honours: King Ostravan appointed {u} to the Order "
          "of the Brass Orrery, Gazette of Vermillion." for i, u in enumerate(UNIQUE)]  # fmt: skip


def test_series_pages_count_their_siblings_added_passages_count_the_index_only() -> None:
    """Pages of a template series share its vocabulary (word Jaccard >= 0.15, below the
    copy bar): ``siblings`` counts them. An added passage counts only the index's own pages
    as siblings: planted passages vouch for none."""
    texts = [*SERIES, *OTHERS]
    ids = [f"p{i}" for i in range(len(texts))]
    close = {i: (0, 0.7) for i in range(1, 5)}
    vectors = _index(texts, close)
    table = passage_novelty(ids, texts, vectors)
    assert all(table[f"p{i}"].siblings == 4 for i in range(5))
    assert all(table[f"p{i}"].siblings == 0 for i in range(5, len(texts)))
    base = NoveltyIndex(ids[2:], texts[2:], vectors[2:])
    added = base.with_added(ids[:2], texts[:2], vectors[:2])
    assert added["p0"].siblings == added["p1"].siblings == 3  # p2-p4, not each other


def test_one_id_and_text_per_vector() -> None:
    with pytest.raises(InputError, match="one id and text per vector"):
        passage_novelty(["a"], ["x", "y"], np.eye(2, dtype=np.float32))


Q = "Where does the Catamount Ridge observatory of Quillfeather stand?"


def _filter(note_echo: float, **params: float) -> RAGDefender:
    enc = QuestionEncoder(Q, {NOTE: note_echo, GOLD: 0.72}, DIM)
    return RAGDefender(enc, group_knn=False, echo_pairs=False, claim_consensus=False,
                       typo_view=False, coverage_threshold=101.0, lone_echo=2.0, guard=False,
                       **params)  # fmt: skip


def _retrieved() -> list[RetrievedPassage]:
    texts = [GOLD, NOTE, *OTHERS]
    return [RetrievedPassage(Passage(f"p{i}", t), 1.0 - i / 10, i, unit_vector(50 + i, DIM))
            for i, t in enumerate(texts)]  # fmt: skip


@pytest.mark.parametrize(
    ("note", "echo", "params", "removed"),
    [
        (Novelty(0.2, 5), 0.8, {}, ["p1"]),  # close to the question, brings one word of five
        (Novelty(0.2, 5), 0.6, {}, []),  # not close to the question (derivative_echo 0.7)
        (Novelty(0.5, 6), 0.8, {}, []),  # brings half its rare words
        (Novelty(0.0, 2), 0.8, {}, []),  # too few rare words to say (derivative_min_rare 3)
        (Novelty(0.2, 5), 0.8, {"derivative_novelty": -1.0}, []),  # switched off
        (Novelty(0.2, 5, 3), 0.8, {}, []),  # a series page: 3 siblings share its template
        (Novelty(0.2, 5, 2), 0.8, {}, ["p1"]),  # two are not a series (derivative_siblings 3)
        (Novelty(0.2, 5, 3), 0.8, {"derivative_siblings": 0}, ["p1"]),  # no exemption
        (None, 0.8, {}, []),  # no table entry (a passage the index does not hold)
    ],
)
def test_derivative_stage(
    note: Novelty | None, echo: float, params: dict[str, float], removed: list[str]
) -> None:
    d = _filter(echo, **params)
    table = {"p0": Novelty(1.0, 10), **({} if note is None else {"p1": note})}
    d.use_novelty(table)
    res = d.filter(Q, _retrieved())
    assert sorted(r.id for r in res.removed) == removed
    assert res.details["derivative"] == [int(i[1:]) for i in removed]


def test_no_table_no_stage() -> None:
    d = _filter(0.8)
    assert d.filter(Q, _retrieved()).removed == ()
    d.use_novelty({"p1": Novelty(0.0, 5)})
    assert [r.id for r in d.filter(Q, _retrieved()).removed] == ["p1"]
    d.use_novelty(None)
    assert d.filter(Q, _retrieved()).removed == ()


def test_off_on_a_qa_index() -> None:
    """An FAQ's entries share one template's words: the stage does not run there."""
    d = _filter(0.8, restate_min_passages=2)  # what the profile of a Q&A index sets
    d.use_novelty({"p1": Novelty(0.0, 5)})
    assert d.filter(Q, _retrieved()).removed == ()
