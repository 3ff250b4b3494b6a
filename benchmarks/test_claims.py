"""Every claim of the four papers as a test, generated from the registry (one module for every family).

For each family (``bertattn_bench.claims.registry.families()``: Clark et al. 2019's surface, gradient, dependency, coref,
probes and clustering; Kovaleva et al. 2019's finetune, disable, patterns and framenet; Michel et al. 2019's prune
and speedup; Niven & Kao 2019's arct and arct_ft) and each requested (model, corpus):

* ``test_attention_core[paper-family-model-corpus]`` computes the family's pass (its fine-tunes first, untimed),
  times it with pytest-benchmark and keeps the result for the claims;
* ``test_claim[paper-family-model-corpus-claim]`` judges one claim of ``reference_numbers/<paper>_<family>.toml``
  on that result: against the paper's statement and the recorded baseline.

Select with ``-k``: ``pytest benchmarks -k dependency``, ``-k kovaleva``, ``-k "disable and mrpc"``, ``-k
clark.sep_mid_layers``. A new family needs no module here: registering it (``@family``) and its TOML file is enough
(docs/contributing.md).
"""
from bertattn_bench.faces.pytest_session import check_claim, time_core
from bertattn_bench.runner.plan import EVERY_FAMILY

FAMILY = EVERY_FAMILY


def test_attention_core(benchmark, bench, target):
    """Times the family's pass over the corpus (its result feeds every claim of the family)."""
    result = time_core(benchmark, bench, target)
    assert result.n_examples > 0


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
