"""The arct_ft family's figure."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...base.plotting import pyplot, save_figure
from ...claims.registry import figure
from ...training import arct_finetune as arct_ft
from .constants import SETTING_NAMES
from .run import ArctFtResult, epochs_text

# ---- figure -------------------------------------------------------------------------------------------------

@figure("arct_ft")
def arct_ft_figures(pass_results, directory: Path) -> list[Path]:
    """Per setting: our per-seed test accuracies (adv: pooled 888) beside the authors' shipped runs."""
    by_model = {}
    for pr in pass_results:
        if isinstance(pr.result, ArctFtResult) and pr.result.runs:
            by_model.setdefault((pr.model.slug, pr.model.name), {})[pr.result.setting] = pr.result
    plt = pyplot()
    paths = []
    for (slug, name), results in by_model.items():
        fig, ax = plt.subplots(figsize=(max(4.5, 1.6 + 1.5 * len(results)), 3.8))
        rng = np.random.default_rng(0)
        ticks, labels = [], []
        x = 0
        for setting in SETTING_NAMES:
            if setting not in results:
                continue
            r = results[setting]
            epochs = r.recipe.get("epochs", arct_ft.RECIPE.epochs)
            ours = "ours" if epochs == arct_ft.RECIPE.epochs else f"ours, {epochs_text(epochs)}"
            columns = [(ours, r.accs(), "tab:blue")] + [
                (e.replace("bert_large", "BERT-L").replace("bert_base", "BERT-B"), v, "tab:grey")
                for e, v in r.authors.items() if not e.endswith(":train")]
            for label, v, colour in columns:
                ax.scatter(x + rng.uniform(-0.15, 0.15, len(v)), v, s=12, alpha=0.7, color=colour)
                ax.hlines(np.median(v), x - 0.3, x + 0.3, color="k", lw=1)
                ticks.append(x)
                labels.append(f"{setting}: {label}\n(n={len(v)})")
                x += 1
            x += 0.5
        ax.axhline(0.5, color="grey", ls=":", lw=1)
        ax.set_xticks(ticks, labels, fontsize=6, rotation=45, ha="right")
        ax.set_ylabel("test accuracy (adv: pooled 888)")
        ax.set_title(f"ARCT: {name}\nblue: ours, one dot per seed; grey: the authors' runs; line: median", fontsize=8)
        paths.append(save_figure(fig, directory, f"arct-ft-seeds-{slug}.png"))
    return paths
