"""The pass cache: computed once, shared by parallel workers under a file lock, atomic writes, key sensitivity."""
import multiprocessing as mp
import time
from pathlib import Path

from bertattn_bench.cache import PassCache, code_version, data_fingerprint


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
    assert len(code_version()) == 16
