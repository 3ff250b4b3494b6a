"""The disable family's figure (Kovaleva Figs. 8 and 9)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...base.plotting import save_figure
from ...claims.registry import figure
from .run import DisableResult


@figure("disable", result=DisableResult, each=True)
def disable_figures(pr, plt, directory: Path) -> list[Path]:
    """Kovaleva Fig. 8 (Δ per disabled head, one heatmap per task) and Fig. 9 (Δ per disabled layer)."""
    r = pr.result
    d = r.head_delta.mean(0)
    lim = max(float(np.abs(d).max()), r.step if not np.isnan(r.step) else 0.0, 1e-6)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": [r.n_heads, 4]})
    im = ax.imshow(d, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
    ax.set_xticks(range(r.n_heads), [str(h + 1) for h in range(r.n_heads)], fontsize=7)
    ax.set_yticks(range(r.n_layers), [str(l + 1) for l in range(r.n_layers)], fontsize=7)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    for (l, h), v in np.ndenumerate(d):
        ax.text(h, l, f"{v:+.1f}", ha="center", va="center", fontsize=5)
    fig.colorbar(im, ax=ax, label=f"Δ {r.metric} (points)")
    ax.set_title(f"one head disabled (uniform attention); base {np.mean(r.base):.1f}", fontsize=9)
    ld = r.layer_delta.mean(0)
    ax2.barh(range(r.n_layers), ld, color=["tab:blue" if v >= 0 else "tab:red" for v in ld])
    if not np.isnan(r.step):
        for x in (-r.step, r.step):
            ax2.axvline(x, color="0.5", lw=0.8, ls="--")
    ax2.set_yticks(range(r.n_layers), [f"L{l + 1}" for l in range(r.n_layers)], fontsize=7)
    ax2.invert_yaxis()
    ax2.set_xlabel("Δ (points); dashed: one example")
    ax2.set_title("whole layer disabled", fontsize=9)
    fig.suptitle(f"{pr.model.name} / {r.task} dev (n = {r.n_dev}), seeds {list(r.seeds)}: Kovaleva Figs. 8-9",
                 fontsize=9)
    return [save_figure(fig, directory, f"disable-{pr.model.slug}-{r.task}.png")]
