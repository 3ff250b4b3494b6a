"""Clark et al. 2019 §4.3: attention heads as antecedent selectors (coreference), one test per claim in reference_numbers."""
from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "coref"


def test_attention_core(benchmark, bench, target):
    """Times the batched attention core over the coreference windows (its result feeds every claim below)."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0
    assert result.result.count() > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
