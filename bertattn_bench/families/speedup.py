"""Michel et al. 2019 §4.3, Table 4: does removing half the heads make inference faster?

The ``speedup`` family's pass, per (model, GLUE task): the fine-tuned checkpoint of seed 0 (the finetune/disable
families' cache: no extra fine-tune), its heads ranked by Michel's importance (ℓ2-normalised per layer, on
``IMPORTANCE_EXAMPLES`` seeded training examples, never dev: only which heads go matters here, not the curve), the
least important ``FRACTION`` of all heads removed from the weights (:func:`bertattn_bench.engine.head_removal.prune_heads`;
masking gives no speed-up), a check that the pruned model's logits equal the masked model's on the timed examples,
then forward passes over the same dev examples at batch 1, 16 and 64, pruned and unpruned interleaved round by
round (the order alternating; one untimed warm-up pass each), the device synchronised around every timing
(:func:`passes.timed`). Speed-up = fastest unpruned round / fastest pruned round - 1 (per-round ratios in the detail).

The paper: bert-base on MNLI, 50% of heads removed, a GTX 1080Ti: +1.9% at batch 1, +17.5% at batch 16 and 64.
Timings belong to the machine they were taken on (cores, threads, load): they are reported with the device and
thread count, and the recorded value's tolerance is wide.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..base.plotting import save_figure
from ..claims.registry import Measurement, NotApplicable, family, figure, metric
from ..engine import attention
from ..engine import head_removal as head_pruning
from ..engine.batching import iter_batches
from ..engine.passes import timed
from ..training import glue_finetune as finetune
from ..training.glue_pass import GLUE_TASKS, GluePass, make_glue_pass, result_of
from .common.head_importance import head_importance, importance_data, normalize_by_layer, order_from_scores

FRACTION = 0.5  # Table 4: 50% of heads removed
BATCH_SIZES = (1, 16, 64)  # Table 4's batch sizes (1, 4, 16, 64; 4 left out to save time)
IMPORTANCE_EXAMPLES = 256  # the ranking only decides which heads go
TIERS = {"quick": {"examples": 64, "rounds": 4}, "regression": {"examples": 128, "rounds": 3}, "full": {"examples": None, "rounds": 7}}  # None: the whole dev set; quick 4 rounds since stop 60 (2 gave +4.6 once: docs/tolerances.md#michelprune_speedup)
EXACT_ATOL = 1e-4


@dataclass
class SpeedResult:
    task: str
    n_examples: int  # dev examples timed per pass
    n_layers: int
    n_heads: int
    pruned: list  # head names removed
    heads_per_layer: list
    emptied_layers: list
    params_before: int
    params_after: int
    max_logit_diff: float  # pruned vs masked, on the timed examples
    rounds: int
    seconds: dict  # {batch: {"full": [s per round], "pruned": [...]}}
    device: str
    threads: int
    tier: str
    extra: dict = field(default_factory=dict)

    def speedups(self, batch: int) -> np.ndarray:
        """Per round: unpruned time / pruned time - 1 (the two timed back to back in that round)."""
        s = self.seconds[batch]
        return np.asarray(s["full"]) / np.asarray(s["pruned"]) - 1.0

    def speedup(self, batch: int) -> float:
        """Fastest unpruned round / fastest pruned round - 1: the minimum is the timing least disturbed by other
        work on the machine (a median of per-round ratios swung from -11% to +190% on loaded cores)."""
        s = self.seconds[batch]
        return float(min(s["full"]) / min(s["pruned"]) - 1.0)

    def examples_per_second(self, batch: int, which: str) -> float:
        return self.n_examples / float(min(self.seconds[batch][which]))


def timing_batches(model, data: finetune.EncodedSplit, tokenizer, batch_size: int) -> list[dict]:
    """Length-sorted padded batches' model inputs, built once (only the forward passes are timed)."""
    device = next(model.parameters()).device
    return [b.model_inputs() for b in iter_batches(data.examples, tokenizer, device, batch_size)]


def forward_all(model, batches: list[dict]) -> None:
    """The timed loop: the bare model (a physically pruned copy, or the unpruned one), no attention run around
    it, so that nothing but the forward passes is timed."""
    with torch.inference_mode():
        for inputs in batches:
            model(**inputs)


def time_interleaved(models: dict, batches: dict, rounds: int, device) -> dict:
    """``{batch: {name: [seconds per round]}}``: each round times every model on every batch size, the models'
    order alternating from round to round, after one untimed warm-up pass of each."""
    for b, bs in batches.items():
        for m in models.values():
            forward_all(m, bs)
    names = list(models)
    out = {b: {n: [] for n in names} for b in batches}
    for r in range(rounds):
        for b, bs in batches.items():
            for n in (names if r % 2 == 0 else names[::-1]):
                _, s = timed(device, lambda: forward_all(models[n], bs))
                out[b][n].append(s)
    return out


@dataclass
class SpeedPass(GluePass):
    """The ``speedup`` family's pass."""

    n_importance: int = IMPORTANCE_EXAMPLES
    rounds: int = 3

    def measure(self, progress: bool):
        info, dev = self.loaded.info, self.dev
        t, tok, dv = self.task, self.loaded.tokenizer, info.device
        L, H = info.n_layers, info.n_heads
        seed = self.seeds[0]
        ft = self.finetuned(self.loaded, seed, progress)
        model = ft.model.eval()
        imp_data = importance_data(self, seed)
        imp, _ = head_importance(model, t, imp_data, tok, checkpoint=ft.meta.get("path"))
        order = order_from_scores(normalize_by_layer(imp))
        heads = order[:int(round(FRACTION * L * H))]
        pruned = copy.deepcopy(model)
        summary = head_pruning.prune_heads(pruned, heads)
        masked = finetune.predict(model, dev, tok, interventions=[attention.gate_heads(
            attention.zero_heads(L, H, heads, device=dv))])
        diff = float(np.abs(finetune.predict(pruned, dev, tok) - masked).max())
        if diff > EXACT_ATOL:
            raise RuntimeError(f"{t.name}: the pruned model's logits differ from the masked model's by {diff:.3g}")
        batches = {b: timing_batches(model, dev, tok, b) for b in BATCH_SIZES}
        secs = time_interleaved({"full": model, "pruned": pruned}, batches, self.rounds, dv)
        result = SpeedResult(
            task=t.name, n_examples=len(dev.examples), n_layers=L, n_heads=H,
            pruned=[attention.head_name(l, h) for l, h in heads], heads_per_layer=summary["heads_per_layer"],
            emptied_layers=[l + 1 for l in summary["emptied_layers"]], params_before=summary["params_before"],
            params_after=summary["params_after"], max_logit_diff=diff, rounds=self.rounds, seconds=secs,
            device=str(dv), threads=torch.get_num_threads(), tier=self.tier,
            extra={"checkpoint_cached": ft.cached, "n_importance": len(imp_data.examples)})
        return result, {}


@family("speedup", corpora=GLUE_TASKS, default_corpus="mrpc", tier_corpora={"quick": ("mrpc",), "regression": ("mrpc",), "full": ("mrpc",)}, trains=True)
def prepare_speedup(loaded, data_dir: Path, corpus: str = "mrpc", limit: int | None = None, batch_size: int = 32,
                    options: dict | None = None) -> SpeedPass:
    def adjust(s) -> dict:
        s.reason = s.reason or head_pruning.cannot_prune(loaded.model)
        cfg = TIERS[s.tier]
        n, dev = cfg["examples"], s.dev
        if n is not None and len(dev.examples) > n:  # only these are timed: the pass reads no others
            s.dev = finetune.EncodedSplit(dev.examples[:n], dev.labels[:n], dev.n_truncated, dev.max_tokens,
                                          origin=dev.origin, origin_text=dev.origin_text)
        model = (f"the {loaded.task.task} classifier as given (weights sha256 {loaded.task.digest[:16]})"
                 if getattr(loaded, "task", None) is not None else f"fine-tuned seed {s.seeds[0]}")
        s.desc = (f"GLUE {s.task.folder} dev{s.dev.origin_text}, first {len(s.dev.examples)} examples timed at batch "
                  f"{'/'.join(map(str, BATCH_SIZES))}, {cfg['rounds']} interleaved rounds; {model}; "
                  f"{FRACTION:.0%} of heads removed by importance ({IMPORTANCE_EXAMPLES} training examples) "
                  f"({s.tier} tier)")
        s.seeds = s.seeds[:1]
        return {"n_importance": IMPORTANCE_EXAMPLES, "rounds": cfg["rounds"]}

    return make_glue_pass(SpeedPass, "speedup", loaded, data_dir, corpus, limit, options, adjust=adjust)


# ---- claim metric (reference_numbers/michel2019_speedup.toml) ---------------------------------------------------

@metric("prune_speedup")
def prune_speedup(pr, batch: int = 16) -> Measurement:
    """Speed-up (%) of the pruned model at ``batch`` (fastest round of each); every batch size in the detail."""
    r: SpeedResult = result_of(pr)
    if batch not in r.seconds:
        raise NotApplicable(f"batch {batch} was not timed (timed: {sorted(r.seconds)})")
    parts = []
    for b in sorted(r.seconds):
        s = 100 * r.speedups(b)
        parts.append(f"batch {b}: {100 * r.speedup(b):+.1f}% (rounds {s.min():+.1f}..{s.max():+.1f}; "
                     f"{r.examples_per_second(b, 'full'):.0f} -> {r.examples_per_second(b, 'pruned'):.0f} ex/s)")
    return Measurement(100 * r.speedup(batch), r.n_examples, "dev examples per timed pass", unit="% faster",
                       detail=f"{len(r.pruned)} of {r.n_layers * r.n_heads} heads removed (heads per layer "
                              f"{r.heads_per_layer}; parameters {r.params_before:,} -> {r.params_after:,}; pruned = "
                              f"masked logits within {r.max_logit_diff:.1e}); {'; '.join(parts)}; fastest of "
                              f"{r.rounds} interleaved rounds on {r.device}, {r.threads} threads")


@figure("speedup", result=SpeedResult, each=True)
def speedup_figures(pr, plt, directory: Path) -> list[Path]:
    """Examples/s by batch size, unpruned vs pruned (Table 4 as a plot)."""
    r = pr.result
    bs = sorted(r.seconds)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    x = np.arange(len(bs))
    for k, (which, label) in enumerate((("full", "all heads"), ("pruned", f"{len(r.pruned)} heads removed"))):
        ax.bar(x + (k - 0.5) * 0.38, [r.examples_per_second(b, which) for b in bs], 0.38, label=label)
    for i, b in enumerate(bs):
        ax.annotate(f"{100 * r.speedup(b):+.0f}%", (x[i], max(r.examples_per_second(b, w) for w in
                                                             ("full", "pruned"))), ha="center", va="bottom")
    ax.set_xticks(x, [f"batch {b}" for b in bs])
    ax.set_ylabel("dev examples / s")
    ax.set_title(f"{pr.model.name}: pruning {FRACTION:.0%} of heads ({r.task}, {r.device})", fontsize=9)
    ax.legend(fontsize=8)
    return [save_figure(fig, directory, f"speedup-{pr.model.slug}-{r.task}.png")]
