"""The clustering family's figure (Clark Fig. 6)."""
from __future__ import annotations

from pathlib import Path

from ...base.plotting import save_figure
from ...claims.registry import figure
from .constants import OTHER
from .metrics import layer_ratio
from .run import ClusteringResult

# ---- figure (Clark Fig. 6) -----------------------------------------------------------------------------------

_MARKERS = {"[CLS]": "s", "[SEP]": "D", ". ,": "P", "previous": "<", "next": ">", "current": "^", "broad": "*",
            OTHER: "o"}


@figure("clustering", result=ClusteringResult, each=True)
def clustering_figure(pr, plt, directory: Path) -> list[Path]:
    """MDS map of the heads (Clark Fig. 6): colour = layer, marker = §3 behaviour; one PNG per (model, corpus)."""
    res = pr.result
    xy = res.mds()
    layers, labels, names = res.layers(), res.behaviors(), res.head_names()
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    cmap = plt.get_cmap("viridis", res.n_layers)
    for label in dict.fromkeys(labels):
        idx = [i for i, g in enumerate(labels) if g == label]
        sc = ax.scatter(xy[idx, 0], xy[idx, 1], c=layers[idx] + 1, cmap=cmap, vmin=0.5, vmax=res.n_layers + 0.5,
                        marker=_MARKERS.get(label, "o"), s=46, edgecolors="k", linewidths=0.4,
                        label=f"{label} ({len(idx)})")
    for i, name in enumerate(names):
        ax.annotate(name, xy[i], fontsize=5, xytext=(2, 2), textcoords="offset points", alpha=0.7)
    bar = fig.colorbar(sc, ax=ax, ticks=range(1, res.n_layers + 1))
    bar.set_label("layer")
    leg = ax.legend(fontsize=6, title="§3 behaviour", title_fontsize=7, loc="best")
    for h in leg.legend_handles:
        h.set_array(None)
        h.set_facecolor("0.6")
    ax.set_xticks([])
    ax.set_yticks([])
    ratio = layer_ratio(res.distance, layers)[2]
    ax.set_title(f"{pr.model.name} / {pr.corpus}: heads by mean JS divergence (MDS)\n"
                 f"{res.n_tokens} query tokens, {res.n_segments} segments; within/between-layer "
                 f"mean distance {ratio:.2f}", fontsize=8)
    return [save_figure(fig, directory, f"clustering-mds-{pr.model.slug}-{pr.corpus}.png", dpi=130)]
