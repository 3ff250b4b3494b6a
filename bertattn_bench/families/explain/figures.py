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


@figure("explain", result=ExplainResult, each=True)
def explain_figures(pr, plt, directory: Path) -> list[Path]:
    """Per (model, corpus): the curves (two panels, blank-out and gradient, a curve per reading) and, where the
    pass kept its first example, that example's maps (:func:`_example`)."""
    return [_curves(pr, directory)] + ([_example(pr, directory)] if pr.result.example else [])


EXAMPLE_READINGS = (("raw_cls", "raw attention"), ("rollout_cls", "rollout"), ("flow_cls", "flow"))


def _example(pr, directory: Path) -> Path:
    """One example read whole (Abnar & Zuidema's Figs. 2-3 for one sentence): per reading, layer x input token,
    the [CLS] node's relevance of each token (each layer's row scaled to its maximum), and below them the two
    importances of each token (each scaled to its maximum): the arrays behind the example's correlations."""
    from ...base.plotting import pyplot, save_figure

    plt = pyplot()
    res, ex = pr.result, pr.result.example
    tokens = ex["tokens"]
    readings = [(k, name) for k, name in EXAMPLE_READINGS if k in ex["relevance"]]
    fig, axes = plt.subplots(len(readings) + 1, 1, figsize=(max(6.0, 0.28 * len(tokens) + 2), 2.0 * len(readings) + 2),
                             sharex=True, squeeze=False)
    for ax, (key, name) in zip(axes[:, 0], readings):
        rel = np.asarray(ex["relevance"][key], dtype=float)
        scaled = rel / np.maximum(np.abs(rel).max(1, keepdims=True), 1e-30)
        ax.imshow(scaled, aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
        ax.set_yticks(range(rel.shape[0]), [str(i) for i in range(1, rel.shape[0] + 1)], fontsize=6)
        ax.set_ylabel(f"{name}\nlayer", fontsize=7)
    ax = axes[-1, 0]
    x = np.arange(len(tokens))
    for j, (key, colour) in enumerate((("blankout", "tab:purple"), ("gradient", "tab:orange"))):
        v = np.asarray(ex["importance"].get(key, np.zeros(len(tokens))), dtype=float)
        ax.bar(x + (j - 0.5) * 0.4, v / max(np.abs(v).max(), 1e-30), width=0.4, color=colour,
               label="blank-out" if key == "blankout" else "input x gradient")
    ax.axhline(0, color="black", lw=0.5)
    ax.set_ylabel("importance\n(scaled)", fontsize=7)
    ax.legend(fontsize=6, loc="best")
    ax.set_xticks(x, tokens, rotation=90, fontsize=6)
    fig.suptitle(f"{pr.model.name} / {pr.corpus}, first example ({res.tier} tier): the [CLS] node's relevance of each "
                 f"input token per layer (each row scaled to its maximum) and the gold class's importance",
                 fontsize=8)
    return save_figure(fig, directory, f"explain-example-{pr.model.slug}-{pr.corpus}.png")


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
