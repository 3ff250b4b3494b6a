"""Kovaleva §4.2 (the framenet family): directions, the notebook's input length, the control's draws, the thresholds
and the corpora per tier."""
from __future__ import annotations

DIRECTIONS = ("t2f", "f2t", "both")
NOTEBOOK_MAX_LEN = 20  # analyze_sem_links: convert_to_bert_tokens(sentence, "", max_len=20)
DEFAULT_DIRECTION = {"piece": "f2t", "word": "both"}
DRAWS = 10  # random matched-distance pair sets per sentence
CONTROL_SEED = 0
PERCENTILE = 99.0  # Kovaleva §4.2
ALPHA = 0.01

# every tier: the notebook's population (439 sentences, seconds); full tier: also the project's variants
TIER_CORPORA = {"quick": ("notebook",), "regression": ("notebook",), "full": ("notebook", "one_per_lu", "all")}
