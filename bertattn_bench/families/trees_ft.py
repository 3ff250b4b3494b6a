"""Htut et al. 2019, pre-trained vs fine-tuned (the ``trees_ft`` family): the trees family's MAX trees of every head
(:mod:`.common.tree_scoring`) read from the pre-trained encoder and from the encoder of the suite's MRPC fine-tune
(the checkpoint the finetune/disable/prune families share; the tier's recipe, the run's seed, default 0), on the
same UD sentences (PUD by default). Htut fine-tune on CoLA and MNLI and find that fine-tuning changes little; the
claim compares the two encoders' best heads. MST is not decoded here (MAX only: the pass stays within the quick
tier's budget; the trees family decodes MST on the pre-trained encoder)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..claims.registry import Measurement, NotApplicable, family, metric
from ..data import glue
from ..engine.attention import head_name, run_reducers
from ..engine.batching import iter_batches
from ..engine.passes import PassResult
from ..training import glue_finetune as finetune
from ..training.glue_pass import TIERS, guard_dev, learning_check, model_finetune, options_of, recipe_for
from .common.tree_scoring import TreeInputs, TreesResult, best_max_tree, tree_inputs

TASK = "mrpc"  # the fine-tune every tier makes (GLUE_TIERS' corpora)
PAIR_RELATIONS = ("nsubj", "obj", "advmod", "amod")  # Htut's Table 2/3 relations, compared in the detail


@dataclass
class TreesFtResult:
    pretrained: TreesResult
    finetuned: TreesResult
    task: str
    seed: int
    tier: str


@dataclass
class TreesFtPass:
    """The ``trees_ft`` family's pass (a ``passes.Pass``): two reductions of the same sentences."""

    family: str
    corpus: str
    data: str
    loaded: object
    inputs: TreeInputs
    tier: str
    seed: int | None
    reason: str | None
    data_dir: Path
    cache_dir: Path | None
    data_paths: list
    batch_size: int = 32
    precision: str | None = None

    @property
    def encoded(self):
        return self.inputs.encoded

    def nothing_to_measure(self) -> str | None:
        return self.reason

    def _finetuned(self, progress: bool) -> finetune.FineTuned:
        return model_finetune(self.loaded, TASK, self.seed, self.data_dir, self.cache_dir, recipe_for(TASK, self.tier),
                              progress, self.precision)

    def artifacts(self, progress: bool = False) -> None:
        if self.reason is None and self.cache_dir is not None:
            self._finetuned(progress)  # kept in the cache; the weights in memory are let go

    def _trees(self, model, label: str, progress: bool) -> TreesResult:
        info = self.loaded.info
        batches = iter_batches(self.encoded, self.loaded.tokenizer, torch.device(info.device), self.batch_size,
                               with_words=True)
        res = run_reducers(model, batches, [self.inputs.reducer(info, 0)], progress=progress,
                           desc=f"trees {self.corpus} ({label})")[0]
        return self.inputs.with_baselines(res)

    def run(self, progress: bool = False) -> PassResult:
        info, start = self.loaded.info, time.perf_counter()
        pt = self._trees(self.loaded.model, "pre-trained", progress)
        tuned = self._finetuned(progress)
        ft = self._trees(tuned.model.encoder, f"fine-tuned on {TASK}", progress)
        t = glue.task(TASK)
        learning = (learning_check(self.loaded, t, tuned, guard_dev(self.loaded, self.data_dir, TASK), self.seed),)
        del tuned
        return PassResult(self.family, self.corpus, self.data, info, TreesFtResult(pt, ft, TASK, self.seed, self.tier),
                          len(self.encoded), self.inputs.skipped, time.perf_counter() - start, learning=learning)


@metric("tree_finetune_change")
def tree_finetune_change(pr, decoder: str = "max") -> Measurement:
    """|fine-tuned − pre-trained| best-head mean MAX tree UUAS (each over the chain tree on the same trees), points;
    SE from the two best heads' per-tree SEs (unpaired: the pairing by tree would narrow it). Beside it, per Htut
    relation, the best head's UUAS of each encoder."""
    r = pr.result
    if not isinstance(r, TreesFtResult):
        raise NotApplicable("not a trees_ft pass")
    if decoder != "max":
        raise NotApplicable("the trees_ft pass decodes MAX trees only")
    pt, ft = best_max_tree(r.pretrained), best_max_tree(r.finetuned)
    diff, n = ft[2] - pt[2], r.pretrained.n_trees
    rel = []
    for name in PAIR_RELATIONS:
        i = r.pretrained.relations.index(name)
        a, b = (float(x.accuracy()[:, i, :].max()) for x in (r.pretrained, r.finetuned))
        rel.append(f"{name} {a:.1f} → {b:.1f}")
    chain = r.pretrained.chain_sum / max(n, 1)
    return Measurement(abs(diff), n=n, n_unit="trees", head=head_name(ft[0], ft[1]), unit="points",
                       standard_error=math.hypot(pt[3], ft[3]), values={"signed": diff},
                       detail=f"best MAX head pre-trained {head_name(pt[0], pt[1])} {pt[2] + chain:.1f}%, fine-tuned "
                              f"on {r.task} (seed {r.seed}) {head_name(ft[0], ft[1])} {ft[2] + chain:.1f}% (chain "
                              f"{chain:.1f}%): Δ {diff:+.2f} points; best head per relation (UUAS %, pre-trained → "
                              f"fine-tuned): " + ", ".join(rel))


@family("trees_ft", corpora=("pud_test", "ewt_dev", "gum_dev"), default_corpus="pud_test", quick_limit=100,
        trains=True)
def prepare_trees_ft(loaded, data_dir: Path, corpus: str = "pud_test", limit: int | None = None,
                     batch_size: int = 32, options: dict | None = None) -> TreesFtPass:
    tier, cache_dir, _ = options_of(options)
    inputs = tree_inputs(loaded, Path(data_dir), corpus, limit)
    t = glue.task(TASK)
    seed, reason = (options or {}).get("seed") or 0, None
    if getattr(loaded, "task", None) is not None:
        reason = "the model is a classifier judged as given: no pre-trained/fine-tuned pair"
    elif not glue.has_split(data_dir, t, "train"):
        reason = f"GLUE {t.folder} has no train.tsv here: no fine-tuned model"
    elif loaded.info.random_init_seed is not None and not TIERS[tier]["twin"]:
        reason = f"the {tier} tier fine-tunes no random-init model (--tier full does)"
    paths = [inputs.path] + ([] if reason else [glue.split_path(data_dir, t, "train"), glue.split_path(data_dir, t, "dev")])
    desc = (f"{inputs.label} (UD trees, undirected attachment, MAX), pre-trained vs fine-tuned on {TASK} "
            f"(seed {seed}, {tier} tier recipe)")
    return TreesFtPass("trees_ft", corpus, desc, loaded, inputs, tier, seed, reason, Path(data_dir), cache_dir, paths,
                       batch_size, (options or {}).get("precision"))
