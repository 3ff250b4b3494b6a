"""Michel et al. §3-§4 (the prune family): pruning orders and steps, AUC; library functions unit-tested on a tiny
model (head importance from gate gradients, shared with the speed-up family: :mod:`..common.head_importance`)."""
from __future__ import annotations

import numpy as np

from ...data import glue
from ..common.head_importance import normalize_by_layer, order_from_scores
from .constants import PARAPHRASE_STSB, STEPS

# ---- the measurements (library functions, unit-tested on a tiny model) -----------------------------------------

def step_counts(n_layers: int, n_heads: int, steps: int = STEPS) -> list[int]:
    """Heads pruned at step k = 0..steps-1: floor(L·H·k/steps) (the authors' ``int(144 * pct / 100)``)."""
    total = n_layers * n_heads
    return [total * k // steps for k in range(steps)]


def delta_order(delta: np.ndarray) -> list[tuple[int, int]]:
    """The paper's dashed curve (Fig. 3): heads in order of their single-head masking Δ, the head whose removal
    costs least (largest Δ) first and the most harmful to remove (most negative Δ) last."""
    return order_from_scores(-np.asarray(delta, dtype=np.float64))


def auc_points(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """ROC AUC (points) of the logit margin (last class minus first) per configuration (axis 0 of ``logits``, shape
    (C, N, 2)): a score that a uniform shift of the decision threshold leaves unchanged (ties count half)."""
    from scipy.stats import rankdata

    y = np.asarray(labels).astype(int) == 1
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return np.full(len(logits), np.nan)
    logits = np.asarray(logits, dtype=np.float64)
    margin = logits[..., -1] - logits[..., 0]
    ranks = rankdata(margin, axis=-1)
    return 100.0 * (ranks[:, y].sum(axis=-1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def pruning_steps(order: list[tuple[int, int]], counts: list[int]) -> list[list[tuple[int, int]]]:
    """Step k masks the first ``counts[k]`` heads of ``order`` (importance computed once)."""
    return [list(order[:c]) for c in counts]


def exact_pruning_steps(score_fn, n_layers: int, n_heads: int, counts: list[int]) -> list[list[tuple[int, int]]]:
    """The authors' ``--exact_pruning``: before each step, ``score_fn(masked) -> (L, H)`` scores the model with the
    heads masked so far; the step masks the least important of the remaining heads up to ``counts[k]``."""
    masked: list[tuple[int, int]] = []
    steps = []
    for c in counts:
        if c > len(masked):
            scores = np.array(score_fn(list(masked)), dtype=np.float64)
            taken = set(masked)
            rest = [hd for hd in order_from_scores(scores) if hd not in taken]
            masked = masked + rest[:c - len(masked)]
        steps.append(list(masked))
    return steps


def all_but_one_configs(n_layers: int, n_heads: int) -> list[list[tuple[int, int]]]:
    """§3.3: for layer l and head h (l-major), every other head of layer l masked (L·H configurations)."""
    return [[(l, g) for g in range(n_heads) if g != h] for l in range(n_layers) for h in range(n_heads)]


def one_head_per_layer(keep: list[int], n_heads: int) -> list[tuple[int, int]]:
    """Every head masked except ``keep[l]`` in each layer l (a pure single-head model)."""
    return [(l, g) for l, k in enumerate(keep) for g in range(n_heads) if g != k]


def binarised_stsb(rows: list[glue.Example]) -> list[glue.Example]:
    return [glue.Example(r.text_a, r.text_b, 1.0 if r.label >= PARAPHRASE_STSB else 0.0, r.source) for r in rows]


# ---- the pass's steps (importance -> order -> sweep configurations -> curves), each a function of plain arrays ------

class ConfigBlocks:
    """A sweep's configurations in named blocks after configuration 0, the unmasked model ("none"): the scores are
    read back by block name, never by hand-kept offsets."""

    def __init__(self):
        self.configs: list[list[tuple[int, int]]] = [[]]
        self.spans: dict[str, slice] = {}

    def add(self, name: str, configs: list[list[tuple[int, int]]]) -> ConfigBlocks:
        if name in self.spans:
            raise ValueError(f"configuration block {name!r} added twice")
        start = len(self.configs)
        self.configs.extend(configs)
        self.spans[name] = slice(start, len(self.configs))
        return self

    def __contains__(self, name: str) -> bool:
        return name in self.spans

    def of(self, values: np.ndarray, name: str) -> np.ndarray:
        """``values`` (one per configuration, axis 0) of block ``name``."""
        if len(values) != len(self.configs):
            raise ValueError(f"{len(values)} values for {len(self.configs)} configurations")
        return values[self.spans[name]]

    def curve(self, scores: np.ndarray, name: str) -> np.ndarray:
        """A pruning curve from step 0: the unmasked score, then block ``name``'s (one per later step)."""
        return np.concatenate([[scores[0]], self.of(scores, name)])


class Importance:
    """One fine-tune's head importance (the pass's first step): raw I_h ``(L, H)``, the examples behind it, the
    per-layer normalised scores, the pruning order (least important first) and each layer's most important head."""

    def __init__(self, raw: np.ndarray, n: int):
        self.raw, self.n = raw, n
        self.norm = normalize_by_layer(raw)
        self.order = order_from_scores(self.norm)
        self.kept = [int(np.argmax(row)) for row in self.norm]


def first_sweep(imp: Importance, counts: list[int], n_heads: int) -> ConfigBlocks:
    """The order step: every seed's sweep, "single" (each head masked alone, l-major), "curve" (the importance
    order's steps 1..K-1, computed once) and "one_head" (only each layer's most important head kept)."""
    n_layers = len(imp.kept)
    return (ConfigBlocks()
            .add("single", [[(l, h)] for l in range(n_layers) for h in range(n_heads)])
            .add("curve", pruning_steps(imp.order, counts)[1:])
            .add("one_head", [one_head_per_layer(imp.kept, n_heads)]))


def random_orders(seed: int, n_layers: int, n_heads: int, n: int) -> list[list[tuple[int, int]]]:
    """``n`` seeded random pruning orders (chance), order r from ``default_rng(1000 * seed + r)``."""
    return [[divmod(int(i), n_heads) for i in np.random.default_rng(1000 * seed + r).permutation(n_layers * n_heads)]
            for r in range(n)]


def second_sweep(counts: list[int], n_layers: int, n_heads: int, exact_steps: list | None = None,
                 delta: np.ndarray | None = None, randoms: list | None = None) -> ConfigBlocks:
    """The extra seeds' sweep: "exact" (importance recomputed before every step, its steps 1..K-1) when given; with
    the single-head Δ (full tier) "delta_order" (the paper's dashed curve), "random<r>" per random order and "abo"
    (all but one head of a layer, l-major)."""
    blocks = ConfigBlocks()
    if exact_steps is not None:
        blocks.add("exact", exact_steps[1:])
    if delta is not None:
        blocks.add("delta_order", pruning_steps(delta_order(delta), counts)[1:])
        for r, order in enumerate(randoms or []):
            blocks.add(f"random{r}", pruning_steps(order, counts)[1:])
        blocks.add("abo", all_but_one_configs(n_layers, n_heads))
    return blocks


def read_first_sweep(blocks: ConfigBlocks, scores: np.ndarray, p: np.ndarray, flips: np.ndarray,
                     n_layers: int, n_heads: int) -> dict[str, np.ndarray]:
    """The curve step: a seed's unmasked score, single-head Δ (points), p and flips ``(L, H[, 2])``, the importance
    curve from step 0 with its McNemar p (1 at step 0) and the single-head model's score and flips (lost, gained)."""
    shape = (n_layers, n_heads)
    return {"base": scores[0], "head_delta": (blocks.of(scores, "single") - scores[0]).reshape(shape),
            "head_p": blocks.of(p, "single").reshape(shape), "head_flips": blocks.of(flips, "single").reshape(*shape, 2),
            "curve": blocks.curve(scores, "curve"), "curve_p": np.concatenate([[1.0], blocks.of(p, "curve")]),
            "one_head": blocks.of(scores, "one_head")[0], "one_head_flips": blocks.of(flips, "one_head")[0]}


def read_second_sweep(blocks: ConfigBlocks, scores: np.ndarray, p: np.ndarray, n_layers: int,
                      n_heads: int) -> dict[str, np.ndarray]:
    """The extra curves of a second sweep (those its blocks hold): exact, Δ-order and random curves from step 0, and
    each all-but-one configuration's Δ and p ``(L, H)``."""
    out = {}
    if "exact" in blocks:
        out["curve_exact"] = blocks.curve(scores, "exact")
    if "delta_order" in blocks:
        out["curve_delta_order"] = blocks.curve(scores, "delta_order")
        randoms = [name for name in blocks.spans if name.startswith("random")]
        out["curve_random"] = np.stack([blocks.curve(scores, name) for name in randoms])
        out["abo_delta"] = (blocks.of(scores, "abo") - scores[0]).reshape(n_layers, n_heads)
        out["abo_p"] = blocks.of(p, "abo").reshape(n_layers, n_heads)
    return out
