"""Clark et al. §4.3 (the coref family): the three baselines without a model and the mention types read."""
from __future__ import annotations

from ...data.coref_documents import KINDS

BASELINES = ("nearest", "head_word", "rules")
BASELINE_NAMES = {"nearest": "nearest mention", "head_word": "head-word match", "rules": "rule-based"}
TYPES = ("all",) + KINDS
