"""Niven & Kao 2019 on ARCT, the model-free half: cue statistics, the adversarial set's construction and the
authors' shipped per-seed runs, one test per claim in reference_numbers/niven2019_arct.toml.

The pass reads the ARCT files only (the model under test is not used); the claims that need a fine-tuned model
are not here yet.
"""
from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "arct"


def test_attention_core(benchmark, bench, target):
    """Times the model-free pass (loading every ARCT file, cue tables for 4 tokenisations x 9 splits); its result
    feeds every claim below."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
