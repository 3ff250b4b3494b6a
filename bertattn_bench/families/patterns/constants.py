"""Kovaleva §4.1/§4.4/§4.5 (the patterns family): its thresholds, feature lists, per-tier budgets and corpora."""
from __future__ import annotations

from ...data import ud
from ...training.glue_pass import GLUE_TASKS

TYPES = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")
STRUCTURED = 0.5  # v + d: the majority of a map's mass on special tokens and neighbours
MIX = 0.25  # a component under a quarter of v + d makes the map pure (vertical or diagonal), else a mix
BLOCK = 0.6  # chance-corrected own-sentence share: 0 = uniform, 1 = every query stays in its own sentence
DEV_MAX = 1000  # Kovaleva §4.1: up to 1000 examples of each dev set (a seeded sample of larger ones)
TIER_DEV_MAX = {"quick": 100, "regression": 300, "full": DEV_MAX}  # MRPC dev examples (quick: the CI smoke run)
TIER_UD_MAX = {"quick": 100, "regression": 300, "full": None}  # UD EWT dev sentences for the linguistic features (None: all 2,001)
UD_CORPUS = ud.FEATURES_CORPUS
TIER_CORPORA = {"quick": ("mrpc",), "regression": ("mrpc",), "full": GLUE_TASKS}
SPECIAL = ("[CLS]", "[SEP]", "punct")  # GLUE features (token level)
LING = ("punct", "noun", "pronoun", "verb", "subject", "object", "negation")  # UD word features
UD_FEATURES = ("[CLS]", "[SEP]") + LING
# Kovaleva fn. 6; UD EWT/GUM split the contractions (don't, won't, ...) into their verb and "n't"
NEGATION = frozenset({"neither", "nor", "not", "never", "none", "nothing", "nowhere", "n't", "don't", "won't",
                      "didn't", "hadn't", "haven't", "can't", "isn't", "wasn't", "shouldn't", "couldn't"})
CLS_CLASSES = ("[CLS]", "[SEP]", "punct", "other")
RISE = ("noun", "object")  # §4.4: fine-tuning raises attention to nouns and direct objects (MRPC, RTE, QQP)
RISE_ALPHA = 0.05
# the control of that rise: determiners (UD upos DET), a word class no task's reasoning should single out; a head's
# noun/object rise counts only when it also exceeds the same head's determiner rise on the same sentences
RISE_CONTROL = "det"
