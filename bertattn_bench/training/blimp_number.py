"""The verb-number classifier of BLiMP's agreement prefixes (Abnar & Zuidema 2020's subject-verb agreement task,
Tables 1-2; the task: :mod:`bertattn_bench.data.blimp`), on the GLUE fine-tune's skeleton: the same task model
(:class:`.task_model.TaskModel`, a head on the first token), training loop (:func:`.train_loop.train`) and checkpoint
cache (:func:`.checkpoints.trained`, under ``<cache>/blimp_number/``). Like ARCT's fine-tune it needs no entry among
the GLUE tasks: :data:`TASK` is a :class:`~bertattn_bench.data.glue.Task` the loop reads for its loss only.

The recipe per tier (:data:`RECIPES`): the quick tier trains one epoch on a seeded 2,000 of the 3,196 train prefixes
(batch 16, lr 1e-4, the GLUE quick tier's); the others three epochs on all of them. The learned-model guard
(:func:`learning_check`) tests the fine-tune on all 798 test prefixes against their majority class.
"""
from __future__ import annotations

import time
from pathlib import Path

from ..claims import learned
from ..data import blimp, glue
from . import checkpoints
from . import glue_finetune as finetune

TASK = glue.Task("blimp-number", blimp.BLIMP_DIR, "prefix", None, "label", blimp.LABELS, "acc")
TRAINER_VERSION = "1"
RECIPES = {
    "quick": finetune.Recipe(epochs=1, batch_size=16, lr=1e-4, max_train=2000, max_tokens=64),
    "regression": finetune.Recipe(max_tokens=64),
    "full": finetune.Recipe(max_tokens=64),
}


def rows(items: list[blimp.VerbNumber]) -> list[glue.Example]:
    """The prefixes as single-sentence examples (label 0 singular, 1 plural), sourced ``paradigm:pairID``."""
    return [glue.Example(i.prefix, None, float(i.label), f"{i.paradigm}:{i.pair_id}") for i in items]


def encode(loaded, items: list[blimp.VerbNumber], recipe: finetune.Recipe) -> finetune.EncodedSplit:
    return finetune.encode_split(loaded.tokenizer, rows(items), min(recipe.max_tokens, loaded.info.max_positions))


def code_version() -> str:
    return checkpoints.sources_version(__name__, TRAINER_VERSION, finetune.NOT_TRAINING_MODULES)


def checkpoint_dir(cache_dir: Path, loaded, recipe: finetune.Recipe, seed: int, data_dir: Path) -> Path:
    from ..base.hashing import data_fingerprint, model_fingerprint
    from ..base.settings import data_file

    files = [data_file(data_dir, f) for f in blimp.FILES.values()]
    doc = {"model": model_fingerprint(loaded.info), "task": TASK.name, "recipe": recipe.key(), "seed": seed,
           "data": data_fingerprint(files), "code": code_version()}
    return checkpoints.checkpoint_dir(cache_dir, "blimp_number", loaded.info.slug, f"number-seed{seed}", doc)


def finetuned(loaded, task: blimp.Agreement, tier: str, seed: int, data_dir: Path, cache_dir: Path | None,
              progress: bool = False, precision: str | None = None) -> finetune.FineTuned:
    """The verb-number classifier of ``loaded`` with ``seed`` at ``tier``: from the cache, else trained and cached."""
    from .precision import with_precision

    recipe, why = with_precision(RECIPES[tier], loaded.info.device, precision, n_layers=loaded.info.n_layers)
    model = finetune.task_model(loaded, TASK, seed)

    def run(directory: Path | None):
        data = encode(loaded, finetune.seeded_subset(task.train, recipe.max_train, seed), recipe)
        state = directory / checkpoints.STATE if directory is not None else None
        t0 = time.perf_counter()
        log = finetune.train(model, TASK, data, loaded.tokenizer, recipe, seed, state, progress,
                             f"fine-tune {TASK.name}/{seed}")
        seconds = time.perf_counter() - t0
        return model, {"model": loaded.info.name, "task": TASK.name, "seed": seed, "recipe": recipe.key(),
                       "precision": "bf16 autocast" if recipe.bf16_autocast else "fp32", "precision_why": why,
                       "n_train": len(data.examples), "log": log, "train_seconds": seconds,
                       "path": str(directory) if directory else None}

    def load(directory: Path):
        checkpoints.load_weights(directory, model, loaded.info.device)
        model.eval()
        return model

    directory = None if cache_dir is None else checkpoint_dir(cache_dir, loaded, recipe, seed, data_dir)
    done = checkpoints.trained(directory, run, load)
    return finetune.FineTuned(done.model, done.meta, done.cached)


def learning_check(loaded, ft: finetune.FineTuned, test: finetune.EncodedSplit, seed: int) -> learned.Check:
    """The learned-model guard: accuracy on the test prefixes against their majority class (exact binomial)."""
    logits = finetune.predict(ft.model, test, loaded.tokenizer)
    return learned.classifier(f"{loaded.info.name} fine-tuned on BLiMP verb number (seed {seed})",
                              logits.argmax(-1), test.labels, what="BLiMP test prefixes")
