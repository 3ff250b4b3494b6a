"""The header every GLUE pass's result shares: :class:`GlueResult` (the task, its metric, the dev examples, the seeds,
the tier: the ``finetune`` family's result builds on it) and :class:`HeadsResult`, a result over the model's heads
(its shape, one dev example's step, the unchanged model's dev score per seed: the ``disable``, ``prune`` and
``gates`` families' results build on it).

Every field is keyword-only (``kw_only``), so a subclass declares its own fields, with or without defaults, after the
header, and a result is built by name (:meth:`GlueResult.of`: the header read from the pass, the rest given).
``PER_SEED`` names the fields that hold one entry per seed (``claims.checks.one_seed`` makes a seed's view of them);
a subclass writes its own as its base's plus its own fields, ``Base.PER_SEED + (...)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..data import glue


@dataclass(kw_only=True)
class GlueResult:
    """The header of a GLUE pass's result."""

    task: str
    metric: str
    n_dev: int
    seeds: tuple[int, ...]
    tier: str
    # the fields that hold one entry per seed (claims.checks.one_seed: each seed's view, the judge's seed spread)
    PER_SEED: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def header(cls, p) -> dict:
        """The header's values for the pass ``p`` (a :class:`~.glue_pass.GluePass` whose dev set is loaded)."""
        return {"task": p.task.name, "metric": p.task.metric, "n_dev": len(p.dev.examples), "seeds": tuple(p.seeds),
                "tier": p.tier}

    @classmethod
    def of(cls, p, **fields):
        """The result of the pass ``p``: the header from ``p``, every other field from ``fields``."""
        return cls(**cls.header(p), **fields)


@dataclass(kw_only=True)
class HeadsResult(GlueResult):
    """The header of a result over the model's heads (disabled, pruned or gated in turn, on each seed's fine-tune)."""

    n_layers: int
    n_heads: int
    step: float  # one dev example's step of the score, points (nan for regression)
    base: np.ndarray  # (S,) the dev score of the fine-tuned model (nothing disabled, pruned or gated), per seed
    PER_SEED: ClassVar[tuple[str, ...]] = GlueResult.PER_SEED + ("base",)

    @classmethod
    def header(cls, p) -> dict:
        info = p.loaded.info
        return {**super().header(p), "n_layers": info.n_layers, "n_heads": info.n_heads,
                "step": glue.one_example_step(p.task, len(p.dev.examples))}

    @property
    def seed_sd(self) -> float:
        """Population sd of the fine-tuned dev score over seeds (nan with one seed)."""
        return float(np.std(self.base)) if len(self.base) > 1 else float("nan")
