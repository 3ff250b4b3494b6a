"""Kovaleva et al. 2019 §4.1, §4.4, §4.5: attention-map types, attention to special tokens and linguistic features,
token-to-token attention and the final layer's [CLS] row, on GLUE dev sets and UD EWT."""
from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "patterns"


def test_attention_core(benchmark, bench, target):
    """Times the pass (the pre-trained model, and the fine-tuned checkpoint where the tier has one, over the task's
    dev examples and the UD sentences); its result feeds every claim below."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
