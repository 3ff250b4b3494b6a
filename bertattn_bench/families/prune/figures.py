"""Michel et al. Figs. 2-4 (the prune family): the figure writer."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...base.plotting import save_figure
from ...claims.registry import figure
from .run import PruneResult

# ---- figures ------------------------------------------------------------------------------------------------------

def _seeds_label(seeds) -> str:
    seeds = list(seeds)
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"mean of seeds {', '.join(map(str, seeds))}"


@figure("prune", result=PruneResult, each=True)
def prune_figures(pr, plt, directory: Path) -> list[Path]:
    """The pruning curves (Fig. 3: importance order; full tier: recomputed, single-head-Δ order, random orders),
    the single-head Δ histogram (Fig. 1b) and the importance heatmap, one PNG per model and task."""
    r = pr.result
    fig, (ax, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 4.2), gridspec_kw={"width_ratios": [4, 3, 3]})
    x = 100 * r.fractions
    ax.plot(x, r.curve.mean(0), "o-", label=f"importance I_h (once), {_seeds_label(r.seeds)}")
    # the full tier's second sweep (recomputed, Δ order, random orders) runs on the first seed(s) only: label
    # which, and draw the I_h curve of those same seeds beside them so the orders are compared like for like
    second = [c for c in (r.curve_exact, r.curve_delta_order, r.curve_random) if c is not None]
    e = len(second[0]) if second else 0
    of_second = _seeds_label(r.seeds[:e]) if e else ""
    if e and e < len(r.curve):
        ax.plot(x, r.curve[:e].mean(0), "o:", color="tab:blue", alpha=0.6,
                label=f"importance I_h (once), {of_second}")
    if r.curve_exact is not None:
        ax.plot(x, r.curve_exact.mean(0), "s-", label=f"I_h recomputed each step, {of_second}")
    if r.curve_delta_order is not None:
        ax.plot(x, r.curve_delta_order.mean(0), "--", label=f"single-head Δ order, {of_second}")
    if r.curve_random is not None:
        rnd = r.curve_random.reshape(-1, len(r.counts))
        ax.fill_between(x, rnd.min(0), rnd.max(0), color="0.8",
                        label=f"random orders (range of {len(rnd)}), {of_second}")
    ax.axhline(r.base.mean() - 1, color="0.5", ls=":", lw=0.8, label="base - 1 point")
    ax.set_xlabel("heads pruned (%)")
    ax.set_ylabel(f"dev {r.metric}")
    ax.legend(fontsize=7)
    ax.set_title("pruning curve (Michel Fig. 3)", fontsize=9)
    d = r.head_delta.reshape(-1)
    sig = (r.head_p.reshape(-1) < 0.01) if not np.isnan(r.head_p).all() else np.zeros(d.size, dtype=bool)
    bins = 20
    ax2.hist([d[~sig], d[sig]], bins=bins, stacked=True, label=["p >= 0.01", "p < 0.01"],
             color=["tab:blue", "tab:red"])
    ax2.axvline(0, color="k", ls="--", lw=0.8)
    ax2.set_xlabel(f"Δ {r.metric} (points), one head masked")
    ax2.set_ylabel("heads (all seeds)")
    ax2.legend(fontsize=7)
    ax2.set_title("single-head masking (Fig. 1b)", fontsize=9)
    im = ax3.imshow(r.importance.mean(0), aspect="auto", cmap="viridis")
    ax3.set_xticks(range(r.n_heads), [str(h + 1) for h in range(r.n_heads)], fontsize=7)
    ax3.set_yticks(range(r.n_layers), [str(l + 1) for l in range(r.n_layers)], fontsize=7)
    ax3.set_xlabel("head")
    ax3.set_ylabel("layer")
    fig.colorbar(im, ax=ax3, label="I_h / ||I_layer||")
    ax3.set_title(f"importance ({r.n_importance} train examples)", fontsize=9)
    fig.suptitle(f"{pr.model.name} / {r.task} dev (n = {r.n_dev}), seeds {list(r.seeds)}: Michel et al. 2019",
                 fontsize=9)
    return [save_figure(fig, directory, f"prune-{pr.model.slug}-{r.task}.png")]
