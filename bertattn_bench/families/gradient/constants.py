"""Clark et al. §3.2 (the gradient family): the masking and the key classes of the statistic."""
from __future__ import annotations

# the start of the reason a model whose attention cannot be edited has no pass
EDITS = "the attention-gradient pass edits the attention probabilities:"

MASK_RATE = 0.15
MASK_SEED = 0
# "unmasked" = Fig. 3's "All unmasked tokens" ([CLS], [SEP] and '.'/',' included): the claims' comparison set, as in
# the paper's figure (Clark et al. released no code for §3.2's gradients; the figure's legend is the definition).
# "other" (unmasked, neither [SEP] nor '.'/',') is kept for the figure's reading "other tokens" (caption).
KEY_CLASSES = ("sep", "punct", "other", "unmasked")
