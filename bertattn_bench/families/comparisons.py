"""Claims that read two passes: two models on the same data (cased vs uncased), or one model on two corpora.

The plugin resolves a claim's ``inputs`` (see ``claims.Claim``) to pass results and hands them to these metrics as
``passes``; the outcome's data column names every pass it read.
"""
from __future__ import annotations

import numpy as np

from ..claims.registry import Measurement, NotApplicable, metric


@metric("layer_profile_correlation")
def layer_profile_correlation(pr, passes: list, stat: str = "to_sep", need_casing_pair: bool = True) -> Measurement:
    """Pearson r between the per-layer means of ``stat`` of this model and another model on the same data (Clark
    §3.2: the uncased model shows the same special-token pattern as the cased one)."""
    if not passes:
        raise NotApplicable("compares two models: run with a second --model")
    other = passes[0]
    a, b = pr.result.per_layer(stat).double().cpu().numpy(), other.result.per_layer(stat).double().cpu().numpy()
    if need_casing_pair:
        la, lb = pr.model.extra.get("lowercases"), other.model.extra.get("lowercases")
        if la is None or lb is None or la == lb:
            raise NotApplicable(f"needs a cased and an uncased model; {pr.model.name} and {other.model.name} "
                                f"{'both lowercase' if la else 'are both cased'}")
    if len(a) != len(b):
        raise NotApplicable(f"the two models have {len(a)} and {len(b)} layers")
    r = float(np.corrcoef(a, b)[0, 1])
    text = lambda v: " ".join(f"{x:.2f}" for x in v)  # noqa: E731
    return Measurement(r, min(pr.n_examples, other.n_examples), "segments", unit="Pearson r",
                       detail=f"per-layer {stat}: {pr.model.name} [{text(a)}] vs {other.model.name} [{text(b)}]")
