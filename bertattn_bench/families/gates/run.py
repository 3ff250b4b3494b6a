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
from typing import ClassVar

import numpy as np

from ...claims import learned
from ...claims.registry import family
from ...engine import attention
from ...engine.passes import timed
from ...training import glue_finetune as finetune
from ...training import head_gates as hg
from ...training import sweeps
from ...training.glue_pass import GLUE_FAMILY, GluePass, make_glue_pass, options_of, sweep_folder, task_scores
from ...training.glue_result import HeadsResult
from ..common.head_importance import head_importance, importance_data, normalize_by_layer, order_from_scores
from ..common.sweep_scoring import score_configs

# per tier: λ sweep, gate-training steps, training rows sampled (seeded), batch and Adam's rate on log_alpha. The
# quick tier's 40 steps at rate 0.2 (log_alpha can move 8 from 3, enough to close a gate at -2.4): 21 s for the
# pass on 2 idle CPU cores (80 steps at 0.1 took 855 s under a load of 8-9, ~40 s idle). The regression tier runs
# each of its 3 MRPC seeds: its first budget (5 λ x 300 steps per seed, 4,500 steps) measured 2.5 s of CPU a step
# on the 2 shared cores at load 11 (~0.25 s idle): hours there, so 4 λ x 50 steps at the quick tier's rate 0.2
# (log_alpha can move 10: a gate closes in ~27 steps), 600 steps for the 3 seeds (docs/families/gates.md)
TIERS = {
    "quick": {"lambdas": (0.05, 0.5), "steps": 40, "n_train": 256, "batch_size": 16, "lr": 0.2},
    "regression": {"lambdas": (0.02, 0.1, 0.3, 1.0), "steps": 50, "n_train": 1000, "batch_size": 16, "lr": 0.2},
    "full": {"lambdas": (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0), "steps": 600, "n_train": 2000,
             "batch_size": 16, "lr": 0.05},
}


@dataclass(kw_only=True)
class GatesResult(HeadsResult):
    """The λ sweep on each seed's checkpoint (the tier's MRPC seeds, as ``disable``/``prune``; the header:
    :class:`HeadsResult`, ``base`` the unpruned model's dev score): every per-run field has a leading seed axis,
    S seeds x K λ (``PER_SEED``: ``claims.checks.one_seed`` gives a seed's view)."""

    lambdas: list  # (K,) shared by the seeds
    n_kept: np.ndarray  # (S, K) heads kept
    scores: np.ndarray  # (S, K) dev score with the closed heads masked
    flips: np.ndarray  # (S, K, 2) (lost, gained) dev examples vs the unpruned model (classification)
    kept: np.ndarray  # (S, K, L, H) bool
    gate: np.ndarray  # (S, K, L, H) deterministic gates
    penalty: list  # per seed, per λ: the L0 penalty's log (start, every log_every steps)
    task_loss: list  # per seed, per λ
    n_train: int
    steps: int
    cached: list = field(default_factory=list)  # per seed, per λ
    seconds: dict = field(default_factory=dict)
    # Michel et al.'s curve on the same checkpoint, for the figure: heads pruned in the order of I_h (ℓ2 per layer,
    # on the gates' own training rows: the prune pass's importance sample), at every tenth and at the gates' counts
    michel_counts: list = field(default_factory=list)  # heads pruned
    michel_curve: np.ndarray | None = None  # (S, C) dev score
    PER_SEED: ClassVar[tuple[str, ...]] = HeadsResult.PER_SEED + (
        "n_kept", "scores", "flips", "kept", "gate", "penalty", "task_loss", "cached", "michel_curve")

    @property
    def n_total(self) -> int:
        return self.n_layers * self.n_heads


def trained_check(r: GatesResult, subject: str) -> learned.Check:
    """The gates' own guard, on every seed: the L0 penalty fell at the largest λ and the open-gate count differs
    across λ."""
    i = int(np.argmax(r.lambdas))
    fails, parts = 0, []
    for s, seed in enumerate(r.seeds):
        fell = r.penalty[s][i][-1] < r.penalty[s][i][0]
        moved = len(set(int(k) for k in r.n_kept[s])) > 1
        fails += not (fell and moved)
        parts.append(f"seed {seed}: L0 penalty at λ={r.lambdas[i]:g} {r.penalty[s][i][0]:.3f} -> "
                     f"{r.penalty[s][i][-1]:.3f}; heads kept by λ "
                     + ", ".join(f"{lam:g}: {int(k)}" for lam, k in zip(r.lambdas, r.n_kept[s]))
                     + ("" if fell and moved else " (the gates did not train)"))
    ok = fails == 0
    return learned.Check(subject, ok, "; ".join(parts), fails / max(len(r.seeds), 1),
                         float(np.min(r.n_kept)), float(r.n_total), r.n_total, key="gates")


def michel_counts(n_total: int, kept: list[int], steps: int = 10) -> list[int]:
    """Heads pruned at which Michel's curve is scored: every ``steps``-th of all heads (the prune family's curve,
    the authors' ``int(144 * pct / 100)``) and each gate run's count, sorted, without repeats."""
    return sorted({n_total * k // steps for k in range(steps)} | {n_total - int(k) for k in kept})


def michel_curve(model, t, train, dev, tok, counts: list[int], checkpoint: str | None = None,
                 folder: str | None = None) -> np.ndarray:
    """Michel et al.'s importance-pruning curve on ``model``: I_h on ``train`` (:func:`head_importance`, ℓ2 per
    layer), the least important heads masked first (order computed once), dev scored at each count pruned.
    ``checkpoint``: the fine-tune's key for the session's importance; ``folder``: where the sweep is kept
    (:func:`.glue_pass.sweep_folder`; :func:`.sweeps.cached_sweep`, as the disabling and pruning sweeps): a run stopped
    after some seeds' curves finds them again (stop 69's regression run was stopped with none kept)."""
    raw, _ = head_importance(model, t, train, tok, checkpoint=checkpoint)  # the prune pass's, where it ran first
    order = order_from_scores(normalize_by_layer(raw))
    logits, _, _ = sweeps.cached_sweep(folder, model, dev, tok, [order[:c] for c in counts], "mask")
    return score_configs(t, logits, dev.labels)[0]


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
        secs: dict[str, float] = {}
        recipe = hg.GateRecipe(steps=self.budget["steps"], batch_size=self.budget["batch_size"],
                               lr=self.budget["lr"])
        per_seed, n_train, read = [], 0, []
        for seed in self.seeds:  # each seed's own checkpoint and its own gates (the seed spread of the gates)
            ft = self.finetuned(self.loaded, seed, progress)
            model = ft.model
            train = importance_data(self, seed)
            n_train = len(train.examples)
            runs, s = timed(info.device, lambda: hg.gate_sweep(
                model, t, train, tok, self.budget["lambdas"], seed, recipe, self.cache_dir, info.slug,
                ft.meta.get("path")))
            secs["train"] = secs.get("train", 0.0) + s
            per_seed.append(self._score(model, runs, secs))
            read.append((ft, train))
        # one set of counts for every seed (every tenth and each seed's gate counts): the curves stack (S, C), and each
        # seed's curve holds every seed's gate counts (stop 69: per-seed counts of unequal length failed at 5 seeds)
        counts = michel_counts(L * H, [r.n_kept for p in per_seed for r in p["runs"]])
        for (ft, train), p in zip(read, per_seed):
            curve, s = timed(info.device, lambda: michel_curve(ft.model, t, train, dev, tok, counts,
                                                               ft.meta.get("path"), sweep_folder(ft)))
            secs["michel"] = secs.get("michel", 0.0) + s
            p["michel"] = curve
        result = GatesResult.of(
            self, base=np.array([p["base"] for p in per_seed]), lambdas=list(self.budget["lambdas"]),
            n_kept=np.array([[r.n_kept for r in p["runs"]] for p in per_seed], dtype=np.int64),
            scores=np.array([p["scores"] for p in per_seed]),
            flips=np.array([p["flips"] for p in per_seed], dtype=np.int64).reshape(len(per_seed), -1, 2),
            kept=np.stack([np.stack([r.kept for r in p["runs"]]) for p in per_seed]),
            gate=np.stack([np.stack([r.gate for r in p["runs"]]) for p in per_seed]),
            penalty=[[r.penalty for r in p["runs"]] for p in per_seed],
            task_loss=[[r.task_loss for r in p["runs"]] for p in per_seed], n_train=n_train, steps=recipe.steps,
            cached=[[r.cached for r in p["runs"]] for p in per_seed], seconds=secs, michel_counts=counts,
            michel_curve=np.array([p["michel"] for p in per_seed]))
        self._result = result  # the gates' own learned-model check reads it (learning)
        return result, {"seconds": secs}

    def _score(self, model, runs: list, secs: dict) -> dict:
        """One seed's dev scores: the unpruned model and, per λ run, the model with its closed heads masked."""
        t, dev, tok, device = self.task, self.dev, self.loaded.tokenizer, self.loaded.info.device
        plain = finetune.predict(model, dev, tok, batch_size=32)
        base = task_scores(t, plain, dev.labels)
        scores, flips = [], []
        for run in runs:
            logits, s = timed(device, lambda: finetune.predict(
                model, dev, tok, 32, [attention.gate_heads(hg.kept_mask(run.kept, device))]))
            secs["dev"] = secs.get("dev", 0.0) + s
            sc = task_scores(t, logits, dev.labels)
            scores.append(sc.primary)
            if t.is_regression:
                flips.append((0, 0))
            else:
                right0, right1 = base.predictions == dev.labels, sc.predictions == dev.labels
                flips.append((int((right0 & ~right1).sum()), int((~right0 & right1).sum())))
        return {"base": base.primary, "runs": runs, "scores": scores, "flips": flips}

    def learning(self, progress: bool = False) -> tuple:
        checks = super().learning(progress)
        r = getattr(self, "_result", None)
        return checks if r is None else checks + (trained_check(r, f"{self.loaded.info.name}'s head gates"),)


@family("gates", **GLUE_FAMILY)
def prepare_gates(loaded, data_dir: Path, corpus: str = "mrpc", limit: int | None = None, batch_size: int = 32,
                  options: dict | None = None) -> GatesPass:
    b = TIERS[options_of(options)[0]]
    return make_glue_pass(GatesPass, "gates", loaded, data_dir, corpus, limit, options, lambda tier, seeds: (
        f"; Hard Concrete head gates (beta {hg.BETA:.3g}, stretch {hg.LIMITS}), classifier frozen, λ in "
        f"{list(b['lambdas'])}, {b['steps']} Adam steps (lr {b['lr']:g}, batch {b['batch_size']}) on "
        f"{b['n_train']} seeded training rows, on each of the tier's seeds {list(seeds)}; closed heads masked "
        "on dev; Michel's importance curve on the same checkpoints"), budget=dict(b))
