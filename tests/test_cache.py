"""The pass cache: computed once, shared by parallel workers under a file lock, atomic writes, key sensitivity."""
import multiprocessing as mp
import time
from pathlib import Path

from bertattn_bench.cache import PassCache, data_fingerprint, family_code_version


def _slow_compute(counter: str):
    with open(counter, "a") as f:
        f.write("x")
    time.sleep(0.5)
    return {"value": 42}


def _worker(directory: str, counter: str, out: str):
    cache = PassCache(Path(directory))
    result, hit = cache.get_or_compute(cache.path("m", "fam", "c", "k"), lambda: _slow_compute(counter))
    Path(out).write_text(f"{result['value']},{hit}")


def test_computed_once_then_loaded(tmp_path):
    cache = PassCache(tmp_path)
    path = cache.path("model", "surface", "wikitext2", "abc")
    calls = []
    first, hit1 = cache.get_or_compute(path, lambda: calls.append(1) or {"a": 1})
    second, hit2 = cache.get_or_compute(path, lambda: calls.append(1) or {"a": 2})
    assert (first, hit1, second, hit2) == ({"a": 1}, False, {"a": 1}, True)
    assert len(calls) == 1
    forced, hit3 = cache.get_or_compute(path, lambda: {"a": 3}, force=True)
    assert (forced, hit3) == ({"a": 3}, False)


def test_two_processes_compute_once(tmp_path):
    """Two workers asking for the same pass at once: one computes, the other waits and loads (filelock)."""
    counter = tmp_path / "calls"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(str(tmp_path / "cache"), str(counter), str(tmp_path / f"out{i}")))
             for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert counter.read_text() == "x"
    outs = sorted((tmp_path / f"out{i}").read_text() for i in range(2))
    assert outs == ["42,False", "42,True"]


def test_interrupted_write_leaves_no_result(tmp_path):
    cache = PassCache(tmp_path)
    path = cache.path("m", "f", "c", "k")

    def boom():
        raise KeyboardInterrupt

    try:
        cache.get_or_compute(path, boom)
    except KeyboardInterrupt:
        pass
    assert not path.exists()
    value, hit = cache.get_or_compute(path, lambda: 7)
    assert (value, hit) == (7, False)


def test_corrupt_file_is_recomputed(tmp_path):
    cache = PassCache(tmp_path)
    path = cache.path("m", "f", "c", "k")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a pickle")
    assert cache.get_or_compute(path, lambda: 5) == (5, False)


def test_disabled_cache_always_computes(tmp_path):
    cache = PassCache(None)
    assert cache.get_or_compute(None, lambda: 1) == (1, False)


def test_fingerprints_change_with_content(tmp_path):
    f = tmp_path / "a.conllu"
    f.write_text("1\tx\n")
    before = data_fingerprint([f])
    f.write_text("1\ty\n")
    assert data_fingerprint([f]) != before
    assert len(family_code_version("dependency")) == 16


# ---- the key cannot go stale (issue 9) -------------------------------------------------------------------------

import dataclasses
import os
from types import SimpleNamespace

import pytest

from bertattn_bench import cache as C


def _model_folder(tmp_path, size=3 << 20):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "model.safetensors").write_bytes(os.urandom(size))
    return folder


def _info(source):
    return SimpleNamespace(name="m", random_init_seed=None, attn_implementation="eager", device="cpu",
                           source=str(source))


def _flip_middle_byte(path):
    """One byte in the middle, same size, mtime put back: only the content (and ctime) changes."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_weights_changed_in_the_middle_miss(tmp_path):
    """A > 2 MiB weights file changed in one middle byte (a pruned or fine-tuned checkpoint) changes the key; the
    old first-and-last-MiB fingerprint did not see it."""
    folder = _model_folder(tmp_path)
    index = C.DigestIndex(tmp_path / "cache" / C.INDEX_NAME)
    before = C.model_fingerprint(_info(folder), index)
    assert C.model_fingerprint(_info(folder), index) == before  # unchanged: the same key
    _flip_middle_byte(folder / "model.safetensors")
    assert C.model_fingerprint(_info(folder), index) != before
    # a fresh index (a new run) agrees with the updated one
    assert C.model_fingerprint(_info(folder), C.DigestIndex(tmp_path / "other" / C.INDEX_NAME)) == \
        C.model_fingerprint(_info(folder), index)


def test_tsv_row_change_misses(tmp_path):
    """Every file of a data folder counts, whatever its extension (GLUE .tsv, FrameNet .xml, ARCT ...)."""
    glue = tmp_path / "glue" / "SST-2"
    glue.mkdir(parents=True)
    (glue / "dev.tsv").write_text("sentence\tlabel\nit is good\t1\nit is bad\t0\n")
    (glue / "nested").mkdir()
    (glue / "nested" / "frames.xml").write_text("<frame/>")
    assert [f.relative_to(glue).as_posix() for f in C.data_files(glue)] == ["dev.tsv", "nested/frames.xml"]
    index = C.DigestIndex(tmp_path / "cache" / C.INDEX_NAME)
    before = C.data_fingerprint([glue], index)
    (glue / "dev.tsv").write_text("sentence\tlabel\nit is good\t1\nit is bad\t1\n")
    assert C.data_fingerprint([glue], index) != before
    after = C.data_fingerprint([glue], index)
    (glue / "nested" / "frames.xml").write_text("<frame>")
    assert C.data_fingerprint([glue], index) != after


def test_unchanged_files_are_not_reread(tmp_path, monkeypatch):
    """A hit reads no file: the digests come from the index file by (size, mtime, ctime, inode); a changed file
    is re-read, and only that one."""
    folder = _model_folder(tmp_path)
    index_path = tmp_path / "cache" / C.INDEX_NAME
    reads = []
    real = C.sha256_file
    monkeypatch.setattr(C, "sha256_file", lambda p: reads.append(Path(p).name) or real(p))
    first = C.model_fingerprint(_info(folder), C.DigestIndex(index_path))
    assert sorted(reads) == ["config.json", "model.safetensors"] and index_path.is_file()
    reads.clear()
    assert C.model_fingerprint(_info(folder), C.DigestIndex(index_path)) == first  # a new process: from the file
    assert reads == []
    _flip_middle_byte(folder / "model.safetensors")
    assert C.model_fingerprint(_info(folder), C.DigestIndex(index_path)) != first
    assert reads == ["model.safetensors"]


def test_file_digest_is_the_full_sha256(tmp_path):
    import hashlib

    f = tmp_path / "w.bin"
    f.write_bytes(os.urandom((2 << 20) + 17))
    assert C.file_digest(f) == hashlib.sha256(f.read_bytes()).hexdigest()


@dataclasses.dataclass
class _Settings:
    seed: int = 0
    lr: float = 0.1


@dataclasses.dataclass
class _Prepared:
    family: str
    corpus: str
    data: str
    loaded: object
    batch_size: int = 32
    settings: _Settings = dataclasses.field(default_factory=_Settings)
    data_paths: list = dataclasses.field(default_factory=list)


def test_options_in_the_key(tmp_path, monkeypatch):
    """Batch size, a pass's settings (e.g. a training seed) and, for a family that trains, the thread count each
    change the key; a model object in the pass is not an option (never serialised)."""
    folder = _model_folder(tmp_path, size=1000)
    data = tmp_path / "d.conllu"
    data.write_text("1\tx\n")
    cache = C.PassCache(tmp_path / "cache")
    loaded = SimpleNamespace(model=object())

    def key(**kw):
        return cache.key("dependency", "ewt_dev", _info(folder),
                         _Prepared("dependency", "ewt_dev", "d", loaded, data_paths=[data], **kw), {"limit": None})

    base = key()
    assert key() == base
    assert key(batch_size=16) != base
    assert key(settings=_Settings(seed=1)) != base
    assert C.pass_options(_Prepared("f", "c", "d", loaded))["settings"] == {"seed": 0, "lr": 0.1}
    assert "loaded" not in C.pass_options(_Prepared("f", "c", "d", loaded))
    import torch

    monkeypatch.setattr(torch, "get_num_threads", lambda: 7)
    assert key() == base  # a forward-only family: the thread count is not in its key

    def probes_key():
        return cache.key("probes", "ewt_dev", _info(folder), _Prepared("probes", "ewt_dev", "d", loaded,
                                                                       data_paths=[data]), {"limit": None})

    seven = probes_key()
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert probes_key() != seven  # a family that trains: it is
    assert C.threads_matter("finetune") and C.threads_matter("probes") and not C.threads_matter("surface")


def test_hub_models_keyed_by_snapshot_commit(tmp_path, monkeypatch):
    """A hub name's key is its local snapshot's commit (offline); another commit, another key; an unresolvable
    model is never a hit."""
    hub = tmp_path / "hub"
    repo = hub / "models--org--tiny"
    for commit in ("a" * 40, "b" * 40):
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    assert C.hub_snapshot_commit("org/tiny", cache_dir=hub) == "a" * 40
    assert C.hub_snapshot_commit("org/absent", cache_dir=hub) is None
    commits = iter(["a" * 40, "a" * 40, "b" * 40])
    monkeypatch.setattr(C, "hub_snapshot_commit", lambda name: next(commits))
    first = C.model_fingerprint(_info("org/tiny"))
    assert C.model_fingerprint(_info("org/tiny")) == first
    assert C.model_fingerprint(_info("org/tiny")) != first
    monkeypatch.setattr(C, "hub_snapshot_commit", lambda name: None)
    assert C.model_fingerprint(_info("org/absent")) != C.model_fingerprint(_info("org/absent"))


def test_code_version_per_family():
    """Each family is keyed by the modules its prepare function imports (transitively), not the whole package."""
    probes = C.module_closure("bertattn_bench.metrics.probes")
    for core in ("attention", "batching", "passes", "model", "metrics.structural_probe", "data.ud"):
        assert f"bertattn_bench.{core}" in probes
    for other in ("metrics.coref", "metrics.clustering", "metrics.gradient", "pytest_plugin", "report", "cache"):
        assert f"bertattn_bench.{other}" not in probes
    assert C.family_code_version("probes") != C.family_code_version("coref")
    assert C.family_code_version("probes") == C.module_version("bertattn_bench.metrics.probes")
    with pytest.raises(ValueError, match="not an importable"):
        C.module_closure("bertattn_bench.no_such_module")


def test_module_version_follows_imported_source(tmp_path, monkeypatch):
    """Editing a module that a family imports (here: attention.py, seen through a patched file lookup) changes
    the family's version; editing one it does not import leaves it."""
    real = C._module_file
    edited = tmp_path / "attention.py"
    edited.write_text(real("bertattn_bench.attention").read_text() + "\n# edited\n")
    before_probes, before_coref = C.module_version("bertattn_bench.metrics.probes"), C.module_version("bertattn_bench.metrics.coref")
    unrelated = tmp_path / "clustering.py"
    unrelated.write_text(real("bertattn_bench.metrics.clustering").read_text() + "\n# edited\n")
    swap = {"bertattn_bench.attention": edited, "bertattn_bench.metrics.clustering": unrelated}
    monkeypatch.setattr(C, "_module_file", lambda name: swap.get(name) or real(name))
    C.module_closure.cache_clear()
    try:
        assert C.module_version("bertattn_bench.metrics.probes") != before_probes
        assert C.module_version("bertattn_bench.metrics.coref") != before_coref  # coref uses attention too
        monkeypatch.setattr(C, "_module_file", lambda name: {"bertattn_bench.metrics.clustering": unrelated}.get(name) or real(name))
        C.module_closure.cache_clear()
        assert C.module_version("bertattn_bench.metrics.probes") == before_probes
    finally:
        C.module_closure.cache_clear()


def _record_worker(directory: str, claim: str, go: str):
    import time as _t

    from bertattn_bench import baselines as B

    real = B._write_atomic

    def slow_write(path, doc):  # widen the read-merge-write window: without the lock one value is lost
        _t.sleep(0.6)
        real(path, doc)

    B._write_atomic = slow_write
    while not Path(go).exists():
        _t.sleep(0.01)
    session = _fake_session(claim)
    B.record_baselines(session, Path(directory), date=f"2026-01-01T00:00:0{claim[-1]}+00:00")


def _fake_session(claim: str):
    outcome = SimpleNamespace(skipped=None, model_slug="m", claim_id=claim, corpus="c", measured=1.0, n=3,
                              n_unit="arcs", holds=True, head=None, detail="", negative_control=False)
    p = {"slug": "m", "model": "m", "source": "/x", "attn_implementation": "eager", "device": "cpu",
         "family": "fam", "corpus": "c", "data_files": "d"}
    config = SimpleNamespace(invocation_params=SimpleNamespace(args=[claim]), getoption=lambda name: None)
    return SimpleNamespace(outcomes=[outcome], passes=[p], config=config)


def test_two_processes_record_different_claims_both_kept(tmp_path):
    """xdist-style: two processes record different claims into the same baseline file at once; the locked
    read-merge-write keeps both."""
    import json

    go = tmp_path / "go"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_record_worker, args=(str(tmp_path / "b"), f"c.claim{i}", str(go))) for i in (1, 2)]
    for p in procs:
        p.start()
    time.sleep(1.5)  # both processes imported and waiting
    go.touch()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    doc = json.loads((tmp_path / "b" / "m.json").read_text())
    assert sorted(doc["results"]) == ["c.claim1@c", "c.claim2@c"]


def test_checkpoint_code_version_leaves_out_metrics(tmp_path, monkeypatch):
    """A fine-tuned checkpoint's code version follows the trainer and what it imports (attention core, batching,
    the GLUE reader) but not the key-naming cache module, nor through it the registry and every metric: editing a
    metric or a report must not retrain every checkpoint; editing the attention core must."""
    from bertattn_bench import arct_ft, finetune

    for module in ("bertattn_bench.finetune", "bertattn_bench.arct_ft"):
        closure = C.module_closure(module, exclude=C.KEY_ONLY_MODULES)
        for core in ("attention", "batching", "data.glue"):
            assert f"bertattn_bench.{core}" in closure
        for other in ("cache", "registry", "passes", "metrics.surface", "metrics.finetuned", "report"):
            assert f"bertattn_bench.{other}" not in closure
    real = C._module_file
    before = finetune._sources_version(), arct_ft._sources_version()
    metric = tmp_path / "surface.py"
    metric.write_text(real("bertattn_bench.metrics.surface").read_text() + "\n# edited\n")
    monkeypatch.setattr(C, "_module_file", lambda name: metric if name == "bertattn_bench.metrics.surface" else real(name))
    C.module_closure.cache_clear()
    try:
        assert (finetune._sources_version(), arct_ft._sources_version()) == before
        core = tmp_path / "attention.py"
        core.write_text(real("bertattn_bench.attention").read_text() + "\n# edited\n")
        monkeypatch.setattr(C, "_module_file", lambda name: core if name == "bertattn_bench.attention" else real(name))
        C.module_closure.cache_clear()
        after = finetune._sources_version(), arct_ft._sources_version()
        assert after[0] != before[0] and after[1] != before[1]
    finally:
        C.module_closure.cache_clear()
