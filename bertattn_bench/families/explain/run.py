"""The ``explain`` family's pass: does attention explain what the fine-tuned classifier uses?

Per (model, GLUE classification task), on the fine-tuning families' checkpoint of the tier (``GluePass``: the
quick tier's MRPC fine-tune is cached and shared, no retraining) and the first k dev examples of the tier
(:data:`constants.TIERS`), one example at a time:

* the classifier's attention per layer, read four ways (:mod:`.measure`, :mod:`bertattn_bench.engine.across_layers`):
  raw (head-averaged), rollout, flow (the first ``flow_examples`` examples only: L x n max-flows each) and the norm
  map's rollout, from the [CLS] row and, for raw and rollout, the maximum over query rows (the authors' Table-3 code);
* the importance of each input token to the gold class by Captum: blank-out and the input gradient;
* Spearman's rho of each reading with each importance, per layer (Abnar & Zuidema 2020, Tables 1-3);
* on the encoder the suite was given (the pre-trained model; a classifier's own encoder where one is judged as given),
  Brunner et al.'s raw vs effective attention per layer, on each example's first sentence alone and on the pair
  (sequences on both sides of the head dimension): their agreement and the share of attention on special tokens.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...claims.registry import family
from ...data import blimp
from ...training import blimp_number, glue_pass
from ...training.glue_pass import GluePass, make_glue_pass
from . import measure
from .constants import BLIMP_CORPORA, BLIMP_TIERS, FLOW_MAX_PIECES, TASKS, TIERS


@dataclass
class ExplainResult:
    task: str
    tier: str
    seed: int
    n_layers: int
    n_examples: int
    n_flow: int
    lengths: np.ndarray  # (S,) pieces per example
    rho: dict  # "<reading>|<importance>" -> (S, L) Spearman's rho (nan: not computed, or a constant vector)
    blank_token: str
    d_head: int | None  # the value dimension per head (None: no norm reading on this model)
    effective: dict | None  # Brunner's readings: name -> (2S, L) arrays, "n" (2S,), "min_rank" (2S,)
    effective_note: str = ""
    train_meta: dict = field(default_factory=dict)
    identified: np.ndarray | None = None  # (S, L) tokens identified per example and layer (measure.identified)
    identified_linear: np.ndarray | None = None  # (S, L) the same through the learned linear map
    identity_note: str = ""  # what the learned map was fitted on (or why there is none)
    # the first example read whole, for its figure: "tokens" (n,), "relevance" {reading: (L, n)} and "importance"
    # {importance: (n,)}, exactly the arrays its correlations were computed from
    example: dict | None = None


@dataclass
class ExplainPass(GluePass):
    """The ``explain`` family's pass."""

    def measure(self, progress: bool):
        info, tok = self.loaded.info, self.loaded.tokenizer
        seed = self.seeds[0]
        ft = self.finetuned(self.loaded, seed, progress)
        model = ft.model
        model.eval()
        examples = self.dev.examples  # the tier's first k dev examples (prepare_explain)
        f, fm = self.flow_budget()
        n_flow = len(examples) if f is None else min(len(examples), f)
        n_flow_max = len(examples) if fm is None else min(len(examples), fm)
        blank_id = tok.mask_token_id if tok.mask_token_id is not None else tok.unk_token_id
        classifier_norms = measure.norm_reason(model.encoder) is None
        rho: dict = {}
        example = None
        for i, ex in enumerate(examples):
            inputs = measure.inputs_of(model, ex.input_ids, ex.token_type_ids, info.device)
            maps, norm, _ = measure.layer_maps(model, model.encoder, inputs, classifier_norms)
            rel = measure.relevance(maps.cpu(), None if norm is None else norm.cpu(), flow=i < n_flow,
                                    flow_max=i < n_flow_max and len(ex.input_ids) <= FLOW_MAX_PIECES)
            imp = measure.importance(model, inputs, int(self.dev.labels[ex.index]), blank_id)
            if i == 0:
                example = {"tokens": [str(t) for t in tok.convert_ids_to_tokens(list(ex.input_ids))],
                           "relevance": {k: np.asarray(v) for k, v in rel.items()},
                           "importance": {k: np.asarray(v) for k, v in imp.items()}}
            for key, values in measure.correlations(rel, imp).items():
                rho.setdefault(key, np.full((len(examples), info.n_layers), np.nan))[i] = values
        effective, note, d_head = self.effective(examples)
        identified, identified_linear, identity_note = self.identifiability(examples)
        result = ExplainResult(task=self.task.name, tier=self.tier, seed=seed, n_layers=info.n_layers,
                               n_examples=len(examples), n_flow=n_flow,
                               lengths=np.array([len(e.input_ids) for e in examples]), rho=rho,
                               blank_token=str(tok.convert_ids_to_tokens(blank_id)), d_head=d_head,
                               effective=effective, effective_note=note, train_meta={**ft.meta, "cached": ft.cached},
                               identified=identified, identified_linear=identified_linear,
                               identity_note=identity_note, example=example)
        return result, {}

    def identifiability(self, examples) -> tuple[np.ndarray | None, np.ndarray | None, str]:
        """Brunner's token identifiability on the encoder the suite was given, each example's whole sequence: by
        cosine alone, and through the learned linear map fitted on the task's first training pairs (never the
        sequences read; :data:`constants.TIERS` "identity_fit"). (cosine (S, L), learned (S, L) or None, note)."""
        from ...data import glue
        from ...training import glue_finetune

        encoder, device, tok = self.loaded.model, self.loaded.info.device, self.loaded.tokenizer

        def states(ex):
            return measure.hidden_states(encoder, measure.inputs_of(encoder, ex.input_ids, ex.token_type_ids, device))

        read = [states(ex) for ex in examples]
        plain = np.stack([measure.identified(s) for s in read])
        k = TIERS[self.tier]["identity_fit"]
        if not glue.has_split(self.data_dir, self.task, "train"):
            return plain, None, f"no learned map: {self.task.name} has no train split here"
        rows = glue.load_split(self.data_dir, self.task.name, "train", k)
        fit = [states(ex) for ex in glue_finetune.encode_split(tok, rows, glue_finetune.token_budget(self.loaded)).examples]
        n_tokens, width = sum(len(s[0]) for s in fit), int(fit[0][0].shape[-1])
        if n_tokens <= width + 1:
            return plain, None, f"no learned map: {n_tokens} training tokens for {width + 1} unknowns per output"
        maps = measure.identity_maps(fit)
        note = (f"linear map per layer, least squares on the {n_tokens} tokens of the first {len(fit)} "
                f"{self.task.name} training pairs")
        return plain, np.stack([measure.identified(s, maps) for s in read]), note

    def flow_budget(self) -> tuple[int | None, int | None]:
        """How many examples get the [CLS] node's flow, and how many the flow from every output node (None: all)."""
        return TIERS[self.tier]["flow_examples"], TIERS[self.tier]["flow_max_examples"]

    def effective(self, examples) -> tuple[dict | None, str, int | None]:
        """Brunner et al.'s readings on the encoder, per sequence: each example's first sentence, then the pair."""
        info = self.loaded.info
        encoder = self.loaded.model
        reason = measure.norm_reason(encoder)
        if reason is not None:
            return None, f"no effective attention: {reason}", None
        ns = measure.norm_site(encoder)
        d_head = int(ns.layers[0].value.out_features) // ns.n_heads
        readings = []
        for ex in examples:
            first = measure.first_segment(ex.input_ids, ex.token_type_ids, info.sep_token_id)
            for ids, types in (first, (ex.input_ids, ex.token_type_ids)):
                inputs = measure.inputs_of(encoder, ids, types, info.device)
                _, _, pairs = measure.layer_maps(encoder, encoder, inputs, False, with_transforms=True)
                readings.append(measure.effective_reading(pairs, ids, info.cls_token_id, info.sep_token_id))
        out = {name: np.stack([getattr(r, name) for r in readings])
               for name in ("agreement", "raw_special", "eff_special", "raw_sep", "eff_sep")}
        out["n"] = np.array([r.n for r in readings])
        out["min_rank"] = np.array([r.min_rank for r in readings])
        who = "the classifier's own encoder" if getattr(self.loaded, "task", None) is not None else "the pre-trained encoder"
        return out, f"on {who}; d_head {d_head}", d_head


@dataclass
class BlimpExplainPass(ExplainPass):
    """The pass on Abnar & Zuidema's own task (Tables 1-2): BLiMP's agreement prefixes as a verb-number task
    (:mod:`bertattn_bench.data.blimp`) on the model's verb-number classifier (:mod:`...training.blimp_number`, cached
    like the GLUE fine-tunes). ``blimp``: the test prefixes of the four simple paradigms; ``blimp-hard``: the
    distractor paradigms' (an attractor noun between subject and verb). The readings and correlations are
    :class:`ExplainPass`'s; the checkpoint and the guard are the verb-number classifier's; Brunner's effective
    attention is not read (every prefix is shorter than the head dimension, where it is the raw map)."""

    agreement: blimp.Agreement | None = None
    guard: object = None  # the test prefixes, encoded (the learned-model guard's examples)

    def finetuned(self, loaded, seed: int, progress: bool):
        return blimp_number.finetuned(loaded, self.agreement, self.tier, seed, self.data_dir, self.cache_dir,
                                      progress, self.precision)

    def learning(self, progress: bool = False) -> tuple:
        return tuple(blimp_number.learning_check(self.loaded, self.finetuned(self.loaded, seed, progress), self.guard,
                                                 seed) for seed in self.seeds)

    def flow_budget(self) -> tuple[int | None, int | None]:
        return None, None  # every prefix (short)

    def identifiability(self, examples) -> tuple[None, None, str]:
        return None, None, ""  # read on the GLUE passes (the same pre-trained encoder)

    def effective(self, examples):
        return None, "not read on the BLiMP prefixes (each shorter than the head dimension: A_eff = A)", None


def prepare_blimp(loaded, data_dir: Path, corpus: str, limit: int | None, options: dict | None) -> BlimpExplainPass:
    from ...base.settings import data_file

    tier, cache_dir, _ = glue_pass.options_of(options)
    k, twin = BLIMP_TIERS[tier]["examples"], BLIMP_TIERS[tier]["twin"]
    limit = k if limit is None else (limit if k is None else min(limit, k))
    agreement = blimp.agreement(data_dir)
    items = getattr(agreement, BLIMP_CORPORA[corpus])
    recipe = blimp_number.RECIPES[tier]
    dev = blimp_number.encode(loaded, items[:limit] if limit else items, recipe)
    guard = blimp_number.encode(loaded, agreement.test, recipe)
    seeds = glue_pass.tier_seeds(tier, "mrpc", (options or {}).get("seed"))[:1]
    reason = None
    if getattr(loaded, "task", None) is not None:
        reason = f"{loaded.info.name} is a classifier judged as given: no verb-number model of it"
    elif loaded.info.random_init_seed is not None and not twin:
        reason = (f"the {tier} tier fine-tunes no random-init verb-number model (the negative control runs with "
                  f"--tier regression or full)")
    desc = (f"BLiMP agreement {BLIMP_CORPORA[corpus]} prefixes ({len(dev.examples)} of {len(items)}; "
            f"{sum(agreement.dropped.values())} pairs of the 6 paradigms unlabelled, dropped); verb-number "
            f"classifier seed {seeds[0]} ({recipe.epochs} epoch(s) on {recipe.max_train or len(agreement.train)} of "
            f"{len(agreement.train)} train prefixes; {tier} tier); attention vs Captum importance, flow from every "
            f"output node")
    paths = [data_file(data_dir, f) for f in blimp.FILES.values()]
    return BlimpExplainPass("explain", corpus, desc, loaded, blimp_number.TASK, dev, seeds, tier, Path(data_dir),
                            cache_dir, paths, reason, (options or {}).get("precision"), agreement=agreement,
                            guard=guard)


@family("explain", corpora=TASKS + tuple(BLIMP_CORPORA), default_corpus="mrpc",
        tier_corpora={k: v["corpora"] for k, v in TIERS.items()}, trains=True)
def prepare_explain(loaded, data_dir: Path, corpus: str = "mrpc", limit: int | None = None, batch_size: int = 32,
                    options: dict | None = None) -> ExplainPass:
    if corpus in BLIMP_CORPORA:
        return prepare_blimp(loaded, data_dir, corpus, limit, options)
    tier = glue_pass.options_of(options)[0]
    k = TIERS[tier]["examples"]
    f = TIERS[tier]["flow_examples"]
    if k is not None:  # the pass encodes (and counts) only the examples it reads
        limit = k if limit is None else min(limit, k)
    return make_glue_pass(ExplainPass, "explain", loaded, data_dir, corpus, limit, options, lambda tier, seeds: (
        f"; attention vs Captum importance (flow on the first {f or 'all'} examples), effective attention on the "
        f"encoder"))
