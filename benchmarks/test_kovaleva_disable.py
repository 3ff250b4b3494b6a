"""Kovaleva et al. 2019 §4.6, Figs. 8-9: single heads and whole layers disabled (uniform attention) at test time."""
from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "disable"


def test_attention_core(benchmark, bench, target):
    """Times the batched sweep (none + every head + every layer, each batch row its own configuration) on the
    fine-tuned model(s) of the tier; its result feeds every claim below."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
