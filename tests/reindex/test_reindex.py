"""RAGFort re-indexing: SupCon loss (Eq. 1) by hand, HDBSCAN pseudo-labels on synthetic
blobs, the batch builder's guarantees, and a short real fine-tune + re-index of a tiny
index with the packaged MiniLM (a few optimiser steps: mechanics, not quality)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ragshield.errors import InputError
from ragshield.reindex import (
    load_reindexed,
    make_batches,
    pseudo_labels,
    read_spec,
    reindex,
    supcon_loss,
    train_supcon,
    training_labels,
)
from ragshield.reindex.supcon import _split_validation
from ragshield.store.faiss_store import FaissStore
from ragshield.types import Passage

TOPICS = {
    "heart": [
        "Chest pain spreading to the left arm can be a heart attack.",
        "An ECG shows whether the heart rhythm is irregular.",
        "High blood pressure strains the heart over many years.",
        "Palpitations and shortness of breath may mean atrial fibrillation.",
        "A cardiologist may order an echocardiogram of the heart.",
        "Angina is chest pressure when the heart muscle lacks oxygen.",
        "Statins lower cholesterol and the risk of heart disease.",
        "A heart murmur is an extra sound heard with a stethoscope.",
    ],
    "skin": [
        "An itchy red rash on the elbows may be eczema.",
        "Psoriasis causes thick silvery scales on the skin.",
        "A dermatologist can biopsy a changing mole on the skin.",
        "Acne forms when hair follicles clog with oil and dead skin.",
        "Sunburned skin peels a few days after exposure.",
        "Hives are raised itchy welts that appear after an allergy.",
        "A fungal skin infection often itches between the toes.",
        "Moisturisers help dry cracked skin in winter.",
    ],
    "teeth": [
        "A toothache with swelling may be a dental abscess.",
        "Bleeding gums when brushing are a sign of gingivitis.",
        "The dentist fills a cavity after removing the decay.",
        "Wisdom teeth can be removed when they are impacted.",
        "Sensitive teeth hurt with cold drinks when enamel wears.",
        "Braces straighten crooked teeth over many months.",
        "Fluoride toothpaste protects teeth against decay.",
        "A cracked tooth may need a crown from the dentist.",
    ],
}
TEXTS = [t for group in TOPICS.values() for t in group]
TOPIC_OF = np.repeat(np.arange(len(TOPICS)), [len(v) for v in TOPICS.values()])


# ---------------------------------------------------------------------------------------
# Eq. 1
# ---------------------------------------------------------------------------------------
class TestSupConLoss:
    def _four(self):
        import torch

        # unit vectors in 2-D: cosines z1·z2 = .6, z1·z3 = 0, z1·z4 = -1, z2·z3 = .8,
        # z2·z4 = -.6, z3·z4 = 0
        z = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [-1.0, 0.0]])
        return z, torch.tensor([0, 0, 1, 1])

    def test_hand_computed_value_on_four_vectors(self):
        z, y = self._four()
        e = math.exp
        # tau = 0.5, so each exponent is 2·cosine; P(i) has exactly one member here
        l1 = -math.log(e(1.2) / (e(1.2) + e(0.0) + e(-2.0)))
        l2 = -math.log(e(1.2) / (e(1.2) + e(1.6) + e(-1.2)))
        l3 = -math.log(e(0.0) / (e(0.0) + e(1.6) + e(0.0)))
        l4 = -math.log(e(0.0) / (e(-2.0) + e(-1.2) + e(0.0)))
        expected_sum = l1 + l2 + l3 + l4
        got_sum = float(supcon_loss(z, y, 0.5, reduction="sum"))
        assert got_sum == pytest.approx(expected_sum, rel=1e-6)
        assert float(supcon_loss(z, y, 0.5)) == pytest.approx(expected_sum / 4, rel=1e-6)

    def test_cosine_ignores_vector_length(self):
        z, y = self._four()
        assert float(supcon_loss(z * 3.0, y, 0.5)) == pytest.approx(float(supcon_loss(z, y, 0.5)))

    def test_anchors_without_positives_are_skipped(self):
        z, _ = self._four()
        import torch

        e = math.exp
        y = torch.tensor([0, 0, 1, 2])  # z3 and z4 have no positive: only l1 and l2 count
        l1 = -math.log(e(1.2) / (e(1.2) + e(0.0) + e(-2.0)))
        l2 = -math.log(e(1.2) / (e(1.2) + e(1.6) + e(-1.2)))
        assert float(supcon_loss(z, y, 0.5)) == pytest.approx((l1 + l2) / 2, rel=1e-6)
        none = supcon_loss(z.requires_grad_(), torch.tensor([0, 1, 2, 3]), 0.5)
        assert none.item() == 0.0
        none.backward()  # still differentiable: a batch without pairs is a no-op step

    def test_pulls_positives_together_under_gradient_descent(self):
        import torch

        torch.manual_seed(0)
        z = torch.randn(12, 8, requires_grad=True)
        y = torch.arange(12) % 3
        opt = torch.optim.SGD([z], lr=0.5)
        before = supcon_loss(z, y).item()
        for _ in range(50):
            opt.zero_grad()
            loss = supcon_loss(z, y)
            loss.backward()
            opt.step()
        assert supcon_loss(z, y).item() < before * 0.5

    def test_bad_arguments(self):
        z, y = self._four()
        with pytest.raises(InputError, match="reduction must be 'mean' or 'sum'"):
            supcon_loss(z, y, reduction="max")
        with pytest.raises(InputError, match="temperature must be > 0"):
            supcon_loss(z, y, 0.0)
        with pytest.raises(InputError, match="4 feature rows but 3 labels"):
            supcon_loss(z, y[:3])


# ---------------------------------------------------------------------------------------
# HDBSCAN pseudo-labels and the noise policy
# ---------------------------------------------------------------------------------------
def _blobs(seed: int = 0):
    """Three tight topics of one domain on the 16-d sphere plus 4 off-domain chunks
    (pseudo_labels normalises its input, so topics live on the sphere as with text)."""
    rng = np.random.default_rng(seed)
    eye = np.eye(16)
    centers = eye[0] + 0.6 * eye[1:4]  # cosine between topics ~0.74
    sizes = [40, 30, 50]
    x = np.vstack(
        [c + rng.normal(scale=0.04, size=(n, 16)) for c, n in zip(centers, sizes, strict=True)]
    )
    outliers = np.hstack([np.zeros((4, 5)), rng.normal(size=(4, 11))])  # off-domain, scattered
    truth = np.concatenate([np.repeat(np.arange(3), sizes), np.full(4, -1)])
    return np.vstack([x, outliers]), truth


class TestPseudoLabels:
    @pytest.mark.parametrize("seed", range(3))
    def test_eom_recovers_synthetic_blobs(self, seed):
        from sklearn.metrics import adjusted_rand_score

        x, truth = _blobs(seed)
        labels = pseudo_labels(x, cluster_selection_method="eom")
        blob = truth >= 0
        assert labels.max() + 1 == 3
        assert adjusted_rand_score(truth[blob], labels[blob]) > 0.95
        assert (labels[~blob] == -1).all()  # off-domain chunks are noise

    @pytest.mark.parametrize("seed", range(3))
    def test_default_leaf_topics_never_mix_blobs(self, seed):
        x, truth = _blobs(seed)
        labels = pseudo_labels(x)  # leaf: finer topics, each inside one blob
        assert labels.max() + 1 >= 3
        for c in range(labels.max() + 1):
            assert len(set(truth[labels == c].tolist())) == 1
        assert set(labels[truth >= 0].tolist()) - {-1}  # blobs are not all noise
        assert (labels[truth < 0] == -1).all()

    def test_tiny_input_still_clusters(self):
        x = np.array([[1.0, 0.0], [0.99, 0.01], [0.0, 1.0]])
        assert pseudo_labels(x).shape == (3,)

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            (
                {"min_cluster_size": 1},
                r"The 'min_cluster_size' parameter of pseudo_labels must be an int >= 2\. Got 1 instead\.",
            ),
            (
                {"min_samples": 0},
                r"The 'min_samples' parameter of pseudo_labels must be an int >= 1",
            ),
            ({"cluster_selection_method": "best"}, r"must be 'eom' or 'leaf'"),
        ],
    )
    def test_bad_parameters(self, kwargs, message):
        x, _ = _blobs()
        with pytest.raises(InputError, match=message):
            pseudo_labels(x, **kwargs)

    def test_rejects_non_matrix(self):
        with pytest.raises(InputError, match=r"needs a finite \(n >= 2, dim\) array"):
            pseudo_labels(np.ones(5))

    def test_noise_policies(self):
        x = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.8, 0.3]])
        lab = np.array([0, 0, 1, 1, -1])
        assert training_labels(lab, noise="singleton").tolist() == [0, 0, 1, 1, -1]
        assert training_labels(lab, noise="drop").tolist() == [0, 0, 1, 1, -1]
        assert training_labels(lab, x, noise="nearest").tolist() == [0, 0, 1, 1, 0]
        with pytest.raises(InputError, match="needs the chunk vectors"):
            training_labels(lab, noise="nearest")
        with pytest.raises(InputError, match="must be one of singleton, nearest, drop"):
            training_labels(lab, noise="ignore")
        with pytest.raises(InputError, match="labelled every chunk as noise"):
            training_labels(np.full(5, -1))


# ---------------------------------------------------------------------------------------
# batches and validation split
# ---------------------------------------------------------------------------------------
class TestBatches:
    @pytest.mark.parametrize("seed", range(3))
    def test_every_labelled_anchor_has_a_positive(self, seed):
        rng = np.random.default_rng(seed)
        labels = np.concatenate(
            [np.repeat(np.arange(15), rng.integers(2, 12, 15)), -np.ones(40, int)]
        )
        labels = rng.permutation(labels)
        batches = make_batches(labels, 32, rng, samples_per_class=4, noise_per_batch=0.25)
        seen = np.concatenate(batches)
        labelled = np.flatnonzero(labels >= 0)
        assert sorted(seen[labels[seen] >= 0].tolist()) == labelled.tolist()  # each once
        for b in batches:
            assert len(b) <= 32
            lab = labels[b]
            for c in np.unique(lab[lab >= 0]):
                assert (lab == c).sum() >= 2
            assert (lab < 0).sum() == 8  # 25 % of 32 noise slots

    def test_singleton_topics_become_negatives(self):
        labels = np.array([0, 0, 1, 2, 2, 2])
        batches = make_batches(labels, 8, np.random.default_rng(0), noise_per_batch=0.25)
        assert all((labels[b] == 1).sum() <= 1 for b in batches)

    def test_validation_anchors_have_positives(self):
        rng = np.random.default_rng(0)
        labels = np.concatenate([np.repeat(np.arange(20), 10), -np.ones(50, int)])
        train, val = _split_validation(labels, 0.1, rng)
        assert np.intersect1d(train, val).size == 0
        assert train.size + val.size == labels.size
        vl = labels[val]
        for c in np.unique(vl[vl >= 0]):
            assert (vl == c).sum() >= 2
            assert (labels[train] == c).sum() >= 2
        assert 0.05 < val.size / labels.size < 0.2


# ---------------------------------------------------------------------------------------
# real (short) training and re-indexing with the packaged MiniLM
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory, encoder):
    path = tmp_path_factory.mktemp("idx") / "base"
    passages = [Passage(f"p{i}", t) for i, t in enumerate(TEXTS)]
    store = FaissStore(encoder.dim, encoder_name=encoder.name)
    store.add(passages, encoder.encode(TEXTS))
    store.save(path)
    return path


TRAIN_KW = {
    "batch_size": 12,
    "lr": 1e-4,
    "max_steps": 3,
    "show_progress": False,
    "num_threads": 1,
    "min_cluster_size": 3,
    "val_fraction": 0.0,  # no early stopping: the weights must move in 3 steps
}


class TestTraining:
    def test_train_supcon_saves_a_loadable_encoder(self, tmp_path):
        from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

        res = train_supcon(
            None,
            TEXTS,
            TOPIC_OF,
            out_dir=tmp_path / "enc",
            epochs=2,
            batch_size=12,
            lr=1e-4,
            max_steps=4,
            show_progress=False,
            num_threads=1,
            val_fraction=0.25,
        )
        assert res.steps == 4 and res.n_val > 0
        assert res.initial_val_loss is not None and res.best_val_loss is not None
        assert res.best_val_loss <= res.initial_val_loss
        assert any("val_loss" in h for h in res.history)
        vecs = SentenceTransformerEncoder(tmp_path / "enc").encode(TEXTS[:2])
        assert vecs.shape == (2, 384)
        assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            (
                {"epochs": 0},
                r"The 'epochs' parameter of train_supcon must be a float in \(0, 100\]",
            ),
            ({"batch_size": 2}, r"The 'batch_size' parameter of train_supcon must be an int >= 4"),
            ({"temperature": -1}, r"The 'temperature' parameter of train_supcon must be a float"),
        ],
    )
    def test_bad_parameters(self, tmp_path, kwargs, message):
        with pytest.raises(InputError, match=message):
            train_supcon(None, TEXTS, TOPIC_OF, out_dir=tmp_path / "e", **kwargs)

    def test_bad_data(self, tmp_path):
        with pytest.raises(InputError, match="bare string"):
            train_supcon(None, "text", [0], out_dir=tmp_path / "e")
        with pytest.raises(InputError, match="one label per text"):
            train_supcon(None, TEXTS, TOPIC_OF[:3], out_dir=tmp_path / "e")
        with pytest.raises(InputError, match="nothing to contrast"):
            train_supcon(None, TEXTS, np.full(len(TEXTS), -1), out_dir=tmp_path / "e")
        (tmp_path / "full").mkdir()
        (tmp_path / "full" / "x").write_text("x")
        with pytest.raises(InputError, match="is not empty"):
            train_supcon(None, TEXTS, TOPIC_OF, out_dir=tmp_path / "full")


class TestReindex:
    def test_asymmetric_paper_variant(self, tiny_index, tmp_path, encoder):
        out = tmp_path / "ragfort"
        res = reindex(tiny_index, out, **TRAIN_KW)
        for name in (
            "index.faiss",
            "vectors.npy",
            "passages.jsonl",
            "meta.json",
            "labels.npy",
            "ragfort.json",
            "encoder/config.json",
        ):
            assert (out / name).exists(), name
        spec = read_spec(out)
        assert spec["query_encoder"] == encoder.name == spec["base_encoder"]
        assert spec["symmetric"] is False and res.n_clusters >= 2
        assert np.load(out / "labels.npy").shape == (len(TEXTS),)
        base, new = FaissStore.load(tiny_index), FaissStore.load(out)
        assert [p.text for p in new.passages] == [p.text for p in base.passages]
        assert not np.allclose(new.vectors, base.vectors)  # re-encoded by the trained model
        store, qenc = load_reindexed(out)
        assert qenc.name == encoder.name  # the paper keeps the query encoder
        _, trained = load_reindexed(out, symmetric=True)
        assert np.allclose(trained.encode(TEXTS[:3]), new.vectors[:3], atol=1e-5)
        hits = store.search(qenc.encode(["my gums bleed when I brush"]), 3)[0]
        assert len(hits) == 3

        from ragshield.indexing import open_index

        _, opened = open_index(out)
        assert opened.name == encoder.name

        with pytest.raises(InputError, match="already exists"):
            reindex(tiny_index, out, **TRAIN_KW)
        with pytest.raises(InputError, match="must differ from the input index"):
            reindex(tiny_index, tiny_index, **TRAIN_KW)

    def test_symmetric_variant_points_queries_at_the_trained_encoder(self, tiny_index, tmp_path):
        out = tmp_path / "sym"
        reindex(tiny_index, out, symmetric=True, noise="nearest", **TRAIN_KW | {"max_steps": 1})
        spec = json.loads((out / "ragfort.json").read_text())
        assert spec["query_encoder"] == "encoder"
        assert spec["clustering"]["noise_policy"] == "nearest"
        _, qenc = load_reindexed(out)
        assert str(qenc.path) == str(out / "encoder")
        from ragshield.indexing import open_index

        _, opened = open_index(out)
        assert str(opened.path) == str(out / "encoder")
        assert not (tmp_path / ".sym.old").exists()
        assert not list(tmp_path.glob(".sym.work.*"))  # the work folder is cleaned up

    def test_not_an_index(self, tmp_path):
        with pytest.raises(InputError, match="not a ragshield index"):
            reindex(tmp_path / "nope", tmp_path / "out")
        with pytest.raises(InputError, match="not a RAGFort re-index"):
            read_spec(tmp_path)
        with pytest.raises(InputError, match="The 'noise' parameter of reindex"):
            reindex(tmp_path / "nope", tmp_path / "out", noise="keep")


class TestCli:
    def test_dry_run_reports_clusters(self, tiny_index, tmp_path):
        from typer.testing import CliRunner

        from ragshield.reindex.cli import app

        res = CliRunner().invoke(
            app,
            [
                str(tiny_index),
                "--out",
                str(tmp_path / "x"),
                "--dry-run",
                "--json",
                "--min-cluster-size",
                "3",
            ],
        )
        assert res.exit_code == 0, res.output
        summary = json.loads(res.output)
        assert summary["chunks"] == len(TEXTS) and summary["clusters"] >= 2
        assert not (tmp_path / "x").exists()

    def test_mounted_under_the_main_cli(self, tiny_index, tmp_path):
        from typer.testing import CliRunner

        from ragshield.cli import app

        res = CliRunner().invoke(
            app,
            [
                "reindex",
                str(tiny_index),
                "--out",
                str(tmp_path / "x"),
                "--dry-run",
                "--min-cluster-size",
                "3",
            ],
        )
        assert res.exit_code == 0, res.output
        assert f"{len(TEXTS)} chunks" in res.output and "would write" in res.output

    def test_passes_options_to_the_library(self, monkeypatch, tmp_path):
        from typer.testing import CliRunner

        import ragshield.reindex.build as build
        from ragshield.reindex.build import ReindexResult
        from ragshield.reindex.cli import app

        seen = {}

        def fake(index_dir, out_dir, **kw):
            seen.update(kw, index_dir=index_dir, out_dir=out_dir)
            return ReindexResult(out_dir, kw["symmetric"], "encoder", 10, 2, 0.5, None)

        monkeypatch.setattr(build, "reindex", fake)
        res = CliRunner().invoke(
            app,
            ["idx", "--out", str(tmp_path / "n"), "--symmetric", "--epochs", "0.5", "--seed", "3"],
        )
        assert res.exit_code == 0, res.output
        assert seen["symmetric"] is True and seen["epochs"] == 0.5 and seen["seed"] == 3
        assert "queries use the trained encoder" in res.output


# ---------------------------------------------------------------------------------------
# what `ragshield index` records, recorded by the re-index too
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def built_index(tmp_path_factory, encoder):
    """An index as ``ragshield index`` builds it: profile, novelty table, trusted ids and a
    canary in every stored chunk."""
    from ragshield.indexing import build_index

    path = tmp_path_factory.mktemp("built") / "base"
    passages = [Passage(f"p{i}", t) for i, t in enumerate(TEXTS)]
    build_index(passages, path, encoder=encoder, trusted_ids=["p3"], canary_secret="k" * 32)
    return path


@pytest.mark.parametrize("symmetric", [False, True])
def test_reindex_records_the_profile_and_table_index_records(
    built_index, tmp_path, encoder, symmetric
):
    from ragshield.defenses.calibration import profile_index
    from ragshield.defenses.canary_marks import strip_canaries
    from ragshield.store.calibration_novelty import NoveltyIndex

    out = tmp_path / "ragfort"
    reindex(built_index, out, symmetric=symmetric, **TRAIN_KW | {"max_steps": 1})
    base, new = FaissStore.load(built_index), FaissStore.load(out)
    assert base.profile is not None and base.novelty is not None  # the case: a full index
    assert new.profile is not None and new.novelty is not None
    meta = json.loads((out / "meta.json").read_text())
    assert meta["novelty"]["count"] == len(TEXTS) and (out / "novelty.npy").is_file()
    assert [p.text for p in new.passages] == [p.text for p in base.passages]  # canaries kept
    plain = [strip_canaries(p.text) for p in new.passages]
    assert plain == TEXTS and all(p.text != t for p, t in zip(new.passages, TEXTS, strict=True))

    # equal to what `index` computes over the same plain texts with the re-index's vectors
    # (and, for the profile, the queries' encoder)
    _, queries = load_reindexed(out)
    trained = load_reindexed(out, symmetric=True)[1]
    assert np.allclose(trained.encode(TEXTS[:3]), new.vectors[:3], atol=1e-5)  # plain texts
    expected = json.loads(
        json.dumps(profile_index(TEXTS, new.vectors, queries, trusted_ids=["p3"]))
    )
    if symmetric:  # the trained encoder was measured in the work folder, then moved in
        assert new.profile["injection"]["encoder"] == str((out / "encoder").resolve())
        expected["injection"]["encoder"] = new.profile["injection"]["encoder"]
    assert new.profile == expected
    ids = [p.id for p in new.passages]
    assert new.novelty.table == NoveltyIndex(ids, TEXTS, new.vectors).table

    # equal to the source index where the texts decide; the vector statistics are the
    # re-index's own (RAGFort re-encodes every chunk)
    for key in ("trusted_ids", "question_share", "common_words", "n"):
        assert new.profile[key] == base.profile[key], key
    assert new.profile["trusted_ids"] == ["p3"]
    assert np.array_equal(new.novelty.values_[:, 1], base.novelty.values_[:, 1])  # rare words
    assert new.profile["quantiles"] != base.profile["quantiles"]
    if not symmetric:  # the same query encoder: the same injection thresholds
        assert new.profile["injection"] == base.profile["injection"]


def test_ask_on_a_reindexed_index_hands_ragdefender_the_table(
    built_index, tmp_path, caplog: pytest.LogCaptureFixture
):
    """The pipeline ``ask`` / ``serve`` open over a re-index: RAGDefender calibrated from
    its profile and handed its table, without the "no novelty table" line."""
    import logging

    from ragshield.config import PipelineConfig, build_pipeline
    from ragshield.defenses.ragdefender import RAGDefender
    from ragshield.store import calibration_novelty as cn

    out = tmp_path / "ragfort"
    reindex(built_index, out, **TRAIN_KW | {"max_steps": 1})
    cfg = PipelineConfig(index=out, defenses={"chain": ["ragdefender"]})
    with caplog.at_level(logging.WARNING, logger=cn.__name__):
        rag = build_pipeline(cfg, generator=object())
    (rd,) = [f for f in rag.chain.filters if isinstance(f, RAGDefender)]
    assert rd._novelty is not None and set(rd._novelty) == {f"p{i}" for i in range(len(TEXTS))}
    assert not [r for r in caplog.records if "no novelty table" in r.getMessage()]
    profile = FaissStore.load(out).profile
    assert rd._neighbourhood == profile["neighbourhood_similarity"]  # calibrated from it
