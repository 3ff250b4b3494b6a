"""time_core: a pass is timed where it is computed; a cached pass is loaded, untimed (a warm re-run takes
seconds); --time-cores recomputes and times every pass."""
from types import SimpleNamespace

from bertattn_bench import pytest_bench as P
from bertattn_bench.batching import Skipped
from bertattn_bench.model import ModelInfo
from bertattn_bench.passes import PassResult
from bertattn_bench.cache import PassCache


class _Benchmark:
    disabled = False

    def __init__(self):
        self.calls, self.extra_info, self.group = 0, {}, None

    def pedantic(self, fn, args=(), **kw):
        self.calls += 1
        return fn(*args)


class _Prepared:
    def __init__(self):
        self.runs = self.artifact_calls = 0

    def nothing_to_measure(self):
        return None

    def artifacts(self, progress=False):
        self.artifact_calls += 1

    def run(self, progress=False):  # a real PassResult: the cache stores data and the package's classes only
        self.runs += 1
        model = ModelInfo(name="m", slug="m", n_layers=1, n_heads=1, max_positions=8, has_mlm_head=False,
                          attn_implementation="x", device="cpu", cls_token_id=1, sep_token_id=2, pad_token_id=0)
        return PassResult("no-such-family", "c", "d", model, self.runs, 3, Skipped(), seconds=1.0)


class _Bench:
    """The part of BenchSession time_core uses, over a real PassCache keyed by the target only."""

    def __init__(self, cache_dir, time_cores=False):
        self.cache, self.prepared = PassCache(cache_dir), _Prepared()
        self.config = SimpleNamespace(getoption=lambda name: None,
                                      pluginmanager=SimpleNamespace(getplugin=lambda name: None))
        self.options = SimpleNamespace(time_cores=time_cores)  # the run's options (RunOptions.time_cores)

    def prepare(self, target):
        return self.prepared

    def cached(self, target, compute, prepared, force=False):
        path = self.cache.directory / f"{target.family}-{target.corpus}.pkl"
        return self.cache.get_or_compute(path, compute, force=force)[0]


def test_cached_pass_is_loaded_untimed_and_time_cores_recomputes(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "load_claims", lambda family: [])
    target = P.Target("m", "c", "no-such-family")
    cold = _Bench(tmp_path)
    b = _Benchmark()
    assert P.time_core(b, cold, target).result == 1 and b.calls == 1 and cold.prepared.runs == 1  # miss: timed
    assert cold.prepared.artifact_calls == 1  # its artifacts made first
    warm = _Bench(tmp_path)
    b = _Benchmark()
    assert P.time_core(b, warm, target).result == 1  # the cached pass
    assert b.calls == 0 and warm.prepared.runs == 0  # neither run nor timed
    assert warm.prepared.artifact_calls == 0  # and no fine-tune is made or loaded for it
    forced = _Bench(tmp_path, time_cores=True)
    b = _Benchmark()
    assert P.time_core(b, forced, target).result == 1 and b.calls == 1 and forced.prepared.runs == 1
