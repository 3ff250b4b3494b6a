"""Michel et al. (the prune family): sample sizes, steps, seeds and the paper's Table 3 numbers."""
from __future__ import annotations

# "1": recompute importance before every step also in the regression tier (the name lives in settings.ENVIRONMENT)
from ...base.settings import PRUNE_EXACT_ENV as EXACT_ENV  # noqa: F401 (re-exported)

IMPORTANCE_EXAMPLES = 1000  # seeded subset of the training set for I_h (the authors' default is all of MNLI train)
# per tier (the quick tier's smoke run: its model saw 800 train pairs)
TIER_IMPORTANCE_EXAMPLES = {"quick": 256, "regression": IMPORTANCE_EXAMPLES, "full": IMPORTANCE_EXAMPLES}
STEPS = 10  # the curve: k = 0..9 tenths of all heads (the authors' MT code: i = 0..9; 100% = a constant predictor)
RANDOM_ORDERS = 3  # full tier: seeded random pruning orders (chance)
# full tier: the second sweep (recomputed importance, Δ order, random orders, all-but-one) and the per-layer best
# model run on the first seed only; the other seeds add their own single-head sweep and curve (the seed spread).
# Michel et al. report one model per task; this keeps the full tier near 1 h on 2 CPU cores instead of 2.
EXTRA_SEEDS = 1
PARAPHRASE_STSB = 4.0  # STS-B score >= 4 ("mostly equivalent") counts as a paraphrase (claims catalog)
TABLE3_BERT = [-0.01, 0.10, -0.14, -0.53, -0.29, -0.52, 0.05, -0.72, -0.96, 0.07, -0.19, -0.12]  # notes §4, points
