"""The disable family's pass (``-k disable``): the configurations, the result, the pass (one fine-tune per seed, every
head and layer disabled in turn) and the prepare (what the cache key follows)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from ...claims.registry import family
from ...engine.attention import head_name
from ...engine.passes import timed
from ...training import glue_finetune as finetune
from ...training.glue_pass import GLUE_FAMILY, GluePass, make_glue_pass
from ...training.glue_result import HeadsResult
from ..common.sweep_scoring import (
    score_configs,
    with_base,
)


def configurations(n_layers: int, n_heads: int) -> tuple[list[list[tuple[int, int]]], list[str]]:
    """"none", every head (``layer-head``, 1-based), every layer (``L<k>``, all its heads)."""
    configs, names = [[]], ["none"]
    for layer in range(n_layers):
        for head in range(n_heads):
            configs.append([(layer, head)])
            names.append(head_name(layer, head))
    for layer in range(n_layers):
        configs.append([(layer, h) for h in range(n_heads)])
        names.append(f"L{layer + 1}")
    return configs, names


@dataclass(kw_only=True)
class DisableResult(HeadsResult):
    """Every head and every layer disabled in turn, on each seed's fine-tune (the header: :class:`HeadsResult`)."""

    head_delta: np.ndarray  # (S, L, H) score with the head disabled minus base, points
    layer_delta: np.ndarray  # (S, L)
    head_p: np.ndarray  # (S, L, H) exact McNemar p (nan for regression)
    layer_p: np.ndarray  # (S, L)
    head_flips: np.ndarray  # (S, L, H, 2) examples lost / gained
    layer_flips: np.ndarray  # (S, L, 2)
    head_with_base: np.ndarray | None = None  # (S, L, H) regression: Pearson r of the predictions with the base's
    layer_with_base: np.ndarray | None = None  # (S, L)
    sweep_seconds: list[float] = field(default_factory=list)
    plain_seconds: list[float] = field(default_factory=list)
    n_configs: int = 0
    train_meta: dict = field(default_factory=dict)
    PER_SEED: ClassVar[tuple[str, ...]] = HeadsResult.PER_SEED + (
        "head_delta", "layer_delta", "head_p", "layer_p", "head_flips", "layer_flips", "head_with_base",
        "layer_with_base", "sweep_seconds", "plain_seconds", "train_meta")

    @property
    def sweep_over_plain(self) -> float:
        """Sweep time / (configurations x one plain dev pass): the cost of the prefix-shared, row-batched sweep."""
        return float(np.sum(self.sweep_seconds) / (self.n_configs * np.sum(self.plain_seconds)))


@dataclass
class DisablePass(GluePass):
    """The ``disable`` family's pass."""

    rows_per_pass: int | None = None  # the sweep's device default (sweeps.PASS_SHAPE)

    def measure(self, progress: bool):
        info = self.loaded.info
        t, dev, tok = self.task, self.dev, self.loaded.tokenizer
        L, H = info.n_layers, info.n_heads
        configs, names = configurations(L, H)
        base, hd, ld, hp, lp, hf, lf, hw, lw, sweep_s, plain_s, metas = [], [], [], [], [], [], [], [], [], [], [], {}
        for seed in self.seeds:
            ft = self.finetuned(self.loaded, seed, progress)
            metas[seed] = {**ft.meta, "cached": ft.cached}
            plain, secs = timed(info.device, lambda: finetune.predict(ft.model, dev, tok, batch_size=32))
            plain_s.append(secs)
            logits, secs = self.sweep(ft, configs, "uniform", self.rows_per_pass, progress, f"disable {t.name}/{seed}")
            sweep_s.append(secs)
            if not np.allclose(logits[0], plain, atol=1e-4):
                raise RuntimeError(f"{t.name}: the sweep's undisabled rows disagree with the plain evaluation "
                                   f"(max |Δ logit| {np.abs(logits[0] - plain).max():.3g})")
            scores, p, flips = score_configs(t, logits, dev.labels)
            paired = with_base(t, logits)
            delta = scores - scores[0]
            base.append(scores[0])
            hd.append(delta[1:1 + L * H].reshape(L, H))
            ld.append(delta[1 + L * H:])
            hp.append(p[1:1 + L * H].reshape(L, H))
            lp.append(p[1 + L * H:])
            hf.append(flips[1:1 + L * H].reshape(L, H, 2))
            lf.append(flips[1 + L * H:])
            hw.append(paired[1:1 + L * H].reshape(L, H))
            lw.append(paired[1 + L * H:])
        result = DisableResult.of(
            self, base=np.array(base), head_delta=np.stack(hd), layer_delta=np.stack(ld), head_p=np.stack(hp),
            layer_p=np.stack(lp), head_flips=np.stack(hf), layer_flips=np.stack(lf), head_with_base=np.stack(hw),
            layer_with_base=np.stack(lw), sweep_seconds=sweep_s, plain_seconds=plain_s, n_configs=len(configs),
            train_meta=metas)
        return result, {"sweep_over_plain": result.sweep_over_plain}


@family("disable", **GLUE_FAMILY)
def prepare_disable(loaded, data_dir: Path, corpus: str = "mrpc", limit: int | None = None, batch_size: int = 32,
                    options: dict | None = None) -> DisablePass:
    n_configs = 1 + loaded.info.n_layers * (loaded.info.n_heads + 1)
    return make_glue_pass(DisablePass, "disable", loaded, data_dir, corpus, limit, options, lambda tier, seeds: (
        f"; disabling = uniform attention over real tokens, {n_configs} configurations"))
