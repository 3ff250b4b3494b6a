"""Michel et al. (the prune family): the pass (importance, the single-head and curve sweeps, the full tier's second
sweep) and its prepare."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from ...claims.registry import family
from ...data import glue
from ...engine.attention import head_name
from ...engine.passes import timed
from ...training import glue_finetune as finetune
from ...training import sweeps
from ...training.glue_pass import GLUE_FAMILY, GluePass, make_glue_pass, recipe_for
from ...training.glue_result import HeadsResult
from ..common.head_importance import head_importance, importance_data, normalize_by_layer
from ..common.sweep_scoring import score_configs
from .constants import EXTRA_SEEDS, IMPORTANCE_EXAMPLES, PARAPHRASE_STSB, RANDOM_ORDERS, STEPS, TIER_IMPORTANCE_EXAMPLES
from .measure import (
    Importance,
    auc_points,
    binarised_stsb,
    exact_pruning_steps,
    first_sweep,
    one_head_per_layer,
    random_orders,
    read_first_sweep,
    read_second_sweep,
    second_sweep,
    step_counts,
)

# ---- the pass ----------------------------------------------------------------------------------------------------

@dataclass(kw_only=True)
class PruneResult(HeadsResult):
    """Michel et al.'s importance, single-head and pruning-curve sweeps on each seed's fine-tune (the header:
    :class:`HeadsResult`)."""

    n_importance: int  # training examples behind I_h
    importance_raw: np.ndarray  # (S, L, H) mean |∂L/∂ξ_h|
    importance: np.ndarray  # (S, L, H) ℓ2-normalised per layer
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
    one_head_flips: np.ndarray | None = None  # (S, 2) the single-head model's dev examples lost, gained (classification)
    cross: dict | None = None  # MRPC: single-head Δ on STS-B dev binarised (seed 0)
    early: dict | None = None  # importance at step 0 / epoch 1 / final (seed 0)
    seconds: dict = field(default_factory=dict)
    n_configs: dict = field(default_factory=dict)
    train_meta: dict = field(default_factory=dict)
    # one entry per seed (claims.checks.one_seed), the second sweep's fields for its first seeds only
    PER_SEED: ClassVar[tuple[str, ...]] = HeadsResult.PER_SEED + (
        "importance_raw", "importance", "head_delta", "head_p", "head_flips", "curve", "curve_p", "one_head",
        "one_head_kept", "curve_exact", "curve_delta_order", "curve_random", "abo_delta", "abo_p", "one_head_best",
        "one_head_flips", "train_meta")

    @property
    def fractions(self) -> np.ndarray:
        return np.arange(len(self.counts)) / STEPS


@dataclass
class PrunePass(GluePass):
    """The ``prune`` family's pass."""

    exact: bool = False
    cross_dev: finetune.EncodedSplit | None = None
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
        first, second, imps, kept, one_best = [], [], [], [], []  # per seed (second, one_best: the extra seeds)
        metas, cross, early, n_cfg = {}, None, None, {}
        for i_seed, seed in enumerate(self.seeds):
            extras = i_seed < EXTRA_SEEDS  # this seed also runs the second sweep
            ft = self.finetuned(self.loaded, seed, progress)
            metas[seed] = {**ft.meta, "cached": ft.cached}
            model = ft.model
            imp_data = importance_data(self, seed)
            # step 1, importance: I_h on the importance examples, normalised per layer
            imp, s = timed(dv, lambda: Importance(*head_importance(model, t, imp_data, tok,
                                                                     checkpoint=ft.meta.get("path"))))
            add("importance", s)
            imps.append(imp)
            kept.append([head_name(l, h) for l, h in enumerate(imp.kept)])
            # step 2, order: the configurations of the seed's sweep (single heads, the importance curve, one head)
            blocks = first_sweep(imp, counts, H)
            n_cfg["sweep"] = len(blocks.configs)
            plain, s = timed(dv, lambda: finetune.predict(model, dev, tok, batch_size=32))
            add("plain", s)
            logits, s = self.sweep(ft, blocks.configs, "mask", self.rows_per_pass, progress, f"prune {t.name}/{seed}")
            add("sweep", s)
            if not np.allclose(logits[0], plain, atol=1e-4):
                raise RuntimeError(f"{t.name}: the sweep's unmasked rows disagree with the plain evaluation "
                                   f"(max |Δ logit| {np.abs(logits[0] - plain).max():.3g})")
            # step 3, curve: the sweep's scores read back by block
            first.append(read_first_sweep(blocks, *score_configs(t, logits, dev.labels), L, H))
            if (self.full or self.exact) and extras:
                ex = None
                if self.exact:
                    ex, s = timed(dv, lambda: exact_pruning_steps(
                        lambda masked: normalize_by_layer(head_importance(model, t, imp_data, tok, masked)[0]), L, H,
                        counts))
                    add("importance_exact", s)
                blocks2 = second_sweep(counts, L, H, ex, first[-1]["head_delta"] if self.full else None,
                                       random_orders(seed, L, H, RANDOM_ORDERS) if self.full else None)
                n_cfg["sweep2"] = len(blocks2.configs)
                logits2, s = self.sweep(ft, blocks2.configs, "mask", self.rows_per_pass, progress,
                                        f"prune+ {t.name}/{seed}")
                add("sweep2", s)
                sc2, p2, _ = score_configs(t, logits2, dev.labels)
                second.append(read_second_sweep(blocks2, sc2, p2, L, H))
                if self.full:
                    best = [int(np.argmax(row)) for row in second[-1]["abo_delta"]]  # chosen on dev, as Table 3
                    lg, s = timed(dv, lambda: sweeps.sweep(model, dev, tok, [[], one_head_per_layer(best, H)],
                                                             "mask", self.rows_per_pass))
                    add("sweep2", s)
                    one_best.append(score_configs(t, lg, dev.labels)[0][1])
            if self.full and seed == self.seeds[0]:
                if self.cross_dev is not None:
                    cross, s = timed(dv, lambda: self._cross(model, logits[:1 + L * H], dev.labels))
                    add("cross_dataset", s)
                early, s = timed(dv, lambda: self._early(t, seed, imp_data, imp.norm, progress))
                add("early_training", s)
            del ft, model

        def stack(rows: list[dict], k: str):
            return np.stack([r[k] for r in rows]) if rows and k in rows[0] else None

        result = PruneResult.of(
            self, n_importance=imps[-1].n if imps else 0,
            importance_raw=np.stack([i.raw for i in imps]) if imps else None,
            importance=np.stack([i.norm for i in imps]) if imps else None,
            base=np.array([r["base"] for r in first]), head_delta=stack(first, "head_delta"),
            head_p=stack(first, "head_p"), head_flips=stack(first, "head_flips"), counts=counts,
            curve=stack(first, "curve"), curve_p=stack(first, "curve_p"),
            one_head=np.array([r["one_head"] for r in first]), one_head_kept=kept, exact=self.exact,
            curve_exact=stack(second, "curve_exact"), curve_delta_order=stack(second, "curve_delta_order"),
            curve_random=stack(second, "curve_random"), abo_delta=stack(second, "abo_delta"),
            abo_p=stack(second, "abo_p"), one_head_best=np.array(one_best) if one_best else None,
            one_head_flips=stack(first, "one_head_flips"),
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


def _exact_requested(tier: str, exact: bool = False) -> bool:
    """Exact pruning (importance recomputed before every step): always in the full tier, else when the run asks
    (its prune_exact option, $BERTATTN_PRUNE_EXACT=1 as the face read it)."""
    return tier == "full" or bool(exact)


@family("prune", **GLUE_FAMILY)
def prepare_prune(loaded, data_dir: Path, corpus: str = "mrpc", limit: int | None = None, batch_size: int = 32,
                  options: dict | None = None) -> PrunePass:
    def adjust(s) -> dict:
        exact = _exact_requested(s.tier, (options or {}).get("prune_exact", False))
        L, H = loaded.info.n_layers, loaded.info.n_heads
        n_imp = TIER_IMPORTANCE_EXAMPLES[s.tier]
        s.desc += (f"; head masking (ξ_h = 0); importance on {n_imp} seeded training examples, "
                   f"ℓ2 per layer; sweep of {1 + L * H + STEPS} configurations{'; exact pruning' if exact else ''}")
        cross = None
        if s.tier == "full" and corpus == "mrpc" and s.reason is None:
            st = glue.task("sts-b")
            if glue.has_split(data_dir, st, "dev"):
                rows = binarised_stsb(glue.load_split(data_dir, "sts-b", "dev", limit))
                cross = finetune.encode_split(loaded.tokenizer, rows, finetune.token_budget(loaded))
                s.paths = s.paths + [glue.split_path(data_dir, st, "dev")]
                s.desc += f"; cross-set: STS-B dev binarised ({len(rows)} pairs)"
        return {"exact": exact, "cross_dev": cross, "n_importance": n_imp}

    return make_glue_pass(PrunePass, "prune", loaded, data_dir, corpus, limit, options, adjust=adjust)
