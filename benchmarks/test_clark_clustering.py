"""Clark et al. 2019 §6: clustering attention heads by Jensen-Shannon distance, one test per claim in reference_numbers."""
from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "clustering"


def test_attention_core(benchmark, bench, target):
    """Times the batched attention core (forward passes + JS matrix) over the corpus; its result feeds the claims."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0
    assert result.result.n_tokens > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
