"""Niven & Kao 2019 on ARCT, the fine-tuned half (family ``arct_ft``): the paper's two-warrant model fine-tuned
from the model under test over seeds, per setting (full input, W, R+W, C+W, the adversarial protocol), one test per
claim in reference_numbers/niven2019_arct_ft.toml. The regression tier trains one short seed (full input, seed 0, one
epoch: a smoke run of the training path, judged and recorded; the claims about other settings skip); ``--tier full``
trains 5 seeds of 5 epochs per setting (and 2 on the random-init twin for the negative control).
"""
import pytest

from bertattn_bench.pytest_plugin import check_claim, time_core

FAMILY = "arct_ft"
pytestmark = pytest.mark.arct_ft  # so that `-k arct_ft` selects this module (its name says arct_models)


def test_attention_core(benchmark, bench, target):
    """Times the pass: fine-tuning every seed of the setting (or loading the cached runs) and scoring train, dev and
    test; its result feeds every claim below."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
