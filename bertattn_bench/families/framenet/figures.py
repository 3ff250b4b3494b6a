"""The framenet family's figure (Kovaleva Fig. 3)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...base.plotting import save_figure
from ...claims.registry import figure
from ...engine.attention import head_name
from .metrics import frame_heads
from .reduce import FrameResult


@figure("framenet", result=FrameResult, each=True)
def framenet_figure(pr, plt, directory: Path) -> list[Path]:
    """Kovaleva Fig. 3: per-head score, its matched-distance control and the difference (frame-semantic heads
    boxed), and the example sentence's attention from the target in the two strongest heads."""
    r = pr.result
    if r.n_sentences < 2:
        return []
    d = r.d(None)
    heads, threshold, _ = frame_heads(r)
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.6), gridspec_kw={"width_ratios": [1, 1, 1, 1.1]})
    panels = (("score (mean max attention)", r.score[d], "viridis"),
              (f"matched-distance control (p99 {threshold:.3f})", r.control[d], "viridis"),
              ("score - control", r.diff_mean[d], "RdBu_r"))
    vmax = float(max(r.score[d].max(), r.control[d].max()))
    for ax, (title, values, cmap) in zip(axes, panels):
        lim = float(np.abs(values).max()) or 1.0
        kw = {"vmin": -lim, "vmax": lim} if cmap == "RdBu_r" else {"vmin": 0, "vmax": vmax}
        im = ax.imshow(values, cmap=cmap, aspect="auto", **kw)
        ax.set_xticks(range(values.shape[1]), [str(h + 1) for h in range(values.shape[1])], fontsize=6)
        ax.set_yticks(range(values.shape[0]), [str(l + 1) for l in range(values.shape[0])], fontsize=6)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(title, fontsize=8)
        for l, h, *_ in heads:
            ax.add_patch(plt.Rectangle((h - 0.5, l - 0.5), 1, 1, fill=False, ec="red", lw=1.5))
        fig.colorbar(im, ax=ax, fraction=0.046)
    ex, ax = r.example, axes[3]
    if ex.get("rows") is not None:
        ranked = [(l, h) for l, h, *_ in heads[:2]] or [divmod(int(i), r.shape[1])
                                                      for i in np.argsort(-r.score[d], axis=None)[:2]]
        x = np.arange(len(ex["labels"]))
        for k, (l, h) in enumerate(ranked):
            ax.bar(x + (k - 0.5) * 0.4, ex["rows"][l, h], 0.4, label=head_name(l, h))
        ax.set_xticks(x, ex["labels"], fontsize=7, rotation=30)
        ax.set_title(f"from {ex['labels'][ex['row']]!r} ({ex['frame']})", fontsize=8)
        ax.legend(fontsize=7)
    fig.suptitle(f"{pr.model.name} / FrameNet {pr.corpus} (n = {r.n_sentences} sentences, {r.n_pairs} linked "
                 f"pairs, {r.direction(None)}, {r.level} level): Kovaleva Fig. 3; boxed: frame-semantic heads",
                 fontsize=9)
    return [save_figure(fig, directory, f"framenet-{pr.model.slug}-{pr.corpus}.png")]
