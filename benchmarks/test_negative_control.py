"""Negative control: the randomly initialised twin of the model under test (same config, no trained weights).

Every claim about learned structure (``learned = true`` in reference_numbers) must NOT hold on it; a claim that
held on random weights would be measuring the data or the method, not what the model learned. One test per family
with learned claims: the runner's plan gives its row (the first model's twin, the family's first corpus).
"""
from bertattn_bench.faces.pytest_session import check_negative_control
from bertattn_bench.runner.plan import EVERY_FAMILY

FAMILY = EVERY_FAMILY


def test_learned_claims_fail_on_random_init(bench, control):
    check_negative_control(bench, control)
