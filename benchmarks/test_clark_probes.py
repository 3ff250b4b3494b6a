"""Clark et al. 2019 §5, Table 3: attention-based probing classifiers, one test per claim in reference_numbers."""
from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "probes"


def test_attention_core(benchmark, bench, target):
    """Times the probes' pass (word maps of the train and eval sentences for the model and its random-init twin, and
    the probes' training); its result feeds every claim below."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
