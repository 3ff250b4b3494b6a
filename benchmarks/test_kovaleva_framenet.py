"""Kovaleva et al. 2019 §4.2 (Fig. 3) and §5: heads linking frame-evoking targets to their core frame elements
(FrameNet 1.5), against a matched-distance random-pair control; their Δ when disabled in the disable family's sweep."""
from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "framenet"


def test_attention_core(benchmark, bench, target):
    """Times the batched attention core over the FrameNet sentences (its result feeds every claim below)."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
