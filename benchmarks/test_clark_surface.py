"""Clark et al. 2019 §3: surface-level attention patterns, one test per claim in reference_numbers."""
from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "surface"


def test_attention_core(benchmark, bench, target):
    """Times the batched attention core over the corpus (its result feeds every claim below)."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
