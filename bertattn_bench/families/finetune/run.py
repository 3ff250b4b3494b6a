"""The finetune family's pass (``-k finetune``): the result, the attention-change reducer (Fig. 5), the pass (fine-tunes,
the un-tuned head, the random-init twin) and the prepare (what the cache key follows)."""
from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from ...claims.registry import family
from ...data import glue
from ...engine import attention
from ...engine.batching import iter_batches
from ...training import glue_finetune as finetune
from ...training.glue_pass import (
    COSINE_MAX_EXAMPLES,
    GLUE_FAMILY,
    TIERS,
    TWIN_SEEDS,
    GluePass,
    TaskScores,
    make_glue_pass,
    task_scores,
)
from ...training.glue_result import GlueResult


@dataclass(kw_only=True)
class FinetuneResult(GlueResult):
    """Table 1's scores (fine-tuned per seed, the untrained head, the constant and majority baselines, the random-init
    twin) and Fig. 5's attention change (the header: :class:`GlueResult`)."""

    n_dev_truncated: int
    finetuned: dict[int, TaskScores]
    untuned: dict[int, TaskScores]
    constant: dict[str, dict]
    majority: tuple[str, float]
    random_ft: dict[int, TaskScores] | None
    random_note: str
    cosine_layer: np.ndarray | None  # (L,) mean cosine, pre-trained vs fine-tuned (seed = seeds[0])
    cosine_head: np.ndarray | None  # (L, H)
    n_cosine: int
    train_meta: dict[int, dict] = field(default_factory=dict)
    twin_meta: dict[int, dict] = field(default_factory=dict)
    labels: np.ndarray | None = None  # the dev labels, in the order of every TaskScores.predictions
    PER_SEED: ClassVar[tuple[str, ...]] = GlueResult.PER_SEED + ("finetuned", "untuned", "train_meta")

    def mean(self, scores: dict[int, TaskScores] | None) -> float:
        return float(np.mean([s.primary for s in scores.values()])) if scores else float("nan")

    def spread(self, scores: dict[int, TaskScores]) -> float:
        return float(np.std([s.primary for s in scores.values()])) if len(scores) > 1 else float("nan")


class CosineReducer:
    """Per (layer, head): the sum over examples of cos(pre-trained map, fine-tuned map), real tokens only."""

    def __init__(self, n_layers: int, n_heads: int, device):
        self.sums = torch.zeros(n_layers, n_heads, dtype=torch.float64, device=device)
        self.n = 0
        self.base: dict[int, torch.Tensor] = {}
        self.valid = None

    def keep(self, layer: int, probs: torch.Tensor) -> None:
        self.base[layer] = probs * self.valid

    def compare(self, layer: int, probs: torch.Tensor) -> None:
        a, b = self.base.pop(layer), probs * self.valid
        dot = (a * b).sum((-1, -2))
        norm = (a.square().sum((-1, -2)) * b.square().sum((-1, -2))).sqrt().clamp_min(1e-12)
        self.sums[layer] += (dot / norm).sum(0).double()


def attention_change(loaded, tuned: finetune.TaskModel, data: finetune.EncodedSplit, max_examples: int, seed: int = 0,
                     batch_size: int = 32) -> tuple[np.ndarray, int]:
    """Kovaleva Fig. 5: mean cosine per (layer, head) between the pre-trained and fine-tuned maps."""
    info = loaded.info
    idx = list(range(len(data.examples)))
    if len(idx) > max_examples:
        idx = sorted(random.Random(seed).sample(idx, max_examples))
    red = CosineReducer(info.n_layers, info.n_heads, info.device)
    for batch in iter_batches([data.examples[i] for i in idx], loaded.tokenizer, info.device, batch_size):
        m = batch.token_mask
        red.valid = (m[:, None, :, None] & m[:, None, None, :]).to(torch.float32)
        inputs = batch.model_inputs(loaded.model)  # the same inputs for both encoders
        for model, observe in ((loaded.model, red.keep), (tuned.encoder, red.compare)):
            for _ in attention.forward(model, [inputs], observe=observe):
                pass
        red.n += len(batch.examples)
    return (red.sums / max(red.n, 1)).cpu().numpy(), red.n


@dataclass
class FinetunePass(GluePass):
    """The ``finetune`` family's pass."""

    batch_size: int = 64

    @functools.cached_property
    def twin(self):
        """The random-init twin fine-tuned beside the model (Table 1's "random init"), built once per pass (the
        checkpoints before the timer and the measurement read the same one); None where the tier fine-tunes no
        twin or the model is itself one."""
        if self.loaded.info.random_init_seed is None and TIERS[self.tier]["twin"]:
            from ...engine.model import random_twin

            return random_twin(self.loaded)
        return None

    def checkpoints(self) -> list[tuple[object, int]]:
        out = super().checkpoints()
        if self.twin is not None:
            out += [(self.twin, seed) for seed in TWIN_SEEDS]
        return out

    def measure(self, progress: bool):
        info = self.loaded.info
        t, dev = self.task, self.dev
        finetuned, untuned, metas = {}, {}, {}
        cos, n_cos = None, 0
        for seed in self.seeds:
            ft = self.finetuned(self.loaded, seed, progress)
            finetuned[seed] = task_scores(t, finetune.predict(ft.model, dev, self.loaded.tokenizer, self.batch_size),
                                      dev.labels, seed)
            metas[seed] = {**ft.meta, "cached": ft.cached}
            if getattr(self.loaded, "task", None) is not None:  # a classifier as given: its pre-trained encoder is not known here
                del ft
                continue
            plain = finetune.task_model(self.loaded, t, seed)  # Table 1 "pre-trained": an untrained head
            untuned[seed] = task_scores(t, finetune.predict(plain, dev, self.loaded.tokenizer, self.batch_size),
                                    dev.labels, seed)
            del plain
            if cos is None:
                cos, n_cos = attention_change(self.loaded, ft.model, dev, COSINE_MAX_EXAMPLES)
            del ft
        random_ft, twin_meta = None, {}
        if self.twin is not None:
            twin = self.twin
            random_ft = {}
            for seed in TWIN_SEEDS:
                ft = self.finetuned(twin, seed, progress)
                random_ft[seed] = task_scores(t, finetune.predict(ft.model, dev, twin.tokenizer, self.batch_size),
                                          dev.labels, seed)
                twin_meta[seed] = {**ft.meta, "cached": ft.cached}
            note = f"{twin.info.name} fine-tuned with seed(s) {list(TWIN_SEEDS)}"
        elif info.random_init_seed is not None:
            note = "the model is itself randomly initialised"
        else:
            note = f"the {self.tier} tier fine-tunes no random-init twin (--tier full does)"
        result = FinetuneResult.of(
            self, n_dev_truncated=dev.n_truncated, finetuned=finetuned, untuned=untuned,
            constant=glue.constant_scores(t, dev.labels), majority=glue.majority_score(t, dev.labels),
            random_ft=random_ft, random_note=note,
            cosine_layer=cos.mean(1) if cos is not None else None, cosine_head=cos, n_cosine=n_cos,
            train_meta=metas, twin_meta=twin_meta, labels=np.asarray(dev.labels))
        return result, {}


@family("finetune", **GLUE_FAMILY)
def prepare_finetune(loaded, data_dir: Path, corpus: str = "mrpc", limit: int | None = None, batch_size: int = 32,
                     options: dict | None = None) -> FinetunePass:
    return make_glue_pass(FinetunePass, "finetune", loaded, data_dir, corpus, limit, options)
