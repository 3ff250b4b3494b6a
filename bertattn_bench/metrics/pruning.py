"""Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?" (§3-§4, §6) on the fine-tuned models.

The ``prune`` family's pass, per (model, GLUE task) and every seed of the tier, on the checkpoints that the
``finetune``/``disable`` families share (``finetune.finetuned``, same recipe: no extra fine-tune):

* **Importance** (§4.1, Eq. 2): I_h = E_x |∂L(x)/∂ξ_h| with one gate ξ_h = 1 per (example, layer, head)
  (``attention.head_gate_gradients(per_example=True)``: the paper's per-example absolute value, one forward/backward
  per batch), the model in eval mode (no dropout, as the authors' ``calculate_head_importance``), over a seeded
  subset of the **training** set (``IMPORTANCE_EXAMPLES``; never the dev set, the HF bertology pitfall). The raw
  scores are kept; the default score is ℓ2-normalised per layer (Molchanov et al., the paper's §4.1; the authors'
  ``--normalize_pruning_by_layer``). The authors' code takes |·| per token position, not per example
  (michel2019-notes.md §6): we follow the paper.
* **One batched sweep** (``sweeps.sweep(kind="mask")``: ξ_h = 0 on the head's output after dropout, each batch
  row its own configuration): none, every single head (§3.2: Δ and the exact McNemar test per head), the pruning
  curve (§4.2: 10% of all heads per step, floor(L·H·k/10) heads for k = 1..9, in order of increasing importance
  computed once, as the authors' ``heads_pruning.sh``) and the model with only each layer's most important head.
* **Full tier** (a second sweep on the first seed, ``EXTRA_SEEDS``, and more passes): the curve with importance recomputed before every step on the
  masked model (the authors' ``--exact_pruning``), in the order of the single-head Δ (the paper's Fig. 3 dashed
  curve) and in 3 seeded random orders (chance); all heads but one in a layer (§3.3, Table 3: L·H
  configurations); on MRPC the single-head sweep again on STS-B dev binarised (score ≥ 4 = paraphrase: a stated
  substitute for MNLI-matched vs mismatched, §3.4); importance at fine-tuning step 0 and after epoch 1 (a stated
  substitute for §6's training from scratch).

MNLI (the paper's BERT task) is not in the shared GLUE copy: the claims run on MRPC (regression tier), RTE, STS-B and
SST-2 (full tier). STS-B is a regression task: no paired test (its significance claims skip).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .. import attention, finetune, sweeps
from ..attention import head_name
from ..batching import iter_batches
from ..data import glue
from ..passes import timed
from ..plotting import pyplot, save_figure
from ..registry import Measurement, NotApplicable, family, figure, metric
from ..stats import mann_whitney_null_se, noise_bar, rank_correlation
from .disabling import score_configs
from .finetuned import GLUE_TASKS, TIERS, GluePass, prepare_glue, recipe_for, result_of

IMPORTANCE_EXAMPLES = 1000  # seeded subset of the training set for I_h (the authors' default is all of MNLI train)
# per tier (the quick tier's smoke run: its model saw 800 train pairs)
TIER_IMPORTANCE_EXAMPLES = {"quick": 256, "regression": IMPORTANCE_EXAMPLES, "full": IMPORTANCE_EXAMPLES}
IMPORTANCE_BATCH = 32  # the authors' --train_batch_size; per-example gates make the score independent of it
STEPS = 10  # the curve: k = 0..9 tenths of all heads (the authors' MT code: i = 0..9; 100% = a constant predictor)
RANDOM_ORDERS = 3  # full tier: seeded random pruning orders (chance)
# full tier: the second sweep (recomputed importance, Δ order, random orders, all-but-one) and the per-layer best
# model run on the first seed only; the other seeds add their own single-head sweep and curve (the seed spread).
# Michel et al. report one model per task; this keeps the full tier near 1 h on 2 CPU cores instead of 2.
EXTRA_SEEDS = 1
PARAPHRASE_STSB = 4.0  # STS-B score >= 4 ("mostly equivalent") counts as a paraphrase (claims catalog)
TABLE3_BERT = [-0.01, 0.10, -0.14, -0.53, -0.29, -0.52, 0.05, -0.72, -0.96, 0.07, -0.19, -0.12]  # notes §4, points
EXACT_ENV = "BERTATTN_PRUNE_EXACT"  # "1": recompute importance before every step also in the regression tier


# ---- the measurements (library functions, unit-tested on a tiny model) -----------------------------------------

def head_importance(model: finetune.TaskModel, t: glue.Task, data: finetune.Encoded_, tokenizer,
                    masked: list[tuple[int, int]] = (), batch_size: int = IMPORTANCE_BATCH) -> tuple[np.ndarray, int]:
    """Raw I_h = mean over ``data`` of |∂L(x)/∂ξ_h| (L, H), the loss per example, ξ = 1 except the ``masked``
    heads (0: their importance is 0). Length-sorted batches with per-example gates: batching never changes a
    score. Returns (scores, n examples)."""
    n_l, n_h = attention.layers_heads(model)
    device = next(model.parameters()).device
    mask = attention.zero_heads(n_l, n_h, list(masked), device=device) if masked else None
    labels = torch.from_numpy(data.labels)

    def loss_fn(m, batch):
        with attention.attention_run(m, head_gates=mask):
            logits = m(**batch.model_inputs())
        return finetune.loss_per_example(t, logits.float(), labels[batch.positions].to(device))

    total, n = attention.head_gate_gradients(model, iter_batches(data.examples, tokenizer, device, batch_size),
                                             loss_fn, n_l, n_h, per_example=True)
    return (total / n).double().cpu().numpy(), n


def normalize_by_layer(scores: np.ndarray) -> np.ndarray:
    """Molchanov et al. / the paper's §4.1: each layer's row divided by its ℓ2 norm (a zero row stays zero)."""
    return scores / (np.linalg.norm(scores, axis=-1, keepdims=True) + 1e-20)


def step_counts(n_layers: int, n_heads: int, steps: int = STEPS) -> list[int]:
    """Heads pruned at step k = 0..steps-1: floor(L·H·k/steps) (the authors' ``int(144 * pct / 100)``)."""
    total = n_layers * n_heads
    return [total * k // steps for k in range(steps)]


def order_from_scores(scores: np.ndarray) -> list[tuple[int, int]]:
    """All heads, least important first (ties broken by layer then head)."""
    n_h = scores.shape[-1]
    flat = np.asarray(scores, dtype=np.float64).reshape(-1)
    return [divmod(int(i), n_h) for i in np.argsort(flat, kind="stable")]


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


# ---- the pass ----------------------------------------------------------------------------------------------------

@dataclass
class PruneResult:
    task: str
    metric: str
    n_dev: int
    n_layers: int
    n_heads: int
    seeds: tuple[int, ...]
    tier: str
    step: float  # one example's step on the dev set (points; nan for regression)
    n_importance: int  # training examples behind I_h
    importance_raw: np.ndarray  # (S, L, H) mean |∂L/∂ξ_h|
    importance: np.ndarray  # (S, L, H) ℓ2-normalised per layer
    base: np.ndarray  # (S,)
    head_delta: np.ndarray  # (S, L, H) points
    head_p: np.ndarray  # (S, L, H)
    head_flips: np.ndarray  # (S, L, H, 2)
    counts: list  # heads pruned per step
    curve: np.ndarray  # (S, K) score, importance order computed once
    curve_p: np.ndarray  # (S, K) McNemar vs unpruned
    one_head: np.ndarray  # (S,) score with only each layer's most important head
    one_head_kept: list  # per seed: kept head names
    exact: bool = False
    # the second sweep's arrays hold its seeds only, the first E = min(EXTRA_SEEDS, S) of ``seeds``
    curve_exact: np.ndarray | None = None  # (E, K)
    curve_delta_order: np.ndarray | None = None  # (E, K) order of increasing -Δ (the paper's dashed curve)
    curve_random: np.ndarray | None = None  # (E, R, K)
    abo_delta: np.ndarray | None = None  # (E, L, H): layer l reduced to head h
    abo_p: np.ndarray | None = None
    one_head_best: np.ndarray | None = None  # (E,) score with each layer's best all-but-one head (chosen on dev)
    cross: dict | None = None  # MRPC: single-head Δ on STS-B dev binarised (seed 0)
    early: dict | None = None  # importance at step 0 / epoch 1 / final (seed 0)
    seconds: dict = field(default_factory=dict)
    n_configs: dict = field(default_factory=dict)
    train_meta: dict = field(default_factory=dict)

    @property
    def fractions(self) -> np.ndarray:
        return np.arange(len(self.counts)) / STEPS

    @property
    def seed_sd(self) -> float:
        return float(np.std(self.base)) if len(self.base) > 1 else float("nan")


def importance_data(p: GluePass, seed: int) -> finetune.Encoded_:
    """The head-importance examples of pass ``p``'s fine-tune with ``seed``: a seeded subset of ``p.n_importance``
    of the training rows the model was fine-tuned on (never dev)."""
    rows = finetune.training_rows(p.data_dir, p.task.name, recipe_for(p.task.name, p.tier), seed)
    if len(rows) > p.n_importance:
        keep = np.random.default_rng(10_000 + seed).choice(len(rows), p.n_importance, replace=False)
        rows = [rows[i] for i in sorted(keep)]
    return finetune.encode_split(p.loaded.tokenizer, rows, min(finetune.Recipe().max_tokens, p.loaded.info.max_positions))


@dataclass
class PrunePass(GluePass):
    """The ``prune`` family's pass."""

    exact: bool = False
    cross_dev: finetune.Encoded_ | None = None
    n_importance: int = IMPORTANCE_EXAMPLES
    rows_per_pass: int | None = None  # the sweep's device default (sweeps.PASS_SHAPE)

    @property
    def full(self) -> bool:
        return self.tier == "full"

    def measure(self, progress: bool):
        info = self.loaded.info
        t, dev, tok, dv = self.task, self.dev, self.loaded.tokenizer, info.device
        L, H = info.n_layers, info.n_heads
        counts = step_counts(L, H)
        secs: dict[str, float] = {}
        add = lambda k, s: secs.__setitem__(k, secs.get(k, 0.0) + s)  # noqa: E731
        acc = {k: [] for k in ("raw", "imp", "base", "hd", "hp", "hf", "curve", "curve_p", "one", "kept", "exact",
                               "dorder", "random", "abo", "abo_p", "one_best")}
        metas, cross, early, n_imp, n_cfg = {}, None, None, 0, {}
        for i_seed, seed in enumerate(self.seeds):
            extras = i_seed < EXTRA_SEEDS  # this seed also runs the second sweep
            ft = self.finetuned(self.loaded, seed, progress)
            metas[seed] = {**ft.meta, "cached": ft.cached}
            model = ft.model
            imp_data = importance_data(self, seed)
            (raw, n_imp), s = timed(dv, lambda: head_importance(model, t, imp_data, tok))
            add("importance", s)
            norm = normalize_by_layer(raw)
            order = order_from_scores(norm)
            curve_cfgs = pruning_steps(order, counts)[1:]  # step 0 = "none"
            kept = [int(np.argmax(norm[l])) for l in range(L)]
            configs = [[]] + [[(l, h)] for l in range(L) for h in range(H)] + curve_cfgs + [one_head_per_layer(kept, H)]
            n_cfg["sweep"] = len(configs)
            plain, s = timed(dv, lambda: finetune.predict(model, dev, tok, batch_size=32))
            add("plain", s)
            logits, s = timed(dv, lambda: sweeps.sweep(model, dev, tok, configs, "mask", self.rows_per_pass,
                                                         progress=progress, desc=f"prune {t.name}/{seed}"))
            add("sweep", s)
            if not np.allclose(logits[0], plain, atol=1e-4):
                raise RuntimeError(f"{t.name}: the sweep's unmasked rows disagree with the plain evaluation "
                                   f"(max |Δ logit| {np.abs(logits[0] - plain).max():.3g})")
            scores, p, flips = score_configs(t, logits, dev.labels)
            single = slice(1, 1 + L * H)
            cstart = 1 + L * H
            acc["raw"].append(raw)
            acc["imp"].append(norm)
            acc["base"].append(scores[0])
            delta = (scores[single] - scores[0]).reshape(L, H)
            acc["hd"].append(delta)
            acc["hp"].append(p[single].reshape(L, H))
            acc["hf"].append(flips[single].reshape(L, H, 2))
            acc["curve"].append(np.concatenate([[scores[0]], scores[cstart:cstart + len(curve_cfgs)]]))
            acc["curve_p"].append(np.concatenate([[1.0], p[cstart:cstart + len(curve_cfgs)]]))
            acc["one"].append(scores[-1])
            acc["kept"].append([head_name(l, h) for l, h in enumerate(kept)])
            if self.exact and extras:
                ex, s = timed(dv, lambda: exact_pruning_steps(
                    lambda masked: normalize_by_layer(head_importance(model, t, imp_data, tok, masked)[0]), L, H,
                    counts))
                add("importance_exact", s)
            if (self.full or self.exact) and extras:
                more = []
                if self.exact:
                    more += ex[1:]
                if self.full:
                    more += pruning_steps(delta_order(delta), counts)[1:]
                    for r in range(RANDOM_ORDERS):
                        perm = np.random.default_rng(1000 * seed + r).permutation(L * H)
                        more += pruning_steps([divmod(int(i), H) for i in perm], counts)[1:]
                    more += all_but_one_configs(L, H)
                n_cfg["sweep2"] = 1 + len(more)
                logits2, s = timed(dv, lambda: sweeps.sweep(model, dev, tok, [[]] + more, "mask", self.rows_per_pass,
                                                              progress=progress, desc=f"prune+ {t.name}/{seed}"))
                add("sweep2", s)
                sc2, p2, _ = score_configs(t, logits2, dev.labels)
                pos, k1 = 1, len(counts) - 1
                with_base = lambda a: np.concatenate([[sc2[0]], a])  # noqa: E731
                if self.exact:
                    acc["exact"].append(with_base(sc2[pos:pos + k1]))
                    pos += k1
                if self.full:
                    acc["dorder"].append(with_base(sc2[pos:pos + k1]))
                    pos += k1
                    acc["random"].append(np.stack([with_base(sc2[pos + r * k1:pos + (r + 1) * k1])
                                                   for r in range(RANDOM_ORDERS)]))
                    pos += RANDOM_ORDERS * k1
                    abo = (sc2[pos:pos + L * H] - sc2[0]).reshape(L, H)
                    acc["abo"].append(abo)
                    acc["abo_p"].append(p2[pos:pos + L * H].reshape(L, H))
                    best = [int(np.argmax(abo[l])) for l in range(L)]  # chosen on dev, as Table 3
                    lg, s = timed(dv, lambda: sweeps.sweep(model, dev, tok, [[], one_head_per_layer(best, H)],
                                                             "mask", self.rows_per_pass))
                    add("sweep2", s)
                    acc["one_best"].append(score_configs(t, lg, dev.labels)[0][1])
            if self.full and seed == self.seeds[0]:
                if self.cross_dev is not None:
                    cross, s = timed(dv, lambda: self._cross(model, logits[:1 + L * H], dev.labels))
                    add("cross_dataset", s)
                early, s = timed(dv, lambda: self._early(t, seed, imp_data, norm, progress))
                add("early_training", s)
            del ft, model
        stack = lambda k: np.stack(acc[k]) if acc[k] else None  # noqa: E731
        result = PruneResult(
            task=t.name, metric=t.metric, n_dev=len(dev.examples), n_layers=L, n_heads=H, seeds=self.seeds,
            tier=self.tier, step=glue.one_example_step(t, len(dev.examples)), n_importance=n_imp,
            importance_raw=stack("raw"), importance=stack("imp"), base=np.array(acc["base"]),
            head_delta=stack("hd"), head_p=stack("hp"), head_flips=stack("hf"), counts=counts,
            curve=stack("curve"), curve_p=stack("curve_p"), one_head=np.array(acc["one"]), one_head_kept=acc["kept"],
            exact=self.exact, curve_exact=stack("exact"), curve_delta_order=stack("dorder"),
            curve_random=stack("random"), abo_delta=stack("abo"), abo_p=stack("abo_p"),
            one_head_best=np.array(acc["one_best"]) if acc["one_best"] else None,
            cross=cross, early=early, seconds=secs, n_configs=n_cfg, train_meta=metas)
        return result, {"seconds": secs}

    def _cross(self, model, own_logits: np.ndarray, own_labels: np.ndarray) -> dict:
        """§3.4 substitute: the single-head sweep of this (MRPC) model on STS-B dev binarised; beside the accuracy Δ,
        the Δ of the margin's ROC AUC on both sets (``own_logits``: this task's none + single-head rows), which a
        shift of the decision bias leaves alone (the two sets' class balances differ)."""
        t = glue.task("mrpc")
        L, H = self.loaded.info.n_layers, self.loaded.info.n_heads
        configs = [[]] + [[(l, h)] for l in range(L) for h in range(H)]
        logits = sweeps.sweep(model, self.cross_dev, self.loaded.tokenizer, configs, "mask", self.rows_per_pass)
        scores, p, _ = score_configs(t, logits, self.cross_dev.labels)
        auc, own_auc = auc_points(logits, self.cross_dev.labels), auc_points(own_logits, own_labels)
        return {"set": f"STS-B dev binarised (score >= {PARAPHRASE_STSB:g} = paraphrase)",
                "n": len(self.cross_dev.examples), "base": float(scores[0]),
                "positives": int(self.cross_dev.labels.sum()),
                "head_delta": (scores[1:] - scores[0]).reshape(L, H), "head_p": p[1:].reshape(L, H),
                "auc_base": float(auc[0]), "own_auc_base": float(own_auc[0]),
                "head_auc_delta": (auc[1:] - auc[0]).reshape(L, H),
                "own_head_auc_delta": (own_auc[1:] - own_auc[0]).reshape(L, H)}

    def _early(self, t, seed, imp_data, final, progress) -> dict:
        """§6 substitute: I_h of the same fine-tuning run at step 0 (pre-trained encoder, untrained head) and after
        epoch 1 (the seeded trainer makes it the run's own epoch-1 state), beside the final model's."""
        tok = self.loaded.tokenizer
        out = {}
        m0 = finetune.task_model(self.loaded, t, seed)
        out["step0"] = normalize_by_layer(head_importance(m0, t, imp_data, tok)[0])
        recipe = recipe_for(t.name, self.tier)
        rows = finetune.training_rows(self.data_dir, t.name, recipe, seed)
        data = finetune.encode_split(tok, rows, recipe.max_tokens)
        finetune.train(m0, t, data, tok, recipe, seed, None, progress, f"epoch 1 {t.name}/{seed}",
                       stop_after_epoch=1)
        out["epoch1"] = normalize_by_layer(head_importance(m0, t, imp_data, tok)[0])
        out["final"] = final
        return out


def _exact_requested(tier: str) -> bool:
    return tier == "full" or os.environ.get(EXACT_ENV, "") == "1"


@family("prune", corpora=GLUE_TASKS, default_corpus="mrpc",
        tier_corpora={k: v["corpora"] for k, v in TIERS.items()}, trains=True)
def prepare_prune(loaded, data_dir: Path, corpus: str = "mrpc", limit: int | None = None, batch_size: int = 32,
                  options: dict | None = None) -> PrunePass:
    t, dev, seeds, tier, cache_dir, paths, reason, desc = prepare_glue("prune", loaded, data_dir, corpus, limit,
                                                                      options)
    exact = _exact_requested(tier)
    L, H = loaded.info.n_layers, loaded.info.n_heads
    n_imp = TIER_IMPORTANCE_EXAMPLES[tier]
    desc += (f"; head masking (ξ_h = 0); importance on {n_imp} seeded training examples, "
             f"ℓ2 per layer; sweep of {1 + L * H + STEPS} configurations{'; exact pruning' if exact else ''}")
    cross = None
    if tier == "full" and corpus == "mrpc" and reason is None:
        st = glue.task("sts-b")
        if glue.has_split(data_dir, st, "dev"):
            rows = binarised_stsb(glue.load_split(data_dir, "sts-b", "dev", limit))
            cross = finetune.encode_split(loaded.tokenizer, rows, min(finetune.Recipe().max_tokens,
                                                                      loaded.info.max_positions))
            paths = paths + [glue.split_path(data_dir, st, "dev")]
            desc += f"; cross-set: STS-B dev binarised ({len(rows)} pairs)"
    return PrunePass("prune", corpus, desc, loaded, t, dev, seeds, tier, Path(data_dir), cache_dir, paths, reason,
                     exact=exact, cross_dev=cross, n_importance=n_imp)


# ---- claim metrics (named by reference_numbers/michel2019_prune.toml) ------------------------------------------

def _res(pr) -> PruneResult:
    return result_of(pr)


def _classification(r: PruneResult, what: str) -> None:
    if r.metric != "acc":
        raise NotApplicable(f"{r.task} is scored by {r.metric} (regression): no paired per-example test for {what}")


def _noise(r: PruneResult, seed_sd: dict | None) -> tuple[float, str]:
    """The noise bar of a curve (:func:`stats.noise_bar`): one example's step and the seed sd of the fine-tuned
    score (measured with >= 2 seeds, else the value recorded in the claim file from the full tier)."""
    step = 0.0 if np.isnan(r.step) else r.step
    bar, sd, where = noise_bar(step, r.seeds, r.seed_sd if len(r.seeds) > 1 else float("nan"), r.task, seed_sd)
    return bar, f"one example {step:.2f}, seed sd {sd:.2f} ({where})"


def _curve_txt(r: PruneResult, curve: np.ndarray) -> str:
    return ", ".join(f"{int(100 * f)}% ({c}) {v:.1f}" for f, c, v in zip(r.fractions, r.counts, curve))


@metric("michel_not_significant_share")
def michel_not_significant_share(pr, alpha: float = 0.01) -> Measurement:
    """§3.2: the share (%) of heads whose masking alone changes the dev predictions not significantly (exact
    McNemar p >= alpha), mean over seeds."""
    r = _res(pr)
    _classification(r, "single heads")
    shares, parts = [], []
    for s, seed in enumerate(r.seeds):
        sig = r.head_p[s] < alpha
        up = int((sig & (r.head_delta[s] > 0)).sum())
        shares.append(100.0 * float((~sig).mean()))
        worst = np.unravel_index(int(np.argmin(r.head_delta[s])), r.head_delta[s].shape)
        best = np.unravel_index(int(np.argmax(r.head_delta[s])), r.head_delta[s].shape)
        parts.append(f"seed {seed}: {int(sig.sum())} of {sig.size} significant ({up} of them gains); worst "
                     f"{head_name(*worst)} {r.head_delta[s][worst]:+.2f} (p {r.head_p[s][worst]:.2g}), best "
                     f"{head_name(*best)} {r.head_delta[s][best]:+.2f} (p {r.head_p[s][best]:.2g}); "
                     f"{int((r.head_delta[s] > 0).sum())} heads above base")
    return Measurement(float(np.mean(shares)), r.n_dev, "dev examples", unit="% of heads",
                       detail=f"{r.task} base {np.mean(r.base):.2f}, one example = {r.step:.2f} points; "
                              + "; ".join(parts))


@metric("michel_all_but_one_share")
def michel_all_but_one_share(pr, max_drop: float = 1.0) -> Measurement:
    """§3.3, Table 3: per layer, every head but one masked; the best kept head's Δ (chosen on dev, as Table 3).
    Value: the share (%) of layers whose best Δ >= -max_drop points, mean over seeds."""
    r = _res(pr)
    if r.abo_delta is None:
        raise NotApplicable(f"the all-but-one sweep (L·H = {r.n_layers * r.n_heads} configurations) runs in "
                            f"--tier full (this pass: {r.tier})")
    best = r.abo_delta.max(-1)  # (S, L)
    arg = r.abo_delta.argmax(-1)
    share = float((best >= -max_drop).mean()) * 100
    s0 = r.seeds[0]
    rows = []
    for l in range(r.n_layers):
        h = int(arg[0, l])
        p = r.abo_p[0, l, h]
        ptxt = "" if np.isnan(p) else f" p {p:.2g}"
        rows.append(f"L{l + 1} {head_name(l, h)} {best[:, l].mean():+.2f}{ptxt}")
    sig = "" if np.isnan(r.abo_p).all() else (
        f"; layers whose best is significant (p < 0.01, seed {s0}): "
        f"{int((np.take_along_axis(r.abo_p[0], arg[0][:, None], 1)[:, 0] < 0.01).sum())} of {r.n_layers}")
    return Measurement(share, r.n_dev, "dev examples", unit="% of layers",
                       detail=f"{r.task}, best kept head per layer (seed {s0}) and Δ mean over seeds "
                              f"{list(r.seeds[:len(r.abo_delta)])}: "
                              + ", ".join(rows) + sig + "; paper Table 3 (bert-base, MNLI-m, %): "
                              + " ".join(f"L{i + 1} {v:+.2f}" for i, v in enumerate(TABLE3_BERT)))


@metric("michel_importance_vs_delta")
def michel_importance_vs_delta(pr) -> Measurement:
    """§4.1: Spearman between the per-layer-normalised I_h and -Δ_h (single head masked), over all heads, mean
    over seeds; the raw (unnormalised) scores' Spearman in the detail."""

    r = _res(pr)
    rhos, parts = [], []
    for s, seed in enumerate(r.seeds):
        d = -r.head_delta[s].reshape(-1)
        if np.std(d) == 0:
            raise NotApplicable(f"seed {seed}: masking any single head changes no dev score: nothing to rank")
        rho, p = rank_correlation(r.importance[s], d)
        raw, _ = rank_correlation(r.importance_raw[s], d)
        rhos.append(float(rho))
        top = np.unravel_index(int(np.argmax(r.importance[s])), r.importance[s].shape)
        parts.append(f"seed {seed}: ρ {rho:.3f} (p {p:.2g}), raw scores ρ {raw:.3f}; most important {head_name(*top)}")
    return Measurement(float(np.mean(rhos)), r.n_layers * r.n_heads, "heads", unit="Spearman ρ",
                       detail=f"{r.task}: I_h on {r.n_importance} training examples, Δ on {r.n_dev} dev examples; "
                              + "; ".join(parts))


def _prunable(r: PruneResult, curve: np.ndarray, tol: float) -> float:
    """The largest nominal fraction k/10 with every step up to it within -tol of the unpruned score."""
    ok = 0.0
    for f, v in zip(r.fractions, curve):
        if v - curve[0] < -tol:
            break
        ok = float(f)
    return ok


@metric("michel_prunable_fraction")
def michel_prunable_fraction(pr, max_drop: float = 1.0, seed_sd: dict | None = None) -> Measurement:
    """§4.2: the largest nominal fraction of heads pruned (10% steps, importance order computed once) whose score
    stays within max(max_drop, noise) of the unpruned model at every step up to it; curve = mean over seeds."""
    r = _res(pr)
    bar, how = _noise(r, seed_sd)
    tol = max(max_drop, bar)
    curve = r.curve.mean(0)
    frac = _prunable(r, curve, tol)
    extra = ""
    if r.curve_exact is not None:
        extra += f"; importance recomputed each step: {_prunable(r, r.curve_exact.mean(0), tol):.1f}"
    if r.curve_random is not None:
        extra += f"; random orders: {np.mean([_prunable(r, c, tol) for c in r.curve_random.reshape(-1, len(r.counts))]):.2f} (mean)"
    return Measurement(frac, r.n_dev, "dev examples", unit="fraction of heads",
                       detail=f"{r.task} {r.metric} by heads pruned (of {r.n_layers * r.n_heads}): {_curve_txt(r, curve)};"
                              f" allowed drop {tol:.2f} = max({max_drop}, noise: {how}){extra}")


@metric("michel_delta_at_fraction")
def michel_delta_at_fraction(pr, fraction: float = 0.4) -> Measurement:
    """Δ (points) at the nominal pruning step ``fraction`` (importance order computed once), mean over seeds."""
    r = _res(pr)
    k = int(round(fraction * STEPS))
    d = r.curve[:, k] - r.curve[:, 0]
    return Measurement(float(d.mean()), r.n_dev, "dev examples", unit="points",
                       detail=f"{r.task}: {r.counts[k]} of {r.n_layers * r.n_heads} heads pruned: "
                              + ", ".join(f"seed {s} {x:+.2f}" for s, x in zip(r.seeds, d))
                              + f"; McNemar p {', '.join(f'{x:.2g}' for x in r.curve_p[:, k])}")


@metric("michel_single_head_model")
def michel_single_head_model(pr) -> Measurement:
    """Δ (points) of the model reduced to one head per layer in every layer at once (the most important head by
    I_h kept), mean over seeds; the best-per-layer heads from the all-but-one sweep in the detail (full tier)."""
    r = _res(pr)
    d = r.one_head - r.base
    extra = ""
    if r.one_head_best is not None:
        e = len(r.one_head_best)
        extra = (f"; with each layer's best all-but-one head (chosen on dev; seeds {list(r.seeds[:e])}) "
                 f"{np.mean(r.one_head_best - r.base[:e]):+.2f}")
    return Measurement(float(d.mean()), r.n_dev, "dev examples", unit="points",
                       detail=f"{r.task} base {np.mean(r.base):.2f}; {r.n_layers} of {r.n_layers * r.n_heads} heads kept "
                              f"(seed {r.seeds[0]}: {', '.join(r.one_head_kept[0])}): "
                              + ", ".join(f"seed {s} {x:+.2f}" for s, x in zip(r.seeds, d)) + extra)


@metric("michel_cross_set_correlation")
def michel_cross_set_correlation(pr, min_auc_z: float = 2.0) -> Measurement:
    """§3.4: Pearson r (the paper's) between the single-head Δ on this task's dev set and on a second evaluation
    set of the same model (MRPC: STS-B dev binarised), seed 0. The Δ is the margin's ROC AUC, not accuracy: the two
    sets' class balances differ (MRPC dev 68% paraphrases, STS-B >= 4 18%), so a head that only moves the decision
    bias gains accuracy on one and loses it on the other; the accuracy r (the paper's score, same-distribution sets
    there) is in the detail. NaN (does not hold) unless the unmasked model's AUC on the second set exceeds chance by
    ``min_auc_z`` null SEs (Mann-Whitney: sqrt((n1 + n2 + 1) / (12 n1 n2))): heads cannot "matter on another set"
    where the model does not do the task at all (the random-init twin: AUC 47.9 on STS-B, r 0.35 from noise)."""

    r = _res(pr)
    if r.cross is None:
        why = ("runs in --tier full (one more single-head sweep of the 1,500 STS-B dev pairs)" if r.tier != "full"
               else "needs STS-B dev (MRPC pass only)")
        raise NotApplicable(f"the second evaluation set {why}; MNLI matched/mismatched is not in the data")
    c = r.cross
    a, b = c["own_head_auc_delta"].reshape(-1), c["head_auc_delta"].reshape(-1)
    acc_a, acc_b = r.head_delta[0].reshape(-1), c["head_delta"].reshape(-1)
    if np.std(a) == 0 or np.std(b) == 0:
        raise NotApplicable("no single head changes a score on one of the sets")
    rr, p = rank_correlation(a, b, "pearson")
    rho, _ = rank_correlation(a, b)
    acc = (f"{rank_correlation(acc_a, acc_b, 'pearson')[0]:.3f} (Spearman {rank_correlation(acc_a, acc_b)[0]:.3f})"
           if np.std(acc_a) > 0 and np.std(acc_b) > 0 else "undefined (a constant Δ)")
    n_pos, n_neg = int(c["positives"]), int(c["n"]) - int(c["positives"])
    floor = 50 + min_auc_z * 100 * mann_whitney_null_se(n_pos, n_neg)  # AUC in points
    transfers = c["auc_base"] > floor
    return Measurement(float(rr) if transfers else float("nan"), r.n_layers * r.n_heads, "heads",
                       unit="Pearson r of Δ AUC",
                       detail=f"{r.task} dev ({r.n_dev}, accuracy {r.base[0]:.2f}, AUC {c['own_auc_base']:.2f}) vs "
                              f"{c['set']} ({c['n']} pairs, {c['positives']} positive, accuracy {c['base']:.2f}, AUC "
                              f"{c['auc_base']:.2f}): per-head Δ of the margin's ROC AUC r {rr:.3f} (p {p:.2g}), "
                              f"Spearman {rho:.3f}; per-head accuracy Δ (the paper's score) r {acc}; seed {r.seeds[0]}"
                              + ("" if transfers else f"; NaN: the model's AUC on {c['set']} is not above chance + "
                                 f"{min_auc_z:g} SE ({floor:.2f}), so no head can matter there"))


@metric("michel_early_importance")
def michel_early_importance(pr) -> Measurement:
    """§6 substitute: Spearman(I after epoch 1, I final) - Spearman(I at step 0, I final), seed 0."""

    r = _res(pr)
    if r.early is None:
        raise NotApplicable(f"importance at fine-tuning checkpoints needs one more epoch of fine-tuning: --tier full "
                            f"(this pass: {r.tier})")
    f = r.early["final"].reshape(-1)
    r1 = rank_correlation(r.early["epoch1"], f)[0]
    r0 = rank_correlation(r.early["step0"], f)[0]
    return Measurement(r1 - r0, r.n_layers * r.n_heads, "heads", unit="Δ Spearman ρ",
                       detail=f"{r.task} seed {r.seeds[0]}: ρ(epoch 1, final) {r1:.3f}, ρ(step 0, final) {r0:.3f}; "
                              f"I_h on {r.n_importance} training examples")


@metric("michel_importance_beats_random")
def michel_importance_beats_random(pr) -> Measurement:
    """Beyond the paper: mean score over the curve's steps (area, points) in importance order minus the mean over
    random orders, mean over seeds."""
    r = _res(pr)
    if r.curve_random is None:
        raise NotApplicable(f"random pruning orders run in --tier full (this pass: {r.tier})")
    imp = r.curve[:len(r.curve_random)].mean(-1)  # the seeds that ran the random orders
    rnd = r.curve_random.mean(-1).mean(-1)
    dorder = f"; single-head-Δ order {r.curve_delta_order.mean():.2f}" if r.curve_delta_order is not None else ""
    return Measurement(float((imp - rnd).mean()), r.n_dev, "dev examples", unit="points (curve mean)",
                       detail=f"{r.task} (seeds {list(r.seeds[:len(rnd)])}): mean over 0-90% pruned, importance order "
                              f"{imp.mean():.2f}, {RANDOM_ORDERS} random "
                              f"orders {rnd.mean():.2f}{dorder}; curves: importance {_curve_txt(r, r.curve.mean(0))}; "
                              f"random {_curve_txt(r, r.curve_random.mean((0, 1)))}")


# ---- figures ------------------------------------------------------------------------------------------------------

def _seeds_label(seeds) -> str:
    seeds = list(seeds)
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"mean of seeds {', '.join(map(str, seeds))}"


@figure("prune")
def prune_figures(pass_results, directory: Path) -> list[Path]:
    """The pruning curves (Fig. 3: importance order; full tier: recomputed, single-head-Δ order, random orders),
    the single-head Δ histogram (Fig. 1b) and the importance heatmap, one PNG per model and task."""
    plt = pyplot()
    paths = []
    for pr in pass_results:
        r = pr.result
        if not isinstance(r, PruneResult):
            continue
        fig, (ax, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 4.2), gridspec_kw={"width_ratios": [4, 3, 3]})
        x = 100 * r.fractions
        ax.plot(x, r.curve.mean(0), "o-", label=f"importance I_h (once), {_seeds_label(r.seeds)}")
        # the full tier's second sweep (recomputed, Δ order, random orders) runs on the first seed(s) only: label
        # which, and draw the I_h curve of those same seeds beside them so the orders are compared like for like
        second = [c for c in (r.curve_exact, r.curve_delta_order, r.curve_random) if c is not None]
        e = len(second[0]) if second else 0
        of_second = _seeds_label(r.seeds[:e]) if e else ""
        if e and e < len(r.curve):
            ax.plot(x, r.curve[:e].mean(0), "o:", color="tab:blue", alpha=0.6,
                    label=f"importance I_h (once), {of_second}")
        if r.curve_exact is not None:
            ax.plot(x, r.curve_exact.mean(0), "s-", label=f"I_h recomputed each step, {of_second}")
        if r.curve_delta_order is not None:
            ax.plot(x, r.curve_delta_order.mean(0), "--", label=f"single-head Δ order, {of_second}")
        if r.curve_random is not None:
            rnd = r.curve_random.reshape(-1, len(r.counts))
            ax.fill_between(x, rnd.min(0), rnd.max(0), color="0.8",
                            label=f"random orders (range of {len(rnd)}), {of_second}")
        ax.axhline(r.base.mean() - 1, color="0.5", ls=":", lw=0.8, label="base - 1 point")
        ax.set_xlabel("heads pruned (%)")
        ax.set_ylabel(f"dev {r.metric}")
        ax.legend(fontsize=7)
        ax.set_title("pruning curve (Michel Fig. 3)", fontsize=9)
        d = r.head_delta.reshape(-1)
        sig = (r.head_p.reshape(-1) < 0.01) if not np.isnan(r.head_p).all() else np.zeros(d.size, dtype=bool)
        bins = 20
        ax2.hist([d[~sig], d[sig]], bins=bins, stacked=True, label=["p >= 0.01", "p < 0.01"],
                 color=["tab:blue", "tab:red"])
        ax2.axvline(0, color="k", ls="--", lw=0.8)
        ax2.set_xlabel(f"Δ {r.metric} (points), one head masked")
        ax2.set_ylabel("heads (all seeds)")
        ax2.legend(fontsize=7)
        ax2.set_title("single-head masking (Fig. 1b)", fontsize=9)
        im = ax3.imshow(r.importance.mean(0), aspect="auto", cmap="viridis")
        ax3.set_xticks(range(r.n_heads), [str(h + 1) for h in range(r.n_heads)], fontsize=7)
        ax3.set_yticks(range(r.n_layers), [str(l + 1) for l in range(r.n_layers)], fontsize=7)
        ax3.set_xlabel("head")
        ax3.set_ylabel("layer")
        fig.colorbar(im, ax=ax3, label="I_h / ||I_layer||")
        ax3.set_title(f"importance ({r.n_importance} train examples)", fontsize=9)
        fig.suptitle(f"{pr.model.name} / {r.task} dev (n = {r.n_dev}), seeds {list(r.seeds)}: Michel et al. 2019",
                     fontsize=9)
        paths.append(save_figure(fig, directory, f"prune-{pr.model.slug}-{r.task}.png"))
    return paths
