"""The per-seed values of a table of ARCT runs (Niven & Kao 2019: the authors' shipped results and the runs
fine-tuned here), with the paper-era derived columns, shared by the arct and arct_ft families (issue 44: no family
imports another's module)."""
from __future__ import annotations

import numpy as np

from ...claims.registry import NotApplicable

ADV_TEST_HALF = 444  # rows in each half of test-adv-negated (original test and its negated copy)


def run_values(runs, column: str) -> np.ndarray:
    """Per-seed values of a column, or of a derived one:

    * ``adv_ceil``: Table 4's adversarial accuracy as the paper-era ``accs.py`` computed it,
      (ceil(test·444) + ceil(test_adv·444)) / 888 — the ceiling turns 221.99999 into 222;
    * ``adv_pooled``: the same pooled over both halves with correct rounding;
    * ``test_nondegenerate``: test accuracy of the runs with train accuracy ≥ 0.8 (P §3).
    """
    if column in ("adv_ceil", "adv_pooled"):
        if "test_adv" not in runs.columns:
            raise NotApplicable(f"{runs.experiment}: no test_adv column (not an adversarial run)")
        r = np.ceil if column == "adv_ceil" else np.round
        return (r(runs.array("test") * ADV_TEST_HALF) + r(runs.array("test_adv") * ADV_TEST_HALF)) / (2 * ADV_TEST_HALF)
    if column == "test_nondegenerate":
        return runs.array("test")[runs.array("train") >= 0.8]
    if column not in runs.columns:
        raise NotApplicable(f"{runs.experiment}: no column {column!r}")
    return runs.array(column)
