"""The ``explain`` family's figures: per layer, the mean Spearman's rho of each attention reading (raw, rollout,
flow; the [CLS] row and the maximum over query rows) with each importance (blank-out, input x gradient), ours as
lines with their 95% interval, the paper's printed values as open markers beside them (Tables 1-2 for the
verb-number task, Table 3 for a GLUE fine-tune; numbers as printed per issue 63)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...claims.registry import figure
from .run import ExplainResult

# the paper's per-layer means, as printed per issue 63 (not checked against the PDF here): importance -> reading ->
# {1-based layer: rho}
TABLES_1_2 = {
    "blankout": {"raw": [.69, .10, -.11, -.09, .20, .29], "rollout": [.32, .38, .51, .62, .70, .71],
                 "flow": [.32, .44, .70, .70, .71, .70]},
    "gradient": {"raw": [.53, .16, -.06, .00, .24, .46], "rollout": [.22, .27, .39, .47, .53, .54],
                 "flow": [.22, .31, .54, .61, .60, .61]},
}
TABLE_3 = {"gradient": {"raw": {1: .12, 3: .09, 5: .08, 6: .09}, "rollout": {1: .11, 3: .12, 5: .13, 6: .13},
                        "flow": {1: .11, 3: .11, 5: .12, 6: .14}}}
COLOURS = {"raw": "tab:gray", "rollout": "tab:blue", "flow": "tab:red", "norm_rollout": "tab:green"}


def paper_points(task: str, importance: str, reading: str) -> dict[int, float]:
    """The paper's {layer: rho} for a pass's task (verb number: Tables 1-2; a GLUE task: Table 3), or {}."""
    if task == "blimp-number":
        values = TABLES_1_2.get(importance, {}).get(reading)
        return dict(enumerate(values, 1)) if values else {}
    return TABLE_3.get(importance, {}).get(reading, {})


def layer_curve(rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per layer: the mean rho over the examples with a value and its 1.96 SE half-width (nan where < 2)."""
    means, half = [], []
    for column in rho.T:
        v = column[np.isfinite(column)]
        means.append(v.mean() if len(v) else np.nan)
        half.append(1.96 * v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.nan)
    return np.array(means), np.array(half)


@figure("explain")
def explain_figures(pass_results, directory: Path) -> list[Path]:
    """One PNG per (model, corpus): two panels (blank-out, gradient), a curve per reading."""
    return [_curves(pr, directory) for pr in pass_results if isinstance(pr.result, ExplainResult)]


def _curves(pr, directory: Path) -> Path:
    from ...base.plotting import pyplot, save_figure

    plt = pyplot()
    res = pr.result
    layers = np.arange(1, res.n_layers + 1)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, importance in zip(axes, ("blankout", "gradient")):
        for key, rho in sorted(res.rho.items()):
            reading, imp = key.split("|")
            if imp != importance:
                continue
            base, row = reading.rsplit("_", 1)
            mean, half = layer_curve(rho)
            if not np.isfinite(mean).any():
                continue
            style = "-" if row == "cls" else "--"
            ax.errorbar(layers, mean, yerr=half, marker="o", ls=style, color=COLOURS.get(base, "black"), capsize=2,
                        label=f"{base} ({'[CLS] row' if row == 'cls' else 'max over rows'})")
        for base in ("raw", "rollout", "flow"):
            points = paper_points(res.task, importance, base)
            if points:
                ax.scatter(list(points), list(points.values()), marker="s", facecolors="none",
                           edgecolors=COLOURS[base], s=40, label=f"{base}, paper")
        ax.axhline(0, color="black", lw=0.5)
        ax.set_xticks(layers)
        ax.set_xlabel("Layer")
        ax.set_title(f"vs {'blank-out' if importance == 'blankout' else 'input x gradient'} importance", fontsize=9)
    axes[0].set_ylabel("Mean Spearman rho (95% interval)")
    axes[1].legend(fontsize=6, loc="best")
    paper = "Tables 1-2" if res.task == "blimp-number" else "Table 3 (SST-2)"
    fig.suptitle(f"{pr.model.name} / {pr.corpus} ({res.n_examples} examples, {res.tier} tier): attention vs "
                 f"importance; squares: Abnar & Zuidema {paper}", fontsize=9)
    return save_figure(fig, directory, f"explain-curves-{pr.model.slug}-{pr.corpus}.png")
