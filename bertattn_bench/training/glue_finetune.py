"""Fine-tuning any encoder the suite loads on a GLUE task, with an on-disk checkpoint cache.

* :func:`finetuned`: fine-tune once per (base weights, task, recipe, seed, data, trainer code) and keep it under
  ``<cache>/finetune/``; a file lock makes two workers share one training; an interrupted run resumes (the sequence
  is :func:`.checkpoints.trained`, shared with ARCT's fine-tune).
* the pieces, each in its module and named here as well (where families and tests read them): the task model, its
  data and evaluation (:mod:`.task_model`: :class:`TaskModel`, :class:`EncodedSplit`, :func:`encode_split`,
  :func:`predict`), the recipe and the training loop (:mod:`.train_loop`: :class:`Recipe`, :func:`train`); the sweep
  of head configurations is :mod:`bertattn_bench.training.sweeps`, kept out of the trainer's closure so that changing
  it does not change the checkpoints' key.
* the training precision and the step as CUDA graphs are chosen in :mod:`.precision` and recorded in the recipe
  (the key) and the checkpoint's meta; :func:`bf16_failure` tells where a model's code fails under bf16 autocast.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ..base.errors import DataError
from ..data import glue
from ..engine.batching import Encoded, make_batch
from . import checkpoints
from .precision import device_class, with_precision, with_step_graphs
from .task_model import (
    EncodedSplit,
    TaskModel,
    encode_split,
    loss_per_example,
    predict,
    seeded_subset,
    task_model,
    to_predictions,
)
from .train_loop import Recipe, epoch_batches, epoch_on_device, train

__all__ = ["Encoded", "EncodedSplit", "FineTuned", "Recipe", "TaskModel", "bf16_failure",
           "checkpoint_dir", "encode_split", "epoch_batches", "epoch_on_device", "finetuned", "loss_per_example",
           "make_batch", "predict", "seeded_subset", "task_model", "to_predictions", "token_budget", "train",
           "training_rows"]

TRAINER_VERSION = "1"  # bump when a change to training changes the weights it produces


def token_budget(loaded, recipe: Recipe = Recipe()) -> int:
    """The pieces per input of a fine-tune's examples on ``loaded``: the recipe's ``max_tokens`` (the paper's 128
    by default), never beyond the model's positions."""
    return min(recipe.max_tokens, loaded.info.max_positions)


# imported by the trainer's modules but not read by training: scoring (stats: STS-B's Spearman in the GLUE reader),
# messages (errors) and the environment table (settings: the precision it selects is in the recipe key). A change
# there leaves the trained weights, and so the checkpoints, as they are. The code version of a checkpoint:
# this module and every package module it imports except these (checkpoints.sources_version), plus TRAINER_VERSION.
NOT_TRAINING_MODULES = tuple(f"{__package__.split('.')[0]}.{m}" for m in ("claims.stats", "base.errors", "base.settings"))


def code_version() -> str:
    """The code part of a GLUE checkpoint's key (:func:`.checkpoints.sources_version`)."""
    return checkpoints.sources_version(__name__, TRAINER_VERSION, NOT_TRAINING_MODULES)


@dataclass
class FineTuned:
    model: TaskModel
    meta: dict  # recipe, seed, train size, loss per epoch, seconds, dev scores, cache path
    cached: bool


def checkpoint_dir(cache_dir: Path, loaded, task_name: str, recipe: Recipe, seed: int, data_dir: Path) -> Path:
    from ..base.hashing import data_fingerprint, model_fingerprint

    t = glue.task(task_name)
    files = [glue.split_path(data_dir, t, "train"), glue.split_path(data_dir, t, "dev")]
    doc = {"model": model_fingerprint(loaded.info), "task": task_name, "recipe": recipe.key(), "seed": seed,
           "data": data_fingerprint(files), "code": code_version()}
    return checkpoints.checkpoint_dir(cache_dir, "finetune", loaded.info.slug, f"{task_name}-seed{seed}", doc)


def training_rows(data_dir: Path, task_name: str, recipe: Recipe, seed: int) -> list[glue.Example]:
    t = glue.task(task_name)
    if not glue.has_split(data_dir, t, "train"):
        raise DataError(f"GLUE {t.folder} has no train.tsv under {Path(data_dir) / glue.GLUE_DIR / t.folder}: "
                        f"it cannot be fine-tuned here (dev-only task)")
    return seeded_subset(glue.load_split(data_dir, task_name, "train"), recipe.max_train, seed)


def finetuned(loaded, task_name: str, seed: int, data_dir: Path, cache_dir: Path | None,
              recipe: Recipe = Recipe(), force: bool = False, progress: bool = False,
              precision: str | None = None) -> FineTuned:
    """The model fine-tuned on ``task_name`` with ``seed``: from the cache, else trained (resuming) and cached."""
    t = glue.task(task_name)
    recipe, why = with_precision(recipe, loaded.info.device, precision, n_layers=loaded.info.n_layers)
    recipe, graphs_why = with_step_graphs(recipe, device_class(loaded.info.device), loaded.info.n_layers)
    why = f"{why}; {graphs_why}" if graphs_why else why
    model = task_model(loaded, t, seed)
    if recipe.bf16_autocast:
        failure = _bf16_failure_of(loaded, model)
        if failure:
            recipe, why = replace(recipe, bf16_autocast=False), f"{why}; bf16 autocast fails in this model's code " \
                                                                   f"({failure}): fp32"

    def run(directory: Path | None) -> tuple[TaskModel, dict]:
        data = encode_split(loaded.tokenizer, training_rows(data_dir, task_name, recipe, seed),
                            token_budget(loaded, recipe))
        state = directory / checkpoints.STATE if directory is not None else None
        t0 = time.perf_counter()
        log = train(model, t, data, loaded.tokenizer, recipe, seed, state, progress, f"fine-tune {task_name}/{seed}")
        return model, _meta(loaded, t, recipe, seed, data, log, time.perf_counter() - t0, directory, why)

    def load(directory: Path) -> TaskModel:
        checkpoints.load_weights(directory, model, loaded.info.device)
        model.eval()
        return model

    directory = None if cache_dir is None else checkpoint_dir(cache_dir, loaded, task_name, recipe, seed, data_dir)
    done = checkpoints.trained(directory, run, load, force)
    return FineTuned(done.model, done.meta, done.cached)


_BF16_FAILURES: dict[tuple, str | None] = {}


def _bf16_failure_of(loaded, model: TaskModel) -> str | None:
    """:func:`bf16_failure`, tried once per encoder class, config and device in a process (every seed's and task's
    fine-tune, cached or not, needs the answer for its checkpoint key)."""
    config = (getattr(loaded.info, "extra", None) or {}).get("config_sha256")
    if config is None:
        return bf16_failure(model, loaded.tokenizer)
    key = (type(loaded.model).__name__, config, str(loaded.info.device))
    if key not in _BF16_FAILURES:
        _BF16_FAILURES[key] = bf16_failure(model, loaded.tokenizer)
    return _BF16_FAILURES[key]


def bf16_failure(model: TaskModel, tokenizer) -> str | None:
    """Why a forward pass of ``model`` fails under bf16 autocast (e.g. transformers' DeBERTa v1 fills masked scores
    with float32's minimum, which overflows bfloat16), or None where it runs: one two-pair padded batch, no grad."""
    device = next(model.parameters()).device
    pairs = [glue.Example("A short sentence.", "And a second one.", 0, "bf16 check"),
             glue.Example("Another, somewhat longer sentence to pad against.", "Yes.", 0, "bf16 check")]
    batch = make_batch(encode_split(tokenizer, pairs, 32).examples, tokenizer, device, False)
    was_training = model.training
    try:
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16):
            model.eval()
            model(**batch.model_inputs())
    except RuntimeError as exc:
        if "bfloat16" not in str(exc).lower():
            raise
        return str(exc).splitlines()[0]
    finally:
        model.train(was_training)
    return None


def _meta(loaded, t, recipe, seed, data, log, seconds, directory, precision_why: str = "") -> dict:
    return {"model": loaded.info.name, "task": t.name, "seed": seed, "recipe": recipe.key(),
            "precision": "bf16 autocast" if recipe.bf16_autocast else "fp32", "precision_why": precision_why,
            "n_train": len(data.examples), "n_train_truncated": data.n_truncated, "log": log,
            "train_seconds": seconds, "device": str(loaded.info.device), "threads": torch.get_num_threads(),
            "path": str(directory) if directory else None}
