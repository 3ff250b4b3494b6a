"""Kovaleva §4.1/§4.4/§4.5 (the patterns family): the pass (pre-trained and fine-tuned maps on a GLUE dev set and UD
EWT) and its prepare."""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...claims.registry import family
from ...data import glue
from ...engine.attention import run_reducers
from ...engine.batching import Skipped, drop_too_long, encode_words, iter_batches
from ...engine.passes import PassResult
from ...training import glue_finetune as finetune
from ...training.glue_pass import (
    GLUE_TASKS,
    TIERS,
    eval_source,
    guard_dev,
    learning_check,
    model_finetune,
    options_of,
    origin_text,
    recipe_for,
    task_rows,
)
from .constants import LING, NEGATION, TIER_CORPORA, TIER_DEV_MAX, TIER_UD_MAX, UD_CORPUS
from .reduce import FeatureReducer, ModelStats, PatternReducer, PatternsResult

# ---- the pass ----------------------------------------------------------------------------------------------------

def ud_inputs(loaded, data_dir: Path, limit: int | None):
    """UD EWT dev sentences (the first ``limit``): encoded, skipped, word flags (LING order), verb → subject arcs,
    the corpus path and per sentence its determiners (UD upos DET: the control of the §4.4 rise, RISE_CONTROL)."""
    from ...data.ud import CORPORA, load_corpus

    sentences = load_corpus(data_dir, UD_CORPUS, limit)
    encoded, skipped = drop_too_long([encode_words(loaded.tokenizer, i, s.words) for i, s in enumerate(sentences)],
                                     min(128, loaded.info.max_positions))
    flags, arcs, control = {}, {}, {}
    for i, s in enumerate(sentences):
        control[i] = np.array([upos == "DET" for upos in s.upos], dtype=bool)  # RISE_CONTROL
        f = np.zeros((len(s.words), len(LING)), dtype=bool)
        for w, (form, upos, rel) in enumerate(zip(s.words, s.upos, s.deprels)):
            f[w] = [upos == "PUNCT", upos in ("NOUN", "PROPN"), upos == "PRON", upos == "VERB",
                    rel in ("nsubj", "nsubj:pass"), rel == "obj", form.lower() in NEGATION]
        flags[i] = f
        arcs[i] = [(s.heads[w] - 1, w) for w, rel in enumerate(s.deprels)
                   if rel in ("nsubj", "nsubj:pass") and s.heads[w] > 0 and s.upos[s.heads[w] - 1] == "VERB"]
    return encoded, skipped, flags, arcs, data_dir / CORPORA[UD_CORPUS], control


@dataclass
class PatternsPass:
    """The ``patterns`` family's pass on one GLUE task (a ``passes.Pass``)."""

    family: str
    corpus: str
    data: str
    loaded: object
    task: glue.Task
    dev: list
    n_dev_total: int
    ud: list
    ud_skipped: Skipped
    ud_flags: dict
    ud_arcs: dict
    tier: str
    ft_seed: int | None
    ft_note: str
    data_dir: Path
    cache_dir: Path | None
    data_paths: list
    batch_size: int = 32
    ud_control: dict | None = None  # per UD sentence: its determiners (settings.RISE_CONTROL)
    precision: str | None = None  # the run's fine-tuning precision (None: auto)

    @property
    def encoded(self):
        return self.dev

    def nothing_to_measure(self) -> str | None:
        return None

    def _finetuned(self, progress: bool) -> finetune.FineTuned:
        return model_finetune(self.loaded, self.task.name, self.ft_seed, self.data_dir, self.cache_dir,
                              recipe_for(self.task.name, self.tier), progress, self.precision)

    def artifacts(self, progress: bool = False) -> None:
        """The fine-tuned checkpoint, made (or found in the cache) before ``run`` is timed; without a cache the
        fine-tune runs inside ``run``."""
        if self.ft_seed is not None and self.cache_dir is not None:
            self._finetuned(progress)  # kept in the cache; the weights in memory are let go

    def _measure(self, model, label: str, progress: bool) -> ModelStats:
        info, tok, dev = self.loaded.info, self.loaded.tokenizer, torch.device(self.loaded.info.device)
        g = run_reducers(model, iter_batches(self.dev, tok, dev, self.batch_size),
                         [PatternReducer(info.n_layers, info.n_heads, info.device)], progress=progress,
                         desc=f"patterns {self.corpus} ({label})")[0]
        u = run_reducers(model, iter_batches(self.ud, tok, dev, self.batch_size, with_words=True),
                         [FeatureReducer(self.ud_flags, self.ud_arcs, info.n_layers, info.n_heads, info.device,
                                         control=self.ud_control)],
                         progress=progress, desc=f"patterns {UD_CORPUS} ({label})")[0]
        return ModelStats(label, g, u)

    def run(self, progress: bool = False) -> PassResult:
        info = self.loaded.info
        start = time.perf_counter()
        pt = self._measure(self.loaded.model, "pre-trained", progress)
        ft, learning = None, ()
        if self.ft_seed is not None:
            tuned = self._finetuned(progress)
            ft = self._measure(tuned.model.encoder, f"fine-tuned on {self.task.name} (seed {self.ft_seed})", progress)
            dev = guard_dev(self.loaded, self.data_dir, self.task.name)
            learning = (learning_check(self.loaded, self.task, tuned, dev, self.ft_seed),)
            del tuned
        cls, sep = pt.glue.to_special[..., 0].sum(), pt.glue.to_special[..., 1].sum()
        result = PatternsResult(
            task=self.task.name, is_pair=self.task.is_pair, tier=self.tier, n_dev=len(self.dev),
            n_dev_total=self.n_dev_total, ud_corpus=UD_CORPUS, pretrained=pt, finetuned=ft, ft_note=self.ft_note,
            sink="[CLS]" if cls >= sep else "[SEP]", n_layers=info.n_layers, n_heads=info.n_heads)
        return PassResult(self.family, self.corpus, self.data, info, result, len(self.dev), self.ud_skipped,
                          time.perf_counter() - start, learning=learning)


@family("patterns", corpora=GLUE_TASKS, default_corpus="mrpc", tier_corpora=TIER_CORPORA, trains=True)
def prepare_patterns(loaded, data_dir: Path, corpus: str = "mrpc", limit: int | None = None, batch_size: int = 32,
                     options: dict | None = None) -> PatternsPass:
    tier, cache_dir, _ = options_of(options)
    t = glue.task(corpus)
    source = eval_source(options, corpus)
    rows = task_rows(data_dir, corpus, "dev", limit, source)
    total = len(rows)
    cap = TIER_DEV_MAX[tier]
    if len(rows) > cap:  # a seeded sample, as the paper's "up to 1000 examples" (the notebook's had no seed)
        rows = [rows[i] for i in sorted(random.Random(0).sample(range(len(rows)), cap))]
    max_tokens = finetune.token_budget(loaded)
    dev = finetune.encode_split(loaded.tokenizer, rows, max_tokens)
    ud_limit = TIER_UD_MAX[tier] if limit is None else min(limit, TIER_UD_MAX[tier] or limit)
    ud, ud_skipped, flags, arcs, ud_path, control = ud_inputs(loaded, Path(data_dir), ud_limit)
    if ud_skipped.n:
        ud_skipped.reason = f"UD {UD_CORPUS} sentence(s) over {ud_skipped.max_tokens} pieces skipped"
    paths = ([glue.split_path(data_dir, t, "dev")] if source is None else source.on_disk()) + [ud_path]
    ft_seed, note = None, ""
    if getattr(loaded, "task", None) is not None:
        note = (f"the model is a {loaded.task.task} classifier judged as given: its (fine-tuned) encoder is read as "
                f"the model, with no pre-trained/fine-tuned pair")
    elif not glue.has_split(data_dir, t, "train"):
        note = f"GLUE {t.folder} has no train.tsv here: no fine-tuned model"
    elif corpus not in TIERS[tier]["corpora"]:
        note = f"the {tier} tier fine-tunes no {corpus} model"
    elif loaded.info.random_init_seed is not None and not TIERS[tier]["twin"]:
        note = f"the {tier} tier fine-tunes no random-init model (--tier full does)"
    else:
        # the run's seed ($BERTATTN_SEED as the face read it; default 0): another seed's checkpoint measures the spread
        ft_seed = (options or {}).get("seed") or 0
        paths.insert(0, glue.split_path(data_dir, t, "train"))
        note = f"fine-tuned on {corpus} with seed {ft_seed} (finetune's checkpoint cache)"
    desc = (f"GLUE {t.folder} dev{origin_text(source, rows)} ({len(dev.examples)} of {total} examples{', first %d' % limit if limit else ''}"
            f"{', seeded sample' if total > cap else ''}; {dev.n_truncated} cut to {max_tokens} pieces) + UD "
            f"{UD_CORPUS} ({len(ud)} sentences); {note} ({tier} tier)")
    return PatternsPass("patterns", corpus, desc, loaded, t, dev.examples, total, ud, ud_skipped, flags, arcs, tier,
                        ft_seed, note, Path(data_dir), cache_dir, paths, batch_size, ud_control=control,
                        precision=(options or {}).get("precision"))
