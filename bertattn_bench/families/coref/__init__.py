"""Clark et al. §4.3 (Table 2): attention heads as antecedent selectors, against three baselines without a model.

Antecedent-selection accuracy: a coreferent mention that is not the first of its entity (in its window, see
``bertattn_bench.data.coref_corpus``) is resolved by a head when its head word attends most to the head word of *any*
earlier mention of the same entity. Word-level maps as in §4.1 (``metrics/syntax.py``): attention to a word sums
over its pieces, attention from a word averages over its pieces, [CLS]/[SEP] and the word itself are not
candidates; every word of the window is a candidate (the head is not told where the mentions are).

Baselines on the same anaphors (Clark §4.3, computed from the data): the nearest preceding mention; the nearest
preceding mention with the same lower-cased head word (no fallback: none found counts as wrong); a rule-based
system of four sieves after Lee et al. (2011): full string match, head-word match, number/gender/person agreement
(UD FEATS; for LitBank surface guesses, see ``bertattn_bench.data.litbank``), any mention; the nearest mention
passing the earliest sieve.
"""
from __future__ import annotations

# The family as a package (one module per job, as families/prune/): constants, the pass (run.py: the result, the
# reducer and the prepare, what the cache key follows), the claims' metrics and the figure; re-exported here so that
# ``from bertattn_bench.families.coref import ...`` reads as one module.
from .constants import *  # noqa: F401,F403
from .figures import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
