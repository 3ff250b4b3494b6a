"""Niven & Kao (the model-free arct family): the figure writer."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...base.plotting import save_figure
from ...claims.registry import figure
from ..common.arct_runs import run_values
from .adversarial import check_adversarial
from .cues import CueTable, cue_table, cues
from .run import ArctResult, prepare_arct
from .tokens import TOKENIZATIONS, treebank_clean_tokens, treebank_tokens

# ---- figure -------------------------------------------------------------------------------------------------

PAPER_TABLE2 = {"train": (0.65, 0.66), "dev": (0.62, 0.44), "test": (0.52, 0.77), "all": (0.61, 0.64)}
FIGURE_SETTINGS = (("BERT-L", "bert_large", "test"), ("BERT-L W", "bert_large_w", "test"),
                   ("BERT-L R,W", "bert_large_rw", "test"), ("BERT-L C,W", "bert_large_cw", "test"),
                   ("BERT-B", "bert_base", "test"), ("BoV", "bov", "test"), ("BiLSTM", "bilstm", "test"),
                   ("BERT-L adv", "bert_large_adv", "adv_pooled"), ("BERT-L adv W", "bert_large_adv_w", "adv_pooled"),
                   ("BERT-L adv R,W", "bert_large_adv_rw", "adv_pooled"),
                   ("BERT-L adv C,W", "bert_large_adv_cw", "adv_pooled"))


@figure("arct", result=ArctResult, each=True)
def arct_figures(pr, plt, directory: Path) -> list[Path]:
    """The authors' per-seed test accuracies per setting (strip + median), and π/ξ of "not" per split and
    tokenisation beside Table 2 — one pair of PNGs per pass (the data, not the model, decides them)."""
    res = pr.result
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    rng = np.random.default_rng(0)
    labels = []
    for x, (label, exp, column) in enumerate(FIGURE_SETTINGS):
        if exp not in res.runs:
            continue
        v = run_values(res.runs[exp], column)
        ax.scatter(x + rng.uniform(-0.15, 0.15, len(v)), v, s=10, alpha=0.6)
        ax.hlines(np.median(v), x - 0.3, x + 0.3, color="k", lw=1)
        labels.append((x, f"{label}\n(n={len(v)})"))
    ax.axhline(0.5, color="grey", ls=":", lw=1, label="chance")
    ax.set_xticks([x for x, _ in labels], [t for _, t in labels], fontsize=6, rotation=45, ha="right")
    ax.set_ylabel("test accuracy (adv: pooled 888)")
    ax.set_title("Niven & Kao 2019: the authors' shipped runs, one dot per seed (line: median)", fontsize=8)
    ax.legend(fontsize=7)
    shipped = save_figure(fig, directory, f"arct-shipped-runs-{pr.corpus}.png")

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    markers = dict(zip(TOKENIZATIONS, "osD^"))
    colours = dict(zip(PAPER_TABLE2, ("tab:blue", "tab:orange", "tab:green", "tab:red")))
    for s, (p, c) in PAPER_TABLE2.items():
        ax.scatter([c], [p], marker="*", s=120, color=colours[s], edgecolors="k", label=f"paper {s}")
        for v, mk in markers.items():
            t = res.table(s, v)
            ax.scatter([t.coverage("not")], [t.productivity("not")], marker=mk, color=colours[s], alpha=0.7)
    for v, mk in markers.items():  # legend entries for the tokenisations, in grey (colour = split)
        ax.scatter([], [], marker=mk, color="grey", label=v)
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    ax.set_xlabel('coverage ξ of "not"')
    ax.set_ylabel('productivity π of "not"')
    ax.set_title('Table 2 (stars) vs our counts per tokenisation (colour = split)', fontsize=8)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return [shipped, save_figure(fig, directory, f"arct-not-cue-{pr.corpus}.png")]


__all__ = ["TOKENIZATIONS", "CueTable", "cue_table", "cues", "treebank_tokens", "treebank_clean_tokens",
           "check_adversarial", "ArctResult", "prepare_arct", "run_values"]
