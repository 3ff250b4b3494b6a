"""Kovaleva et al. 2019 §4.6, Figs. 8-9: disabling single heads and whole layers of fine-tuned models.

Disabling = the head's attention replaced by 1/n over the example's n real tokens (``attention.UniformRows``),
at test time on the fine-tuned model, scored on the dev set (the paper's setting as far as it is stated: see
kovaleva2019-methods-notes.md §4). The ``disable`` family's pass evaluates "none", each of the L x H heads and
each of the L layers in one batched sweep (``sweeps.sweep``: every batch row carries its own configuration, and a
configuration runs only from its first disabled layer on, the plain prefix computed once per batch: about
(L + 1) / 2L of as many plain dev passes as it has configurations: 0.59 for 6 layers x 12
heads), for every seed of the tier.

A configuration is scored on the same dev examples as the undisabled model, so its gain is judged within the model:
exact paired (McNemar) bounds on its flipped examples (:func:`stats.paired_gain_bounds`), Bonferroni over the
configurations where a best one is tested (issue 36; before, against max(one example's step, the seed-to-seed sd of
the dev score), a between-model bar). A regression task (STS-B) has no flips: there the pass keeps each
configuration's Pearson r with the undisabled model's dev predictions, and a gain in r on the same examples is
bounded by the normal bounds for two overlapping correlations (Steiger 1980) (:func:`stats.overlapping_correlation_bounds`).
"""
from __future__ import annotations

# The family as a package (one module per job, as families/coref/): the pass (run.py: the configurations, the result,
# the pass and the prepare, what the cache key follows), the claims' metrics and the figures; re-exported here so that
# ``from bertattn_bench.families import disable`` reads as one module.
from .figures import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
