"""Kovaleva Figs. 1-2, 6-7 (the patterns family): the figure writer."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...base.plotting import pyplot, save_figure
from ...claims.registry import figure
from ...engine.attention import head_name
from ...training.glue_pass import GLUE_TASKS
from .constants import CLS_CLASSES, SPECIAL, TYPES, UD_FEATURES
from .reduce import PatternsResult

# ---- figures -----------------------------------------------------------------------------------------------------

COLORS = {"vertical": "tab:blue", "diagonal": "tab:orange", "vertical+diagonal": "tab:purple", "block": "tab:green",
          "heterogeneous": "0.6"}


@figure("patterns", result=PatternsResult)
def patterns_figures(pass_results, directory: Path) -> list[Path]:
    """Fig. 1 (a typical map of each type) + Fig. 2 (type shares per task), Fig. 6 (feature scores per layer),
    Fig. 7 (final-layer [CLS] row per task)."""
    plt = pyplot()
    paths = []
    by_model: dict[str, list] = {}
    for pr in pass_results:
        by_model.setdefault(pr.model.slug, []).append(pr)
    for slug, prs in by_model.items():
        prs.sort(key=lambda p: GLUE_TASKS.index(p.result.task))
        name = prs[0].model.name
        # Fig. 1 + Fig. 2
        fig = plt.figure(figsize=(13, 5.5))
        ex = prs[0].result
        st = (ex.finetuned or ex.pretrained)
        for k, t in enumerate(TYPES):
            ax = fig.add_subplot(2, 5, k + 1)
            e = st.glue.examples.get(t)
            if e is None:
                ax.set_title(f"{t}: none", fontsize=8)
                ax.axis("off")
                continue
            ax.imshow(e["map"], cmap="Greys", vmin=0, vmax=max(float(e["map"].max()), 1e-6))
            v, d, b = e["features"]
            ax.set_title(f"{t}\n{head_name(e['layer'], e['head'])} v={v:.2f} d={d:.2f} b={b:.2f}", fontsize=7)
            ax.set_xticks([])
            ax.set_yticks([])
        ax = fig.add_subplot(2, 1, 2)
        labels, bottoms, x = [], None, 0
        bars = []
        for p in prs:
            r = p.result
            for ms in (r.pretrained, r.finetuned):
                if ms is not None:
                    bars.append((f"{r.task}\n{'pt' if ms is r.pretrained else 'ft'}", ms.glue.shares()))
        bottoms = np.zeros(len(bars))
        for k, t in enumerate(TYPES):
            vals = np.array([s[k] for _, s in bars])
            ax.bar(range(len(bars)), vals, bottom=bottoms, color=COLORS[t], label=t)
            bottoms += vals
        ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
        ax.set_ylabel("share of maps")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
        fig.suptitle(f"{name}: typical maps ({ex.task}, {st.label}; Kovaleva Fig. 1) and type shares per task "
                     f"(Fig. 2; rule-based types, not the paper's CNN)", fontsize=9)
        paths.append(save_figure(fig, directory, f"patterns-types-{slug}.png"))
        # Fig. 6: per layer, mean score of each feature (special on the task, linguistic on UD)
        for p in prs:
            r = p.result
            models = [ms for ms in (r.pretrained, r.finetuned) if ms is not None]
            fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 3.6), squeeze=False)
            for ax, ms in zip(axes[0], models):
                layers = np.arange(1, r.n_layers + 1)
                for i, f in enumerate(SPECIAL):
                    ax.plot(layers, ms.glue.special[..., i].mean(1), "o-", lw=2, label=f"{f} ({r.task})")
                for i, f in enumerate(UD_FEATURES):
                    if f in ("[CLS]", "[SEP]"):
                        continue
                    ax.plot(layers, ms.ud.scores[..., i].mean(1), "--", lw=1, label=f"{f} (UD)")
                ax.set_xlabel("layer")
                ax.set_ylabel("score (mean over heads)")
                ax.set_title(ms.label, fontsize=8)
                ax.legend(fontsize=6)
            fig.suptitle(f"{name}: attention to special tokens and linguistic features per layer (Kovaleva Fig. 6; "
                         f"{r.task} n = {r.n_dev}, UD n = {r.pretrained.ud.n_sentences})", fontsize=9)
            paths.append(save_figure(fig, directory, f"patterns-features-{slug}-{r.task}.png"))
        # Fig. 7: final-layer [CLS] row per task
        rows = []
        for p in prs:
            r = p.result
            for ms in (r.pretrained, r.finetuned):
                if ms is not None:
                    rows.append((f"{r.task} {'pt' if ms is r.pretrained else 'ft'}", ms.glue.cls_row[-1].mean(0)))
        fig, ax = plt.subplots(figsize=(5, 0.5 + 0.4 * len(rows)))
        mat = np.array([x for _, x in rows])
        ax.imshow(mat, cmap="Greys", vmin=0, vmax=1, aspect="auto")
        for (i, j), v in np.ndenumerate(mat):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="tab:red")
        ax.set_xticks(range(len(CLS_CLASSES)), CLS_CLASSES, fontsize=7)
        ax.set_yticks(range(len(rows)), [n for n, _ in rows], fontsize=7)
        ax.set_title(f"{name}: final-layer [CLS] attention (Kovaleva Fig. 7)", fontsize=8)
        paths.append(save_figure(fig, directory, f"patterns-cls-{slug}.png"))
    return paths
