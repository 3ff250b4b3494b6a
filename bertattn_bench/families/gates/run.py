"""Voita et al. 2019 §6, "Pruning attention heads": Hard Concrete gates on every head of a fine-tuned classifier
(frozen; only the gates train: :mod:`bertattn_bench.training.head_gates`), a sweep of λ (the L0 penalty's weight),
each λ giving a number of heads kept and a dev score: the accuracy vs heads-kept curve, beside Michel et al.'s
importance-pruning curve on the same checkpoint (the ``prune`` family's pass) and the overlap (Jaccard) of the heads
each keeps at the same count.

The pass reads the **same** fine-tune as ``finetune``/``disable``/``prune`` (``GluePass``: nothing re-fine-tuned);
the gates train on a seeded sample of that fine-tune's training rows (never dev), and the dev score masks the
closed heads (gate 0) and leaves the open ones at 1. The learned-model guard adds one check: the gates trained
(the L0 penalty fell at the largest λ, and the number of open gates moved with λ), else the claims are not judged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...claims import learned
from ...claims.registry import family
from ...engine import attention
from ...engine.passes import timed
from ...training import glue_finetune as finetune
from ...training import head_gates as hg
from ...training.glue_pass import GLUE_TASKS, GluePass, prepare_glue, task_scores
from ...training.glue_pass import TIERS as GLUE_TIERS
from ..common.head_importance import importance_data

# per tier: λ sweep, gate-training steps, training rows sampled (seeded), batch and Adam's rate on log_alpha. The
# quick tier's 40 steps at rate 0.2 (log_alpha can move 8 from 3, enough to close a gate at -2.4): 21 s for the
# pass on 2 idle CPU cores (80 steps at 0.1 took 855 s under a load of 8-9, ~40 s idle)
TIERS = {
    "quick": {"lambdas": (0.05, 0.5), "steps": 40, "n_train": 256, "batch_size": 16, "lr": 0.2},
    "regression": {"lambdas": (0.01, 0.05, 0.2, 0.5, 1.0), "steps": 300, "n_train": 1000, "batch_size": 16,
                   "lr": 0.05},
    "full": {"lambdas": (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0), "steps": 600, "n_train": 2000,
             "batch_size": 16, "lr": 0.05},
}


@dataclass
class GatesResult:
    task: str
    metric: str
    n_dev: int
    n_layers: int
    n_heads: int
    seeds: tuple[int, ...]
    tier: str
    step: float  # one dev example (points)
    base: float  # the unpruned model's dev score
    lambdas: list
    n_kept: list  # per λ
    scores: list  # per λ: dev score with the closed heads masked
    flips: list  # per λ: (lost, gained) dev examples vs the unpruned model (classification)
    kept: np.ndarray  # (K, L, H) bool
    gate: np.ndarray  # (K, L, H) deterministic gates
    penalty: list  # per λ: the L0 penalty's log (start, every log_every steps)
    task_loss: list
    n_train: int
    steps: int
    cached: list = field(default_factory=list)
    seconds: dict = field(default_factory=dict)

    @property
    def n_total(self) -> int:
        return self.n_layers * self.n_heads


def trained_check(r: GatesResult, subject: str) -> learned.Check:
    """The gates' own guard: the L0 penalty fell at the largest λ and the open-gate count differs across λ."""
    i = int(np.argmax(r.lambdas))
    fell = r.penalty[i][-1] < r.penalty[i][0]
    moved = len(set(r.n_kept)) > 1
    ok = bool(fell and moved)
    text = (f"L0 penalty at λ={r.lambdas[i]:g} {r.penalty[i][0]:.3f} -> {r.penalty[i][-1]:.3f}; heads kept by λ "
            + ", ".join(f"{lam:g}: {k}" for lam, k in zip(r.lambdas, r.n_kept)))
    return learned.Check(subject, ok, text + ("" if ok else " (the gates did not train)"), 0.0 if ok else 1.0,
                         float(min(r.n_kept)), float(r.n_total), r.n_total, key="gates")


@dataclass
class GatesPass(GluePass):
    """The ``gates`` family's pass."""

    budget: dict = field(default_factory=dict)

    @property
    def n_importance(self) -> int:  # importance_data's sample size: the gates' training rows
        return int(self.budget["n_train"])

    def measure(self, progress: bool):
        t, dev, tok = self.task, self.dev, self.loaded.tokenizer
        info = self.loaded.info
        L, H = info.n_layers, info.n_heads
        seed = self.seeds[0]
        ft = self.finetuned(self.loaded, seed, progress)
        model = ft.model
        secs: dict[str, float] = {}
        train = importance_data(self, seed)
        recipe = hg.GateRecipe(steps=self.budget["steps"], batch_size=self.budget["batch_size"],
                               lr=self.budget["lr"])
        runs, secs["train"] = timed(info.device, lambda: hg.gate_sweep(
            model, t, train, tok, self.budget["lambdas"], seed, recipe, self.cache_dir, info.slug,
            ft.meta.get("path")))
        plain = finetune.predict(model, dev, tok, batch_size=32)
        base = task_scores(t, plain, dev.labels)
        scores, flips = [], []
        for run in runs:
            logits, s = timed(info.device, lambda: finetune.predict(
                model, dev, tok, 32, [attention.gate_heads(hg.kept_mask(run.kept, info.device))]))
            secs["dev"] = secs.get("dev", 0.0) + s
            sc = task_scores(t, logits, dev.labels)
            scores.append(sc.primary)
            if t.is_regression:
                flips.append((0, 0))
            else:
                right0, right1 = base.predictions == dev.labels, sc.predictions == dev.labels
                flips.append((int((right0 & ~right1).sum()), int((~right0 & right1).sum())))
        from ...data import glue

        result = GatesResult(
            task=t.name, metric=t.metric, n_dev=len(dev.examples), n_layers=L, n_heads=H, seeds=(seed,),
            tier=self.tier, step=glue.one_example_step(t, len(dev.examples)), base=base.primary,
            lambdas=[r.lam for r in runs], n_kept=[r.n_kept for r in runs], scores=scores, flips=flips,
            kept=np.stack([r.kept for r in runs]), gate=np.stack([r.gate for r in runs]),
            penalty=[r.penalty for r in runs], task_loss=[r.task_loss for r in runs], n_train=len(train.examples),
            steps=recipe.steps, cached=[r.cached for r in runs], seconds=secs)
        self._result = result  # the gates' own learned-model check reads it (learning)
        return result, {"seconds": secs}

    def learning(self, progress: bool = False) -> tuple:
        checks = super().learning(progress)
        r = getattr(self, "_result", None)
        return checks if r is None else checks + (trained_check(r, f"{self.loaded.info.name}'s head gates"),)


@family("gates", corpora=GLUE_TASKS, default_corpus="mrpc",
        tier_corpora={k: v["corpora"] for k, v in GLUE_TIERS.items()}, trains=True)
def prepare_gates(loaded, data_dir: Path, corpus: str = "mrpc", limit: int | None = None, batch_size: int = 32,
                  options: dict | None = None) -> GatesPass:
    t, dev, seeds, tier, cache_dir, paths, reason, desc = prepare_glue("gates", loaded, data_dir, corpus, limit,
                                                                      options)
    b = TIERS[tier]
    desc += (f"; Hard Concrete head gates (beta {hg.BETA:.3g}, stretch {hg.LIMITS}), classifier frozen, λ in "
             f"{list(b['lambdas'])}, {b['steps']} Adam steps (lr {b['lr']:g}, batch {b['batch_size']}) on "
             f"{b['n_train']} seeded training rows; closed heads masked on dev")
    return GatesPass("gates", corpus, desc, loaded, t, dev, seeds[:1], tier, Path(data_dir), cache_dir, paths,
                     reason, (options or {}).get("precision"), budget=dict(b))
