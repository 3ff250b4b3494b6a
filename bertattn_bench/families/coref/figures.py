"""The coref family's figure (Clark Table 2 as bars)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...base.plotting import save_figure
from ...claims.registry import figure
from ...engine.attention import head_name
from .constants import BASELINE_NAMES, BASELINES, TYPES
from .run import CorefResult


@figure("coref", result=CorefResult, each=True)
def coref_figure(pr, plt, directory: Path) -> list[Path]:
    """Accuracy by mention type: the best head (on all anaphors) against the three baselines, one PNG per pass."""
    res = pr.result
    if res.count() == 0:
        return []
    layer, head, _ = res.best_head()
    series = [(BASELINE_NAMES[b], [res.baseline(b, k) for k in TYPES]) for b in BASELINES]
    series.append((f"head {head_name(layer, head)}", [res.head_accuracy(layer, head, k) for k in TYPES]))
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    x = np.arange(len(TYPES))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, values, width, label=label)
    ax.set_xticks(x, [f"{k}\n(n={res.count(k)})" for k in TYPES], fontsize=7)
    ax.set_ylabel("antecedent selection accuracy (%)")
    ax.set_ylim(0, 118)
    ax.set_yticks(range(0, 101, 20))
    ax.set_title(f"{pr.model.name} / {pr.corpus} ({res.n_windows} windows)", fontsize=8)
    ax.legend(fontsize=7, ncol=2)
    return [save_figure(fig, directory, f"coref-{pr.model.slug}-{pr.corpus}.png")]
