"""Michel et al. 2019 §3-§4, §6: head importance, single heads and all-but-one masked, the pruning curve."""
from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "prune"


def test_attention_core(benchmark, bench, target):
    """Times the pass on the fine-tuned model(s) of the tier: importance on training examples, then one batched
    sweep (none + every head + the pruning curve + one head per layer; the full tier adds a second sweep); its
    result feeds every claim below."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
