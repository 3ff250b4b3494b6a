"""Michel et al. 2019 §4.3, Table 4: half the heads removed from the weights, inference timed at batch 1/16/64."""
from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "speedup"


def test_attention_core(benchmark, bench, target):
    """Times the pass (importance, head removal, the pruned = masked check, interleaved timings); its result feeds
    the claim below."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
