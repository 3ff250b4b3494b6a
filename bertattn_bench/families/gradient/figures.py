"""The gradient family's figure (Clark Fig. 3)."""
from __future__ import annotations

from pathlib import Path

from ...base.plotting import save_figure
from ...claims.registry import figure
from .reduce import GradientResult


@figure("gradient", result=GradientResult, each=True)
def gradient_figure(pr, plt, directory: Path) -> list[Path]:
    """Mean |∂L/∂α| by layer for [SEP], '.'/',' and all unmasked tokens, one PNG per (model, corpus)."""
    res = pr.result
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    layers = range(1, res.n_layers + 1)
    for key, label in (("unmasked", "All unmasked tokens"), ("sep", "[SEP]"), ("punct", ". or ,")):
        ax.plot(layers, res.per_layer(key).tolist(), marker="o", label=label)
    ax.set_xlabel("Layer")
    ax.set_ylabel("Average |dL/dα|")
    ax.set_title(f"{pr.model.name} / {pr.corpus} (n={res.n_segments})", fontsize=8)
    ax.legend(fontsize=7)
    return [save_figure(fig, directory, f"gradient-{pr.model.slug}-{pr.corpus}.png")]
