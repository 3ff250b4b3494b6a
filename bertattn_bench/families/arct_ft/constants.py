"""The arct_ft family's settings, seeds, tiers and the authors' experiments beside each setting."""
from __future__ import annotations

from ...training import arct_finetune as arct_ft

SETTING_NAMES = tuple(arct_ft.SETTINGS)
TWIN_SEEDS = (0, 1)  # the random-init twin (negative control), full tier
SHORT_EPOCHS = 1  # the quick and regression tiers' short seed: ~70 s on 2 CPU threads (5 epochs ~175 s)
TIERS = {
    # the smoke run: one short seed (the run's: $BERTATTN_SEED, 0 by default) on the first 400 examples of train,
    # dev and test
    "quick": {"corpora": ("full",), "seeds": None, "n_seeds": 1, "twin_seeds": (), "epochs": SHORT_EPOCHS,
              "limit": 400},
    # three short seeds from the run's (issue 61: the seed-dependent families train three at the regression tier):
    # a smoke run of the training path, recorded for the regression check
    "regression": {"corpora": ("full",), "seeds": None, "n_seeds": 3, "twin_seeds": (), "epochs": SHORT_EPOCHS},
    "full": {"corpora": SETTING_NAMES, "seeds": (0, 1, 2, 3, 4), "twin_seeds": TWIN_SEEDS, "epochs": None},
}
TWIN_SHORT_REASON = ("the random-init twin is fine-tuned on ARCT in --tier full only (the quick and regression tiers' "
                     "one short seed trains the model under test)")

# the authors' experiments (results_from_paper/<name>) beside each of our settings
AUTHORS = {"full": ("bert_large", "bert_base"), "w": ("bert_large_w",), "rw": ("bert_large_rw",),
           "cw": ("bert_large_cw",), "adv": ("bert_large_adv",)}
