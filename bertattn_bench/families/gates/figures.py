"""Voita et al. 2019 §6 beside Michel et al. 2019 (the gates family): the figure writer, dev score against heads
kept, the gates' λ runs beside Michel's importance-pruning curve on the same checkpoint, one colour per seed."""
from __future__ import annotations

from pathlib import Path

from ...base.plotting import save_figure
from ...claims.registry import figure
from .run import GatesResult


@figure("gates", result=GatesResult, each=True)
def gates_figures(pr, plt, directory: Path) -> list[Path]:
    """Accuracy vs heads kept (issue 64): per seed the gates' runs (points, λ written beside) and Michel's curve
    (line: the least important heads by I_h masked first, scored at every tenth and at the gates' counts)."""
    r = pr.result
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for s, seed in enumerate(r.seeds):
        c = colours[s % len(colours)]
        if r.michel_curve is not None and len(r.michel_curve) > s:
            ax.plot([r.n_total - k for k in r.michel_counts], r.michel_curve[s], "-", color=c, alpha=0.7,
                    label=f"Michel: importance order, seed {seed}")
        ax.plot(r.n_kept[s], r.scores[s], "o", color=c, ms=7, mec="k", label=f"Hard Concrete gates, seed {seed}")
        for lam, k, x in zip(r.lambdas, r.n_kept[s], r.scores[s]):
            ax.annotate(f"λ {lam:g}", (k, x), textcoords="offset points", xytext=(4, 4), fontsize=6, color=c)
        ax.axhline(r.base[s] - 1, color=c, ls=":", lw=0.8)
    ax.set_xlabel(f"heads kept (of {r.n_total})")
    ax.set_ylabel(f"dev {r.metric} (n = {r.n_dev})")
    ax.set_xlim(0, r.n_total + 1)
    ax.legend(fontsize=7)
    ax.set_title(f"{pr.model.name} / {r.task}: gates (Voita §6, {r.steps} steps) vs importance pruning "
                 f"(Michel); dotted: base - 1 point", fontsize=8)
    return [save_figure(fig, directory, f"gates-{pr.model.slug}-{r.task}.png")]
