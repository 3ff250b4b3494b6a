"""The norms family's figures."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...claims.registry import figure
from .run import NormsResult


@figure("norms", result=NormsResult, each=True)
def norms_figures(pr, plt, directory: Path) -> list[Path]:
    """Clark Fig. 2's curves (mean attention to [CLS], [SEP], '.'/',' by layer; dots: heads) in both readings side
    by side: alpha, the raw ||alpha f|| (Kobayashi 2020's quantity), the per-head ||alpha f|| and the layer-level
    ||sum_h alpha f|| shares (normalised per query row); and the 2021 mixing ratios by layer (the masked sweep). Two
    PNGs per (model, corpus)."""
    return [_readings_figure(pr, directory), _mixing_figure(pr, directory)]


def _readings_figure(pr, directory: Path) -> Path:
    """Clark's per-layer attention to [CLS], [SEP] and '.'/',' in both readings, one figure: alpha (Clark Fig. 2),
    the raw ||alpha f|| the category receives (Kobayashi 2020's own quantity, re-examine.py, with the other tokens'
    curve), and the ||alpha f|| and ||sum_h alpha f|| shares (normalised per query row, what the kob.* claims read)."""
    from ...base.plotting import pyplot, save_figure

    plt = pyplot()
    res = pr.result
    curves = (("cls", "to_cls", "[CLS]", "tab:red"), ("sep", "to_sep", "[SEP]", "tab:blue"),
              ("punct", "to_punct", ". or ,", "tab:green"), ("other", None, "other", "tab:gray"))
    panels = (("weights", "alpha (Clark Fig. 2)"), ("afx", "||alpha f||, raw (Kobayashi)"),
              ("norms", "||alpha f|| share, per head"), ("layer", "||sum_h alpha f|| share, layer"))
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8))
    for ax, (name, title) in zip(axes, panels):
        for cat, stat, label, colour in curves:
            if name == "afx":
                values = res.afx[cat]
            elif stat is None:
                continue
            else:
                values = res.readings[name].stats[stat]
            n_layers, n_heads = values.shape
            layers = np.arange(1, n_layers + 1)
            if n_heads > 1:
                xs = layers[:, None] + np.linspace(-0.25, 0.25, n_heads)[None, :]
                ax.scatter(xs.ravel(), values.numpy().ravel(), s=8, color=colour, alpha=0.3, linewidths=0)
            ax.plot(layers, values.mean(1).numpy(), marker="o", color=colour, label=label)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("Layer")
        ax.set_xticks(layers)
        if name == "afx":
            ax.set_ylim(bottom=0)
            ax.set_ylabel("Avg. ||alpha f|| received", fontsize=8)
            ax.legend(fontsize=7)
        else:
            ax.set_ylim(0, 1)
    axes[0].set_ylabel("Avg. share of attention")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{pr.model.name} / {pr.corpus} ({res.n_segments} segments): attention to special tokens, "
                 f"by weight and by norm", fontsize=9)
    return save_figure(fig, directory, f"norms-readings-{pr.model.slug}-{pr.corpus}.png")


def _mixing_figure(pr, directory: Path) -> Path:
    from ...base.plotting import pyplot, save_figure

    plt = pyplot()
    res = pr.result
    labels = {"attn_w": "Attn-W", "attn_n": "Attn-N", "attnres_w": "AttnRes-W", "attnres_n": "AttnRes-N",
              "attnresln_n": "AttnResLn-N"}
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    for k, v in res.mixing_per_layer.items():
        layers = np.arange(1, len(v) + 1)
        ax.plot(layers, 100 * v.numpy(), marker="o", label=f"{labels[k]} (mean {100 * res.mixing_mean[k]:.1f}%)")
        ax.set_xticks(layers)
    ax.set_ylim(0, 100)
    ax.set_xlabel("Layer")
    ax.set_ylabel("Mixing ratio (%)")
    ax.legend(fontsize=7)
    ax.set_title(f"{pr.model.name} / {pr.corpus}: context mixing by layer\n({res.n_masked} pieces masked, "
                 f"Kobayashi et al. 2021)", fontsize=8)
    return save_figure(fig, directory, f"norms-mixing-{pr.model.slug}-{pr.corpus}.png")

