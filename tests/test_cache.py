"""The pass cache: computed once, shared by parallel workers under a file lock, atomic writes, key sensitivity."""
import multiprocessing as mp
import time
from pathlib import Path

from bertattn_bench.base.hashing import data_fingerprint
from bertattn_bench.runner.cache import PassCache, family_code_version


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
    with pytest.warns(C.CacheWarning, match="recomputing"):
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

from bertattn_bench.base import hashing as H
from bertattn_bench.runner import cache as C


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
    index = H.DigestIndex(tmp_path / "cache" / H.INDEX_NAME)
    before = H.model_fingerprint(_info(folder), index)
    assert H.model_fingerprint(_info(folder), index) == before  # unchanged: the same key
    _flip_middle_byte(folder / "model.safetensors")
    assert H.model_fingerprint(_info(folder), index) != before
    # a fresh index (a new run) agrees with the updated one
    assert H.model_fingerprint(_info(folder), H.DigestIndex(tmp_path / "other" / H.INDEX_NAME)) == \
        H.model_fingerprint(_info(folder), index)


def test_tsv_row_change_misses(tmp_path):
    """Every file of a data folder counts, whatever its extension (GLUE .tsv, FrameNet .xml, ARCT ...)."""
    glue = tmp_path / "glue" / "SST-2"
    glue.mkdir(parents=True)
    (glue / "dev.tsv").write_text("sentence\tlabel\nit is good\t1\nit is bad\t0\n")
    (glue / "nested").mkdir()
    (glue / "nested" / "frames.xml").write_text("<frame/>")
    assert [f.relative_to(glue).as_posix() for f in H.data_files(glue)] == ["dev.tsv", "nested/frames.xml"]
    index = H.DigestIndex(tmp_path / "cache" / H.INDEX_NAME)
    before = H.data_fingerprint([glue], index)
    (glue / "dev.tsv").write_text("sentence\tlabel\nit is good\t1\nit is bad\t1\n")
    assert H.data_fingerprint([glue], index) != before
    after = H.data_fingerprint([glue], index)
    (glue / "nested" / "frames.xml").write_text("<frame>")
    assert H.data_fingerprint([glue], index) != after


def test_unchanged_files_are_not_reread(tmp_path, monkeypatch):
    """A hit reads no file: the digests come from the index file by (size, mtime, ctime, inode); a changed file
    is re-read, and only that one."""
    folder = _model_folder(tmp_path)
    index_path = tmp_path / "cache" / H.INDEX_NAME
    reads = []
    real = H.sha256_file
    monkeypatch.setattr(H, "sha256_file", lambda p: reads.append(Path(p).name) or real(p))
    first = H.model_fingerprint(_info(folder), H.DigestIndex(index_path))
    assert sorted(reads) == ["config.json", "model.safetensors"] and index_path.is_file()
    reads.clear()
    assert H.model_fingerprint(_info(folder), H.DigestIndex(index_path)) == first  # a new process: from the file
    assert reads == []
    _flip_middle_byte(folder / "model.safetensors")
    assert H.model_fingerprint(_info(folder), H.DigestIndex(index_path)) != first
    assert reads == ["model.safetensors"]


def test_file_digest_is_the_full_sha256(tmp_path):
    import hashlib

    f = tmp_path / "w.bin"
    f.write_bytes(os.urandom((2 << 20) + 17))
    assert H.file_digest(f) == hashlib.sha256(f.read_bytes()).hexdigest()


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
    assert H.hub_snapshot_commit("org/tiny", cache_dir=hub) == "a" * 40
    assert H.hub_snapshot_commit("org/absent", cache_dir=hub) is None
    commits = iter(["a" * 40, "a" * 40, "b" * 40])
    monkeypatch.setattr(H, "hub_snapshot_commit", lambda name: next(commits))
    first = H.model_fingerprint(_info("org/tiny"))
    assert H.model_fingerprint(_info("org/tiny")) == first
    assert H.model_fingerprint(_info("org/tiny")) != first
    monkeypatch.setattr(H, "hub_snapshot_commit", lambda name: None)
    assert H.model_fingerprint(_info("org/absent")) != H.model_fingerprint(_info("org/absent"))


def test_code_version_per_family():
    """Each family is keyed by the modules its prepare function imports (transitively), not the whole package."""
    probes = H.module_closure("bertattn_bench.families.probes.run")  # the family's pass and prepare (a package)
    for core in ("engine.attention", "engine.batching", "engine.passes", "engine.model", "families.probes.structural",
                 "families.probes.reduce", "data.ud"):
        assert f"bertattn_bench.{core}" in probes
    for other in ("families.coref", "families.clustering", "families.gradient", "faces.pytest_plugin",
                  "report.claims_report", "runner.cache", "families.probes.metrics", "families.probes"):
        # its metrics and the package's re-exports: not keyed
        assert f"bertattn_bench.{other}" not in probes
    assert C.family_code_version("probes") != C.family_code_version("coref")
    assert C.family_code_version("probes") == H.module_version("bertattn_bench.families.probes.run")
    from bertattn_bench.claims.registry import families

    for fam, name in (("probes", "probes"), ("patterns", "patterns"), ("prune", "prune"), ("arct", "arct")):
        # families as packages: the key follows the pass; their claims and figures modules are never keyed
        closure = H.module_closure(families()[fam].prepare.__module__)
        assert f"bertattn_bench.families.{name}.run" in closure
        assert not {f"bertattn_bench.families.{name}", f"bertattn_bench.families.{name}.claims",
                    f"bertattn_bench.families.{name}.figures"} & set(closure), name
    with pytest.raises(ValueError, match="not an importable"):
        H.module_closure("bertattn_bench.no_such_module")


def test_module_version_follows_imported_source(tmp_path, monkeypatch):
    """Editing a module that a family imports (here: attention.py, seen through a patched file lookup) changes
    the family's version; editing one it does not import leaves it."""
    real = H._module_file
    edited = tmp_path / "attention.py"
    edited.write_text(real("bertattn_bench.engine.attention").read_text() + "\n_EDITED = 1\n")
    before_probes, before_coref = H.module_version("bertattn_bench.families.probes"), H.module_version("bertattn_bench.families.coref")
    unrelated = tmp_path / "clustering.py"
    unrelated.write_text(real("bertattn_bench.families.clustering").read_text() + "\n_EDITED = 1\n")
    swap = {"bertattn_bench.engine.attention": edited, "bertattn_bench.families.clustering": unrelated}
    monkeypatch.setattr(H, "_module_file", lambda name: swap.get(name) or real(name))
    H.module_closure.cache_clear()
    try:
        assert H.module_version("bertattn_bench.families.probes") != before_probes
        assert H.module_version("bertattn_bench.families.coref") != before_coref  # coref uses attention too
        monkeypatch.setattr(H, "_module_file", lambda name: {"bertattn_bench.families.clustering": unrelated}.get(name) or real(name))
        H.module_closure.cache_clear()
        assert H.module_version("bertattn_bench.families.probes") == before_probes
    finally:
        H.module_closure.cache_clear()


def _record_worker(directory: str, claim: str, go: str):
    import time as _t

    from bertattn_bench.claims import baselines as B

    real = B._write_atomic

    def slow_write(path, doc):  # widen the read-merge-write window: without the lock one value is lost
        _t.sleep(0.6)
        real(path, doc)

    B._write_atomic = slow_write
    while not Path(go).exists():
        _t.sleep(0.01)
    session = _fake_session(claim)
    B.record_baselines(session.outcomes, session.passes, Path(directory), date=f"2026-01-01T00:00:0{claim[-1]}+00:00")


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


def test_code_version_ignores_metrics_figures_docstrings_and_comments(tmp_path, monkeypatch):
    """A pass's cached result and a checkpoint stay valid when a claim's @metric, a @figure writer, a docstring or a
    comment is edited (they read a finished result or change no computation); editing a reducer's code invalidates. (A family in one module holding its reducer, metrics and figure:
    roles; coref and clustering became packages, issue 62.)"""
    import ast

    real = H._module_file
    src = real("bertattn_bench.families.roles").read_text()
    tree = ast.parse(src)
    before = H.module_version("bertattn_bench.families.roles")

    def version_with(text):
        edited = tmp_path / f"roles{len(list(tmp_path.iterdir()))}.py"
        edited.write_text(text)
        monkeypatch.setattr(H, "_module_file", lambda name: edited if name == "bertattn_bench.families.roles" else real(name))
        H.module_closure.cache_clear()
        try:
            return H.module_version("bertattn_bench.families.roles")
        finally:
            monkeypatch.setattr(H, "_module_file", real)
            H.module_closure.cache_clear()

    def insert_in(fn: ast.FunctionDef) -> str:
        """The source with a statement added to function ``fn``'s body (after its first statement)."""
        first = fn.body[0]
        lines = src.splitlines(keepends=True)
        lines.insert(first.end_lineno, " " * first.col_offset + "_edited = 1\n")
        return "".join(lines)

    def decorated(name):
        return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and any(
            isinstance(d, ast.Call) and getattr(d.func, "id", None) == name for d in n.decorator_list))

    assert version_with(insert_in(decorated("metric"))) == before
    assert version_with(insert_in(decorated("figure"))) == before
    assert version_with(src.replace('"""', '"""Edited. ', 1)) == before  # the module docstring
    assert version_with(src + "\n# a comment\n") == before
    reducer = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Reducer"))
    method = next(n for n in reducer.body if isinstance(n, ast.FunctionDef) and n.name == "update")
    assert version_with(insert_in(method)) != before


def test_checkpoint_code_version_leaves_out_metrics(tmp_path, monkeypatch):
    """A fine-tuned checkpoint's code version follows the trainer and what it imports (attention core, batching,
    the GLUE reader) but not the key-naming cache module, nor through it the registry and every metric: editing a
    metric or a report must not retrain every checkpoint; editing the attention core must."""
    from bertattn_bench.training import arct_finetune as arct_ft
    from bertattn_bench.training import glue_finetune as finetune

    for module in ("bertattn_bench.training.glue_finetune", "bertattn_bench.training.arct_finetune"):
        closure = H.module_closure(module, exclude=H.KEY_ONLY_MODULES)
        for core in ("engine.attention", "engine.batching", "data.glue"):
            assert f"bertattn_bench.{core}" in closure
        for other in ("runner.cache", "base.hashing", "claims.registry", "engine.passes", "families.surface",
                      "families.finetune", "training.glue_pass", "report.claims_report"):
            assert f"bertattn_bench.{other}" not in closure
    real = H._module_file
    before = finetune.code_version(), arct_ft.code_version()
    metric = tmp_path / "surface.py"
    metric.write_text(real("bertattn_bench.families.surface").read_text() + "\n_EDITED = 1\n")
    monkeypatch.setattr(H, "_module_file", lambda name: metric if name == "bertattn_bench.families.surface" else real(name))
    H.module_closure.cache_clear()
    try:
        assert (finetune.code_version(), arct_ft.code_version()) == before
        # the statistics layer is read by the GLUE reader's scoring, not by training: a GLUE checkpoint stays valid
        scoring = tmp_path / "stats.py"
        scoring.write_text(real("bertattn_bench.claims.stats").read_text() + "\n_EDITED = 1\n")
        monkeypatch.setattr(H, "_module_file", lambda name: scoring if name == "bertattn_bench.claims.stats" else real(name))
        H.module_closure.cache_clear()
        assert finetune.code_version() == before[0]
        core = tmp_path / "attention.py"
        core.write_text(real("bertattn_bench.engine.attention").read_text() + "\n_EDITED = 1\n")
        monkeypatch.setattr(H, "_module_file", lambda name: core if name == "bertattn_bench.engine.attention" else real(name))
        H.module_closure.cache_clear()
        after = finetune.code_version(), arct_ft.code_version()
        assert after[0] != before[0] and after[1] != before[1]
    finally:
        H.module_closure.cache_clear()


# ---- storage as data: nothing in a cache entry can run code (issue 28) ------------------------------------------

import json
import pickle
from collections import Counter, OrderedDict, defaultdict

import numpy as np
import torch

_PLANTED = {"path": None}


class _Payload:
    """Unpickling this writes a marker file: what a planted pickle would do instead (runs code on load)."""

    def __reduce__(self):
        return (Path.write_text, (Path(_PLANTED["path"]), "pwned"))


def _surface_pass(tiny, tokenizer):
    """A real pass result: the surface reducer on the tiny model, wrapped as the plugin stores it."""
    from bertattn_bench.engine.attention import run_reducers
    from bertattn_bench.engine.batching import Encoded, Skipped, iter_batches
    from bertattn_bench.engine.passes import PassResult
    from bertattn_bench.families.surface import SurfaceReducer

    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    word = tokenizer.convert_tokens_to_ids("cat")
    ex = [Encoded(0, [cls, word, word, sep, word, sep], [0] * 6, [-1] * 6, 0),
          Encoded(1, [cls, word, sep, sep, word, word, sep], [0] * 7, [-1] * 7, 0)]
    red = SurfaceReducer(tiny.info.n_layers, tiny.info.n_heads, "cpu", len(tokenizer))
    (res,) = run_reducers(tiny.model, iter_batches(ex, tokenizer, "cpu", 2), [red])
    res.top_tokens = [("cat", 5), ("[SEP]", 3)]  # what prepare_surface's finish adds (an attribute, not a field)
    return PassResult("surface", "wikitext2", "two hand-made segments", tiny.info, res, 2,
                      Skipped(n=1, max_tokens=6, indices=[3]), seconds=0.25,
                      extra={"counts": Counter(a=2), "by_layer": defaultdict(list, {1: [0.5]}),
                             "order": OrderedDict(b=1), "heads": {(1, 2), (2, 1)}, "where": Path("x/y")})


def _same(a, b):
    """Deep equality that compares tensors and arrays by dtype, shape and value (NaN equal to NaN)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and bool(
            torch.equal(a.nan_to_num(-7.0), b.nan_to_num(-7.0)) if a.is_floating_point() else torch.equal(a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a) and (
            not isinstance(a, defaultdict) or a.default_factory is b.default_factory)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if hasattr(a, "__dict__"):
        return _same(vars(a), vars(b))
    return a == b


def test_a_real_pass_result_round_trips_as_data(tmp_path, tiny, tokenizer):
    result = _surface_pass(tiny, tokenizer)
    path = tmp_path / "r.npz"
    C.store_result(result, path)
    back = C.load_result(path)
    assert _same(result, back)
    assert back.result.top_tokens == [("cat", 5), ("[SEP]", 3)] and back.skipped.describe() == result.skipped.describe()
    assert back.extra["by_layer"][9] == []  # still a defaultdict(list)
    # the file is a zip of plain arrays: numpy refuses nothing, i.e. nothing in it is pickled
    with np.load(path, allow_pickle=False) as npz:
        assert all(npz[k].dtype != object for k in npz.files)


def test_odd_values_round_trip(tmp_path):
    value = {"nan": float("nan"), "inf": float("-inf"), "big": 2 ** 70, "bf16": torch.tensor([1.5, -2.25]).bfloat16(),
             "bool_t": torch.tensor([True, False]), "i8": np.arange(3, dtype=np.int8), "strs": np.array(["a", "bc"]),
             "scalar": np.float32(0.1), "int_keys": {1: "a", (2, 3): "b"}, "tag_lookalike": {"$t": "object"},
             "frozen": frozenset({1}), "empty": [], "none": None, "neg0": -0.0, "nested": [[(1,)]]}
    C.store_result(value, tmp_path / "v.npz")
    back = C.load_result(tmp_path / "v.npz")
    assert _same(value, back)
    assert type(back["scalar"]) is np.float32 and back["bf16"].dtype == torch.bfloat16


def test_a_planted_pickle_executes_nothing(tmp_path):
    """Whoever can write to the cache plants a pickle at the path of a pass (and at the old .pkl name): reading the
    pass computes it again with a warning, and the pickle's code never runs."""
    _PLANTED["path"] = str(tmp_path / "marker")
    cache = PassCache(tmp_path / "cache")
    path = cache.path("m", "surface", "wikitext2", "k")
    path.parent.mkdir(parents=True)
    evil = pickle.dumps({"result": _Payload()})
    pickle.loads(evil)  # the payload works: unpickling it writes the marker
    assert (tmp_path / "marker").read_text() == "pwned"
    (tmp_path / "marker").unlink()
    path.write_bytes(evil)
    path.with_suffix(".pkl").write_bytes(evil)
    with pytest.warns(C.CacheWarning, match="not a bertattn-bench pass result"):
        value, hit = cache.get_or_compute(path, lambda: {"fresh": 1})
    assert (value, hit) == ({"fresh": 1}, False)
    assert not (tmp_path / "marker").exists()
    assert C.load_result(path) == {"fresh": 1}  # replaced by data


def test_a_pickle_inside_the_npz_is_refused(tmp_path):
    """An .npz whose arrays are pickled objects (numpy's allow_pickle route) is refused, not unpickled."""
    _PLANTED["path"] = str(tmp_path / "marker")
    path = tmp_path / "e.npz"
    doc = json.dumps({"format": C.FORMAT_NAME, "version": C.FORMAT_VERSION,
                      "value": {"$t": "ndarray", "ref": "a0"}}).encode()
    with open(path, "wb") as f:
        np.savez(f, __doc__=np.frombuffer(doc, dtype=np.uint8), a0=np.array([_Payload()], dtype=object))
    with pytest.raises(C.CacheEntryError, match="not a bertattn-bench pass result"):
        C.load_result(path)
    assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize("cls", ["os:system", "subprocess:Popen", "bertattn_bench.runner.cache:os.system",
                                 "bertattn_bench.families.probes:torch.nn.Module", "bertattn_bench.nope:X",
                                 "bertattn_bench..x:Y"])
def test_a_class_outside_the_package_is_refused(tmp_path, cls):
    path = tmp_path / "f.npz"
    doc = json.dumps({"format": C.FORMAT_NAME, "version": C.FORMAT_VERSION,
                      "value": {"$t": "object", "cls": cls, "state": {}}}).encode()
    with open(path, "wb") as f:
        np.savez(f, __doc__=np.frombuffer(doc, dtype=np.uint8))
    with pytest.raises(C.CacheEntryError, match=r"f\.npz"):
        C.load_result(path)


def test_another_format_version_or_truncated_file_is_recomputed(tmp_path):
    cache = PassCache(tmp_path)
    path = cache.path("m", "f", "c", "k")
    path.parent.mkdir(parents=True)
    C.store_result({"a": 1}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.warns(C.CacheWarning, match="recomputing"):
        assert cache.get_or_compute(path, lambda: 2) == (2, False)
    old = json.dumps({"format": C.FORMAT_NAME, "version": C.FORMAT_VERSION + 1, "value": 3}).encode()
    with open(path, "wb") as f:
        np.savez(f, __doc__=np.frombuffer(old, dtype=np.uint8))
    with pytest.warns(C.CacheWarning, match="format version"):
        assert cache.get_or_compute(path, lambda: 4) == (4, False)
    assert cache.get_or_compute(path, lambda: 5) == (4, True)
    with open(path, "wb") as f:  # a plain .npy (one array, not a zip of them) under the entry's name
        np.save(f, np.arange(3))
    with pytest.warns(C.CacheWarning, match="not a bertattn-bench pass result"):
        assert cache.get_or_compute(path, lambda: 6) == (6, False)


def test_a_result_that_is_not_data_is_returned_uncached(tmp_path):
    cache = PassCache(tmp_path)
    path = cache.path("m", "f", "c", "k")
    with pytest.warns(C.CacheWarning, match="not cached"):
        value, hit = cache.get_or_compute(path, lambda: {"model": torch.nn.Linear(2, 2)})
    assert isinstance(value["model"], torch.nn.Linear) and not hit
    assert not path.exists() and not list(path.parent.glob(".*tmp*"))


# ---- the fine-tuning resume state: plain tensors, read with weights_only=True ------------------------------------

from tests.test_finetune import RECIPE, glue_dir  # noqa: E402,F401  (the fixture: a 48-row MRPC)


def _train_setup(tiny, glue_dir):
    from bertattn_bench.data import glue
    from bertattn_bench.training import glue_finetune as finetune

    t = glue.task("mrpc")
    data = finetune.encode_split(tiny.tokenizer, finetune.training_rows(glue_dir, "mrpc", RECIPE, 0), RECIPE.max_tokens)
    return finetune, t, data, finetune.task_model(tiny, t, 0)


def test_the_resume_state_is_plain_and_a_planted_pickle_runs_nothing(tiny, glue_dir, tmp_path):
    finetune, t, data, model = _train_setup(tiny, glue_dir)
    state = tmp_path / "partial-state.pt"
    finetune.train(model, t, data, tiny.tokenizer, RECIPE, 0, state, stop_after_epoch=1)
    # what train() wrote loads with the restricted (weights-only) unpickler, and a second train() resumes from it
    assert torch.load(state, weights_only=True)["epoch"] == 1
    log = finetune.train(finetune.task_model(tiny, t, 0), t, data, tiny.tokenizer, RECIPE, 0, state)
    assert log["resumed_from_epoch"] == 1

    _PLANTED["path"] = str(tmp_path / "marker")
    torch.save({"epoch": 1, "model": _Payload(), "optimizer": {}, "scheduler": {}, "log": {}}, state)
    with pytest.warns(UserWarning, match="not a plain-tensor state"):
        log = finetune.train(finetune.task_model(tiny, t, 0), t, data, tiny.tokenizer, RECIPE, 0, state,
                             stop_after_epoch=1)
    assert log["resumed_from_epoch"] == 0 and not (tmp_path / "marker").exists()


def test_a_resume_state_of_another_model_is_not_loaded(tiny, glue_dir, tmp_path):
    finetune, t, data, model = _train_setup(tiny, glue_dir)
    state = tmp_path / "partial-state.pt"
    sd = model.state_dict()
    wrong = {k: (v[:1] if v.dim() else v) for k, v in sd.items()}  # same names, other shapes
    torch.save({"epoch": 1, "model": wrong, "optimizer": {}, "scheduler": {}, "log": {}}, state)
    with pytest.warns(UserWarning, match="keys or shapes differ"):
        log = finetune.train(model, t, data, tiny.tokenizer, RECIPE, 0, state, stop_after_epoch=1)
    assert log["resumed_from_epoch"] == 0


def test_a_sparse_tensor_is_not_data_and_is_returned_uncached(tmp_path):
    cache = PassCache(tmp_path)
    path = cache.path("m", "f", "c", "k")
    sparse = torch.eye(3).to_sparse()
    with pytest.warns(C.CacheWarning, match="not cached"):
        value, hit = cache.get_or_compute(path, lambda: {"s": sparse})
    assert value["s"] is sparse and not hit and not path.exists()


def test_code_version_is_free_of_the_layout(tmp_path, monkeypatch):
    """Moving a module to another folder (its imports rewritten to the new place) keeps the code version, so a
    layout change retrains no checkpoint; importing a different name, or a module whose code differs, changes it."""
    here, moved, other = (tmp_path / n for n in ("here.py", "moved.py", "other.py"))
    here.write_text("from .attention import read\nfrom . import batching\n\ndef f(x):\n    return read(x)\n")
    moved.write_text("from ..engine.attention import read\nfrom ..engine import batching\n\n"
                     "def f(x):\n    return read(x)\n")
    other.write_text("from .attention import write\nfrom . import batching\n\ndef f(x):\n    return write(x)\n")
    assert H.computing_source(here) == H.computing_source(moved)
    assert H.computing_source(here) != H.computing_source(other)
    empty = tmp_path / "__init__.py"
    empty.write_text('"""A package of the new layout: a docstring only."""\n')
    lib = tmp_path / "lib.py"
    lib.write_text("X = 1\n")
    layouts = {("pkg.here", "pkg.lib"): {"pkg.here": here, "pkg.lib": lib},
               ("pkg.engine", "pkg.engine.moved", "pkg.engine.lib"): {"pkg.engine": empty, "pkg.engine.moved": moved,
                                                                     "pkg.engine.lib": lib},
               ("pkg.here", "pkg.lib2"): {"pkg.here": other, "pkg.lib2": lib}}
    versions = []
    for names, files in layouts.items():
        monkeypatch.setattr(H, "module_closure", lambda *a, exclude=(), names=names: names)
        monkeypatch.setattr(H, "_module_file", lambda name, files=files: files[name])
        versions.append(H.module_version("root"))
    assert versions[0] == versions[1]  # same code, another folder and module name, an empty package added
    assert versions[0] != versions[2]  # the code differs
