"""Figures for Clark et al. §3 (surface: Fig. 2 and Fig. 4) and §4 (dependency: Table 1 / Fig. 5 as plots).

Registered with :func:`~bertattn_bench.claims.registry.figure`; each writer takes the pass results of its family (one
per model and corpus) and writes one PNG per result and figure, named ``<family>-<figure>-<model slug>-<corpus>``.
matplotlib's Agg backend: no display needed.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..base.plotting import save_figure
from ..claims.registry import figure
from .common.dependency_stats import DIRECTIONS, DependencyResult
from .common.surface_stats import SurfaceResult


def _jitter(n_layers: int, n_heads: int, width: float = 0.25) -> np.ndarray:
    """x of every head, (L, H): its 1-based layer, spread evenly over ±width so heads do not overlap."""
    offsets = np.linspace(-width, width, n_heads) if n_heads > 1 else np.zeros(1)
    return np.arange(1, n_layers + 1)[:, None] + offsets[None, :]


def _by_layer(pr) -> tuple[SurfaceResult, np.ndarray, np.ndarray]:
    """A surface pass's result, every head's jittered x (:func:`_jitter`) and the 1-based layers."""
    res = pr.result
    n_layers, n_heads = res.stats["entropy"].shape
    return res, _jitter(n_layers, n_heads), np.arange(1, n_layers + 1)


def _title(pr, n_text: str) -> str:
    return f"{pr.model.name} / {pr.corpus} ({n_text})"


# ---- §3 surface ----------------------------------------------------------------------------------------------

@figure("surface", result=SurfaceResult, each=True)
def surface_figures(pr, plt, directory: Path) -> list[Path]:
    """Clark Fig. 2 (mean attention to [CLS], [SEP], '.'/',' by layer; [SEP]→[SEP] vs other→[SEP]) and Fig. 4
    (per-head entropy by layer with the entropy of uniform attention), one pair of PNGs per (model, corpus)."""
    return [_surface_special(pr, plt, directory), _surface_entropy(pr, plt, directory)]


def _surface_special(pr, plt, directory: Path) -> Path:
    res, xs, layers = _by_layer(pr)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(5.2, 6.0), sharex=True)
    for stat, label, colour in (("to_cls", "[CLS]", "tab:red"), ("to_sep", "[SEP]", "tab:blue"),
                                ("to_punct", ". or ,", "tab:green")):
        top.scatter(xs.ravel(), res.stats[stat].numpy().ravel(), s=9, color=colour, alpha=0.35, linewidths=0)
        top.plot(layers, res.per_layer(stat).numpy(), marker="o", color=colour, label=label)
    top.axhline(res.sep_chance, color="tab:blue", ls=":", lw=1, label=f"[SEP] by chance (n_sep/L = {res.sep_chance:.3f})")
    top.set_ylabel("Avg. attention")
    top.set_ylim(0, 1)
    top.legend(fontsize=7)
    top.set_title(_title(pr, f"{res.n_segments} segments") + "\nattention to special tokens (dots: heads)", fontsize=8)
    for stat, label, colour in (("sep_to_sep", "[SEP] → [SEP]", "tab:purple"),
                                ("other_to_sep", "other → [SEP]", "tab:orange")):
        bottom.scatter(xs.ravel(), res.stats[stat].numpy().ravel(), s=9, color=colour, alpha=0.35, linewidths=0)
        bottom.plot(layers, res.per_layer(stat).numpy(), marker="o", color=colour, label=label)
    bottom.set_ylabel("Avg. attention to [SEP]")
    bottom.set_xlabel("Layer")
    bottom.set_ylim(0, 1)
    bottom.set_xticks(layers)
    bottom.legend(fontsize=7)
    return save_figure(fig, directory, f"surface-special-{pr.model.slug}-{pr.corpus}.png")


def _surface_entropy(pr, plt, directory: Path) -> Path:
    res, xs, layers = _by_layer(pr)
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    ax.scatter(xs.ravel(), res.stats["entropy"].numpy().ravel(), s=12, color="tab:blue", alpha=0.6, linewidths=0,
               label="heads (mean over tokens)")
    ax.plot(layers, res.per_layer("entropy").numpy(), color="tab:blue", lw=1, label="layer mean")
    ax.plot(layers, res.per_layer("cls_entropy").numpy(), color="tab:red", lw=1, ls="--", label="[CLS] query, layer mean")
    if res.n_segments:
        mean_len = res.n_tokens / res.n_segments
        ax.axhline(math.log(mean_len), color="k", ls=":", lw=1,
                   label=f"uniform attention (ln of the mean length {mean_len:.0f})")
    ax.set_xlabel("Layer")
    ax.set_ylabel("Avg. attention entropy (nats)")
    ax.set_xticks(layers)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    ax.set_title(_title(pr, f"{res.n_segments} segments") + "\nentropy of attention by head", fontsize=8)
    return save_figure(fig, directory, f"surface-entropy-{pr.model.slug}-{pr.corpus}.png")


# ---- §4 dependency -------------------------------------------------------------------------------------------

@figure("dependency", result=DependencyResult, each=True)
def dependency_figures(pr, plt, directory: Path) -> list[Path]:
    """Clark Table 1 as bars (best head per relation vs the best fixed-offset baseline) and a heatmap of the best
    head's accuracy in each layer per relation, one pair of PNGs per (model, corpus)."""
    return [_dependency_bars(pr, plt, directory), _dependency_layers(pr, plt, directory)]


def _scored_relations(res: DependencyResult) -> list[str]:
    return [r for i, r in enumerate(res.relations) if int(res.n_arcs[i]) > 0]


def _dependency_bars(pr, plt, directory: Path) -> Path:
    res = pr.result
    relations = _scored_relations(res)
    best = [res.best_head(r) for r in relations]
    base = [res.baselines[r].accuracy if r in res.baselines else float("nan") for r in relations]
    x = np.arange(len(relations))
    fig, ax = plt.subplots(figsize=(max(5.0, 0.55 * len(relations) + 1.5), 4.4))
    ax.bar(x - 0.2, [b.accuracy for b in best], 0.4, color="tab:blue", label="best head (either direction)")
    ax.bar(x + 0.2, base, 0.4, color="0.65", label="best fixed offset")
    for xi, b in zip(x, best):
        arrow = "→h" if b.direction == 0 else "→d"
        ax.annotate(f"{b.name}{arrow}", (xi - 0.2, b.accuracy), xytext=(0, 2), textcoords="offset points",
                    ha="center", fontsize=6, rotation=90)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r}\n{int(res.n_arcs[res.relations.index(r)])}"
                        + (f"\n{res.baselines[r].offset:+d}" if r in res.baselines else "") for r in relations],
                       fontsize=7)
    ax.set_ylabel("Accuracy (%)")
    ax.set_ylim(0, 115)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    ax.set_title(_title(pr, f"{res.n_sentences} sentences") + f"\nunder each relation: n arcs, baseline offset; "
                 f"→h: {DIRECTIONS[0]}, →d: {DIRECTIONS[1]}", fontsize=8)
    return save_figure(fig, directory, f"dependency-best-heads-{pr.model.slug}-{pr.corpus}.png")


def _dependency_layers(pr, plt, directory: Path) -> Path:
    res = pr.result
    relations = _scored_relations(res)
    acc = res.accuracy()  # (L, 2, R, H)
    idx = [res.relations.index(r) for r in relations]
    per_layer = acc[:, :, idx, :].amax(dim=(1, 3)).T.numpy()  # (R, L): best head of each layer, either direction
    n_layers = per_layer.shape[1]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * n_layers + 2.5), max(3.0, 0.32 * len(relations) + 1.2)))
    im = ax.imshow(per_layer, aspect="auto", cmap="viridis", vmin=0, vmax=100)
    for (i, j), v in np.ndenumerate(per_layer):
        ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=6, color="w" if v < 60 else "k")
    ax.set_xticks(range(n_layers))
    ax.set_xticklabels(range(1, n_layers + 1))
    ax.set_yticks(range(len(relations)))
    ax.set_yticklabels(relations, fontsize=7)
    ax.set_xlabel("Layer")
    fig.colorbar(im, ax=ax).set_label("best head's accuracy (%)")
    ax.set_title(_title(pr, f"{res.n_sentences} sentences") + "\nbest head per layer and relation", fontsize=8)
    return save_figure(fig, directory, f"dependency-layers-{pr.model.slug}-{pr.corpus}.png")
