"""The finetune family's figure (Kovaleva Fig. 5)."""
from __future__ import annotations

from pathlib import Path

from ...base.plotting import save_figure
from ...claims.registry import figure
from .run import FinetuneResult


@figure("finetune", result=FinetuneResult, each=True)
def finetune_figures(pr, plt, directory: Path) -> list[Path]:
    """Kovaleva Fig. 5: per-head cosine between pre-trained and fine-tuned maps, and its per-layer mean."""
    r = pr.result
    if r.cosine_head is None:
        return []
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(9, 3.8), gridspec_kw={"width_ratios": [3, 1]})
    im = ax.imshow(r.cosine_head, cmap="viridis", aspect="auto")
    ax.set_xticks(range(r.cosine_head.shape[1]), [str(h + 1) for h in range(r.cosine_head.shape[1])], fontsize=7)
    ax.set_yticks(range(r.cosine_head.shape[0]), [str(l + 1) for l in range(r.cosine_head.shape[0])], fontsize=7)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    fig.colorbar(im, ax=ax, label="cosine (pre-trained vs fine-tuned)")
    ax2.plot(r.cosine_layer, range(len(r.cosine_layer)), "o-")
    ax2.set_yticks(range(len(r.cosine_layer)), [f"L{l + 1}" for l in range(len(r.cosine_layer))], fontsize=7)
    ax2.invert_yaxis()
    ax2.set_xlabel("mean cosine")
    fig.suptitle(f"{pr.model.name} / {r.task}: attention change after fine-tuning (seed {r.seeds[0]}, "
                 f"{r.n_cosine} dev examples; Kovaleva Fig. 5)", fontsize=9)
    return [save_figure(fig, directory, f"finetune-cosine-{pr.model.slug}-{r.task}.png")]
