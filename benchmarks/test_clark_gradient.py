"""Clark et al. 2019 §3.2, Fig. 3: gradient of the MLM loss w.r.t. attention, one test per claim in reference_numbers.

Needs a checkpoint with a trained masked-LM head; on a model without one (the embedded MiniLM) the core is not run
and every claim is skipped with the reason.
"""
from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "gradient"


def test_attention_core(benchmark, bench, target):
    """Times the batched forward + backward core over the corpus (its result feeds every claim below); skipped,
    untimed, on a model without an MLM head."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
