"""time_core: a pass is timed where it is computed; a cached pass is loaded, untimed (a warm re-run takes
seconds); --time-cores recomputes and times every pass."""
from types import SimpleNamespace

from bertattn_bench.engine.batching import Skipped
from bertattn_bench.engine.model import ModelInfo
from bertattn_bench.engine.passes import PassResult
from bertattn_bench.faces import pytest_session as P
from bertattn_bench.runner.cache import PassCache


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
        self.timing_claims = {}

    def prepare(self, target):
        return self.prepared

    def cached(self, target, compute, prepared, force=False):
        path = self.cache.directory / f"{target.family}-{target.corpus}.pkl"
        return self.cache.get_or_compute(path, compute, force=force)[0]


def test_cached_pass_is_loaded_untimed_and_time_cores_recomputes(tmp_path, monkeypatch):
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


def test_the_timing_row_carries_the_claims_as_their_tests_judge_them(tmp_path):
    """time_core evaluates no claim itself: its row's ``claims`` is the dict the claim tests fill (on_outcome), so
    each claim is evaluated once per session and the row shows the judged verdict."""
    target = P.Target("m", "c", "no-such-family")
    bench = _Bench(tmp_path)
    b = _Benchmark()
    P.time_core(b, bench, target)
    assert b.extra_info["claims"] == {}
    session = P.BenchSession.__new__(P.BenchSession)  # the hook alone, no pytest config
    session.timing_claims = bench.timing_claims
    session.current_item = SimpleNamespace(user_properties=[], callspec=SimpleNamespace(params={"target": target}))
    outcome = SimpleNamespace(claim_id="x.y", measured=0.5, n=10, holds=True, head=None, skipped=None,
                              negative_control=False, record=lambda: {"claim": "x.y"})
    P.BenchSession.on_outcome(session, outcome)
    assert b.extra_info["claims"] == {"x.y": {"measured": 0.5, "n": 10, "holds": True, "head": None, "skipped": None}}
