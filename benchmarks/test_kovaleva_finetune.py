"""Kovaleva et al. 2019 §4.3 and Table 1: fine-tuned / un-tuned / random-init models on GLUE, attention change."""
from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "finetune"


def test_attention_core(benchmark, bench, target):
    """Times the pass: fine-tuning (or loading the cached checkpoints), dev evaluation, the random-init twin and the
    pre-trained vs fine-tuned attention cosines; its result feeds every claim below."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
