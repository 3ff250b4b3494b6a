"""Negative control: the randomly initialised twin of the model under test (same config, no trained weights).

Every claim about learned structure (``learned = true`` in reference_numbers) must NOT hold on it; a claim that
held on random weights would be measuring the data or the method, not what the model learned.
"""
import pytest

from bertattn_bench.claims.catalog import load_claims
from bertattn_bench.engine.model import RANDOM_PREFIX
from bertattn_bench.engine.passes import NothingToMeasure
from bertattn_bench.faces.pytest_session import Target, requested_corpora, requested_models
from bertattn_bench.claims.registry import families


@pytest.mark.parametrize("family", sorted(families()))
def test_learned_claims_fail_on_random_init(bench, request, family):
    base = requested_models(request.config)[0]
    name = base if base.startswith(RANDOM_PREFIX) else f"{RANDOM_PREFIX}{base}"
    target = Target(name, requested_corpora(request.config, family)[0], family)
    claims = load_claims(family=family)
    if not any(c.learned for c in claims):
        pytest.skip(f"{family}: no learned-structure claims (a model-free family)")
    pr = bench.result(target)
    if isinstance(pr.result, NothingToMeasure):
        pytest.skip(f"{family} on {name}: {pr.result.reason}")
    outcomes = []
    for claim in claims:
        if not claim.learned:
            continue
        out = bench.outcome(claim, target, negative_control=True)
        outcomes.append(out)
    judged = [o for o in outcomes if not o.skipped]
    # the row's flag (the table prints it): only a claim that clearly holds fails; an inconclusive row passes
    held = [f"{o.claim_id}: {o.measured:.4g} {o.unit} ({o.detail})" for o in judged if not o.passed]
    assert judged, f"no learned {family} claim could be judged on {name}"
    assert not held, f"learned-structure claims hold on the random-init model {name}:\n" + "\n".join(held)
