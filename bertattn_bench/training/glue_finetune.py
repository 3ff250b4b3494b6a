"""Fine-tuning any encoder the suite loads on a GLUE task, with an on-disk checkpoint cache, and evaluation
(plain, under interventions, and as a batched sweep of configurations).

* :class:`TaskModel`: the loaded encoder (a deep copy; the session's model is never changed) + a classification or
  regression head on the first token's final hidden state (dropout → dense → tanh → dropout → linear, BERT's
  pooler + classifier, built here so that it is seeded and needs no pooler weights in the checkpoint).
* :func:`finetune`: the paper's recipe (Kovaleva §3 after Devlin et al.: batch 32, 3 epochs, at most 128 pieces;
  see :class:`Recipe` for the choices the paper leaves open). Seeded: head init, data order and dropout are
  drawn from generators seeded per (seed, epoch), so a run resumed from its last finished epoch continues
  exactly as an uninterrupted one.
* :func:`finetuned`: fine-tune once per (base weights, task, recipe, seed, data, trainer code) and keep it under
  ``<cache>/finetune/``; a file lock makes two workers share one training; an interrupted run resumes.
* :func:`predict`: evaluation (the sweep of head configurations is :mod:`bertattn_bench.training.sweeps`, kept out of this
  module so that changing it does not change the checkpoints' key).
* the training precision and the step as CUDA graphs are chosen in :mod:`.precision` and recorded in the recipe
  (the key) and the checkpoint's meta.
"""
from __future__ import annotations

import copy
import os
import time
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..base.errors import DataError, one_line
from ..data import glue
from ..engine import attention
from ..engine.batching import (
    Encoded,
    in_data_order,
    iter_batches,
    length_order,
    make_batch,
    model_inputs,
    padded,
    to_device,
    to_device_parts,
)
from . import checkpoints, step_graphs
from .precision import device_class, with_precision, with_step_graphs

TRAINER_VERSION = "1"  # bump when a change to training changes the weights it produces


@dataclass(frozen=True)
class Recipe:
    """Fine-tuning hyper-parameters. Batch 32 and 3 epochs are the paper's (Kovaleva §3: "batch size of 32 and 3
    epochs"). The paper states nothing else; we take the defaults of the authors' ``run_classifier.py``: at most 128
    word pieces per input (its ``--max_seq_length`` default), learning rate 5e-5, linear warm-up over the first 10%
    of steps then linear decay, weight decay 0.01 off biases and LayerNorm. The optimiser is not BertAdam: we use
    torch's AdamW (bias-corrected, eps 1e-8) and clip the gradient's global norm at 1.0, where BertAdam clips each
    parameter's gradient at norm 1.0, has no bias correction and eps 1e-6 (a deviation, docs/kovaleva.md)."""

    epochs: int = 3
    batch_size: int = 32
    lr: float = 5e-5
    warmup: float = 0.1
    weight_decay: float = 0.01
    max_tokens: int = 128
    max_train: int | None = None  # subsample the training set (seeded) to this many examples (SST-2 on CPU)
    # mixed precision: forward/backward matmuls in bfloat16 under autocast, weights, optimiser and loss in float32
    # (standard fine-tuning practice; 1.56x faster than fp32 on an AVX512-BF16 CPU, ~1.9x with AMX). Evaluation is
    # always float32. The recorded baselines were trained with it. :func:`.precision.with_precision` turns it off where the
    # hardware has no bf16 units ("auto", the default) or as ``BERTATTN_FT_PRECISION`` says.
    bf16_autocast: bool = True
    # on a CUDA device: the training step replayed as CUDA graphs, one per batch shape (:mod:`.step_graphs`), and
    # each batch padded to a multiple of this many pieces (fewer shapes, fewer captures). Off by default: it
    # changes the dropout masks' shapes, so the trained numbers, and its speed-up is to be measured on a GPU first
    # (scripts/gpu_check.sh, the ``ours-graphs`` variant); on a CPU the step is eager whatever this says
    step_graphs: bool = False
    pad_to_multiple: int = 1

    def key(self) -> dict:
        d = asdict(self)
        for name, default in (("step_graphs", False), ("pad_to_multiple", 1)):  # absent at their defaults: the
            if d[name] == default:  # keys and metas of every checkpoint trained before they existed stay put
                del d[name]
        return d


# ---- the model -----------------------------------------------------------------------------------------------

class TaskModel(torch.nn.Module):
    """Encoder + head; ``forward`` returns logits ``(B, C)`` (``(B,)`` for regression)."""

    def __init__(self, encoder: torch.nn.Module, num_labels: int, seed: int):
        super().__init__()
        self.encoder = encoder
        self.config = encoder.config  # attention.attention_modules checks the attention implementation here
        hidden = int(encoder.config.hidden_size)
        p = float(getattr(encoder.config, "hidden_dropout_prob", 0.1))
        gen = torch.Generator().manual_seed(seed)
        dense, out = torch.nn.Linear(hidden, hidden), torch.nn.Linear(hidden, num_labels)
        std = float(getattr(encoder.config, "initializer_range", 0.02))
        with torch.no_grad():
            for lin in (dense, out):  # BERT's init: normal(0, initializer_range), zero bias
                lin.weight.copy_(torch.randn(lin.weight.shape, generator=gen) * std)
                lin.bias.zero_()
        self.head = torch.nn.Sequential(torch.nn.Dropout(p), dense, torch.nn.Tanh(), torch.nn.Dropout(p), out)
        self.num_labels = num_labels

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        hidden = self.encoder(**model_inputs(self.encoder, input_ids, attention_mask, token_type_ids)).last_hidden_state[:, 0]
        logits = self.head(hidden)
        return logits[:, 0] if self.num_labels == 1 else logits


def task_model(loaded, t: glue.Task, seed: int) -> TaskModel:
    """A fresh task model on the loaded encoder (deep-copied), head seeded by ``seed``."""
    encoder = copy.deepcopy(loaded.model)
    model = TaskModel(encoder, t.num_labels, seed).to(loaded.info.device)
    model.eval()
    return model


def loss_per_example(t: glue.Task, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    if t.is_regression:
        return (logits - labels) ** 2
    return torch.nn.functional.cross_entropy(logits, labels.long(), reduction="none")


# ---- data ----------------------------------------------------------------------------------------------------

@dataclass
class Encoded_:
    """A task split tokenised: the examples (``Encoded``), labels in the same order, and how many were cut."""

    examples: list[Encoded]
    labels: np.ndarray
    n_truncated: int
    max_tokens: int
    sources: list[str] = field(default_factory=list)
    origin: object = None  # the eval_sets.EvalSource the rows came from (None: the shipped TSV)
    origin_text: str = ""  # " from SOURCE (rows sha256:...)": the origin as a pass's description (its key) says it


def encode_split(tokenizer, rows: Sequence[glue.Example], max_tokens: int) -> Encoded_:
    """``[CLS] a [SEP] (b [SEP])`` truncated to ``max_tokens`` pieces (longest first, as run_classifier.py)."""
    if not rows:
        raise DataError("no examples to encode")
    a = [r.text_a for r in rows]
    b = [r.text_b for r in rows] if rows[0].text_b is not None else None
    full = tokenizer(a, b, truncation=False)["input_ids"]
    enc = tokenizer(a, b, truncation="longest_first", max_length=max_tokens)
    examples = []
    for i, ids in enumerate(enc["input_ids"]):
        types = enc["token_type_ids"][i] if "token_type_ids" in enc else [0] * len(ids)
        examples.append(Encoded(i, list(ids), list(types), [-1] * len(ids), 0))
    n_trunc = sum(len(f) > max_tokens for f in full)
    return Encoded_(examples, np.array([r.label for r in rows], dtype=np.float32), n_trunc, max_tokens,
                    [r.source for r in rows])


# ---- training ------------------------------------------------------------------------------------------------

def _optimizer(model: TaskModel, recipe: Recipe, total_steps: int, capturable: bool = False):
    """AdamW with weight decay off biases and LayerNorm, and the linear warm-up/decay schedule. ``capturable``: for
    a step captured in a CUDA graph, the learning rate is a device tensor per group (the scheduler fills it; a float
    would be frozen into the graph) and the step count lives on the device."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if (name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name) else decay).append(p)
    # on a GPU the fused kernel (one launch for every parameter's update; issue 47); elsewhere the foreach
    # implementation: on the CPU bit for bit the per-parameter loop the recorded baselines were trained with (torch's
    # default there) and 84 -> 69 ms a MiniLM step (docs/speed.md, stop 57; the fused CPU kernel, 18 ms, is not:
    # it moves the weights by a rounding step and every fine-tuned value with them)
    device = next(model.parameters()).device
    fused = True if device.type == "cuda" else None
    foreach = None if fused else True
    lr = (lambda: torch.tensor(recipe.lr, device=device)) if capturable else (lambda: recipe.lr)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": recipe.weight_decay, "lr": lr()},
                             {"params": no_decay, "weight_decay": 0.0, "lr": lr()}], lr=recipe.lr, fused=fused,
                            foreach=foreach, capturable=capturable)
    warm = max(1, int(recipe.warmup * total_steps))

    def schedule(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total_steps - step) / max(1, total_steps - warm))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, schedule)


def _epoch_seed(seed: int, epoch: int) -> int:
    return 1_000_003 * (seed + 1) + 7919 * epoch


def epoch_batches(examples: Sequence[Encoded], batch_size: int, seed: int, pool: int = 50) -> list[list[int]]:
    """One epoch's batches: a seeded random order, cut into pools of ``pool`` batches, each pool sorted by length
    and cut into batches, then the batches shuffled. Every example once per epoch, random batches as the
    paper's recipe, but with little padding (the CPU time of a fine-tune roughly halves on MRPC)."""
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(examples), generator=gen).tolist()
    batches = []
    for p0 in range(0, len(order), pool * batch_size):
        pool_ids = order[p0:p0 + pool * batch_size]
        chunk = [pool_ids[k] for k in length_order([len(examples[i].input_ids) for i in pool_ids])]
        batches += [chunk[b0:b0 + batch_size] for b0 in range(0, len(chunk), batch_size)]
    perm = torch.randperm(len(batches), generator=gen).tolist()
    return [batches[i] for i in perm]


def epoch_on_device(data: Encoded_, batches: Sequence[Sequence[int]], pad_id: int, device, multiple: int = 1
                    ) -> list[tuple[dict, torch.Tensor]]:
    """An epoch's batches, padded on the host (:func:`~bertattn_bench.engine.batching.padded`) and sent to
    ``device`` in two copies, the pieces' three fields and the labels, then cut into each batch's model inputs and
    labels (views: no step pads, pins or copies anything; on a launch-bound GPU each of those is host time, issue
    47). The same tensors, value for value, as padding each batch at its step. ``multiple``: each batch padded to
    a multiple of this many pieces, never beyond the longest example of ``data`` (fewer shapes, for step graphs)."""
    host = []
    cap = max(len(e.input_ids) for e in data.examples) if multiple > 1 else None
    for idx in batches:
        ids, types, mask = padded([data.examples[i] for i in idx], pad_id, multiple, cap)
        host += [ids, types, mask.astype(np.int64)]
    fields = to_device_parts(host, device)
    labels = to_device(np.concatenate([data.labels[list(idx)] for idx in batches]), device)
    out, start = [], 0
    for k, idx in enumerate(batches):
        ids, types, mask = fields[3 * k:3 * k + 3]
        out.append(({"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
                    labels[start:start + len(idx)]))
        start += len(idx)
    return out


def _resume_state(state_path: Path, model: TaskModel, device) -> dict | None:
    """The resume state at ``state_path`` (written by :func:`train` after an epoch), read with ``weights_only=True``
    (tensors and plain containers only: nothing in the file can run code), or None with a warning when it is
    missing parts, holds anything else, or was saved from another model's parameters (names or shapes)."""
    import pickle
    import warnings

    if not state_path.is_file():
        return None
    try:
        state = torch.load(state_path, map_location=device, weights_only=True)
        ok = isinstance(state, dict) and {"epoch", "model", "optimizer", "scheduler", "log"} <= set(state)
        ours = model.state_dict()
        ok = ok and isinstance(state["epoch"], int) and isinstance(state["log"], dict) and set(state["model"]) == set(
            ours) and all(getattr(state["model"][k], "shape", None) == v.shape for k, v in ours.items())
        why = "not this model's training state (keys or shapes differ)"
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError, OSError, AttributeError) as exc:
        ok, why = False, f"not a plain-tensor state ({one_line(exc)})"
    if not ok:
        warnings.warn(f"{state_path}: {why}; training from the first epoch", UserWarning, stacklevel=3)
        state_path.unlink(missing_ok=True)
        return None
    return state


@contextmanager
def _training_attention(model: TaskModel, on_gpu: bool | None = None):
    """Training reads no attention map: on a GPU the encoder trains with torch's fused attention (transformers'
    ``sdpa`` function under :data:`attention.TRAINING_ATTN_IMPLEMENTATION`, its mask built without asking the device
    about padding: fewer kernels, no wait per step, measured in docs/speed.md) where its code can switch implementation
    (transformers' attention interface), and is switched back to the project's eager attention afterwards; on the
    CPU, and for models that cannot switch, training is unchanged (the recorded baselines' numbers). ``on_gpu``:
    the model's device decides where None (tests say it)."""
    if on_gpu is None:
        on_gpu = next(model.parameters()).device.type == "cuda"
    encoder = getattr(model, "encoder", None)
    measured = getattr(getattr(encoder, "config", None), "_attn_implementation", None)
    switched = False
    if on_gpu and getattr(encoder, "_supports_attention_backend", False) and measured is not None:
        try:
            encoder.set_attn_implementation(attention.TRAINING_ATTN_IMPLEMENTATION)
            switched = True
        except Exception:  # noqa: BLE001 - a model that cannot switch trains as it is
            pass
    try:
        yield
    finally:
        if switched:
            encoder.set_attn_implementation(measured)


def train(model: TaskModel, t: glue.Task, data: Encoded_, tokenizer, recipe: Recipe, seed: int,
          state_path: Path | None = None, progress: bool = False, desc: str = "fine-tune",
          stop_after_epoch: int | None = None) -> dict:
    """Fine-tune ``model`` in place; after every epoch the full state goes to ``state_path`` (resume).
    ``stop_after_epoch``: return after that many epochs of the full schedule (tests of resuming)."""
    device = next(model.parameters()).device
    steps_per_epoch = len(epoch_batches(data.examples, recipe.batch_size, 0))
    total = steps_per_epoch * recipe.epochs
    capture = step_graphs.capture_for(device) if recipe.step_graphs else None
    opt, sched = _optimizer(model, recipe, total, capturable=capture is not None and device.type == "cuda")
    log = {"loss_per_epoch": [], "seconds_per_epoch": [], "resumed_from_epoch": 0, "steps": total}
    start_epoch = 0
    state = _resume_state(state_path, model, device) if state_path is not None else None
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        start_epoch, log = state["epoch"], state["log"]
        log["resumed_from_epoch"] = start_epoch
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=start_epoch * steps_per_epoch, desc=desc, unit="step", leave=False,
                   disable=None)
    # the epoch's loss is summed on the device in float64 (the same sums as Python floats of each step's loss) and
    # read once at the epoch's end: no step waits for the device (issue 47)
    total_loss = torch.zeros((), dtype=torch.float64, device=device)
    step = _Step(model, t, opt, recipe, total_loss, graphed=capture is not None)
    run = step_graphs.ShapeGraphs(step, capture) if capture is not None else step
    with _training_attention(model):
        for epoch in range(start_epoch, recipe.epochs):
            model.train()
            batches = epoch_batches(data.examples, recipe.batch_size, _epoch_seed(seed, epoch))
            torch.manual_seed(_epoch_seed(seed, epoch) + 1)  # dropout of this epoch
            t0, seen = time.perf_counter(), 0
            total_loss.zero_()
            for inputs, y in epoch_on_device(data, batches, tokenizer.pad_token_id, device, recipe.pad_to_multiple):
                run(inputs, y)
                sched.step()
                seen += len(y)
                if bar is not None:
                    bar.set_postfix(ex_per_s=f"{seen / (time.perf_counter() - t0):.0f}", refresh=False)
                    bar.update(1)  # draws at tqdm's own pace (a refresh per step is host time on a GPU)
            log["loss_per_epoch"].append(float(total_loss) / seen)
            if bar is not None:
                bar.set_postfix(loss=f"{log['loss_per_epoch'][-1]:.4f}")
            log["seconds_per_epoch"].append(time.perf_counter() - t0)
            if state_path is not None:
                tmp = state_path.with_suffix(f".tmp{os.getpid()}")
                torch.save({"epoch": epoch + 1, "model": model.state_dict(), "optimizer": opt.state_dict(),
                            "scheduler": sched.state_dict(), "log": log}, tmp)
                os.replace(tmp, state_path)
            if stop_after_epoch is not None and epoch + 1 >= stop_after_epoch:
                break
    if bar is not None:
        bar.close()
    if capture is not None:
        log["step_graphs"] = run.log
        opt.zero_grad(set_to_none=True)  # the graphs' persistent gradients go with them
    model.eval()
    return log


class _Step:
    """One training step: forward under the recipe's precision, the loss, backward, the gradient's global norm
    clipped at 1.0, the optimiser's update, the gradients zeroed, the batch's loss added to the epoch's sum on the
    device. ``graphed``: run inside CUDA graphs (:mod:`.step_graphs`), where the cast cache of autocast must be off;
    ``keep_grads`` (set by the graphs before their first capture): zero the gradients in place, not to None;
    ``trained``: the parameters the first call's loss reached (None before it)."""

    def __init__(self, model: TaskModel, t: glue.Task, opt, recipe: Recipe, total_loss: torch.Tensor,
                 graphed: bool = False):
        self.model, self.t, self.opt, self.total_loss = model, t, opt, total_loss
        self.params = list(model.parameters())
        self.autocast = {"dtype": torch.bfloat16, "enabled": recipe.bf16_autocast}
        if graphed:
            self.autocast["cache_enabled"] = False
        self.device_type = self.params[0].device.type
        self.keep_grads = False
        self.trained: list | None = None

    def __call__(self, inputs: dict, y: torch.Tensor) -> None:
        with torch.autocast(self.device_type, **self.autocast):
            logits = self.model(**inputs)
        loss = loss_per_example(self.t, logits.float(), y).mean()
        loss.backward()
        if self.trained is None:
            self.trained = [p for p in self.params if p.grad is not None]
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=not self.keep_grads)
        self.total_loss += loss.detach().double() * len(y)


# ---- evaluation ----------------------------------------------------------------------------------------------

def predict(model: TaskModel, data: Encoded_, tokenizer, batch_size: int = 64,
            interventions: Sequence[attention.Intervention] = ()) -> np.ndarray:
    """Logits for every example, in data order (batches sorted by length; padding never changes a logit)."""
    device = next(model.parameters()).device
    positions, rows = [], []
    with closing(attention.forward(model, iter_batches(data.examples, tokenizer, device, batch_size),
                                   interventions=interventions)) as outputs:
        for batch, logits in outputs:
            positions.append(batch.positions)
            rows.append(logits.float().cpu().numpy())
    return in_data_order(positions, rows)


def to_predictions(t: glue.Task, logits: np.ndarray) -> np.ndarray:
    return logits if t.is_regression else logits.argmax(-1)


# ---- the checkpoint cache ------------------------------------------------------------------------------------

# imported by the modules above but not read by training: scoring (stats: STS-B's Spearman in the GLUE reader),
# messages (errors) and the environment table (settings: the precision it selects is in the recipe key). A change
# there leaves the trained weights, and so the checkpoints, as they are.
NOT_TRAINING_MODULES = tuple(f"{__package__.split('.')[0]}.{m}" for m in ("claims.stats", "base.errors", "base.settings"))


def _sources_version() -> str:
    """What the trained weights depend on in our code: this module and every package module it imports (the GLUE
    reader, batching, the attention core, ...) except :data:`NOT_TRAINING_MODULES`, plus ``TRAINER_VERSION``."""
    from ..base.hashing import KEY_ONLY_MODULES, module_version

    return f"{TRAINER_VERSION}-{module_version(__name__, exclude=KEY_ONLY_MODULES + NOT_TRAINING_MODULES)}"


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
           "data": data_fingerprint(files), "code": _sources_version()}
    return checkpoints.checkpoint_dir(cache_dir, "finetune", loaded.info.slug, f"{task_name}-seed{seed}", doc)


def training_rows(data_dir: Path, task_name: str, recipe: Recipe, seed: int) -> list[glue.Example]:
    t = glue.task(task_name)
    if not glue.has_split(data_dir, t, "train"):
        raise DataError(f"GLUE {t.folder} has no train.tsv under {Path(data_dir) / glue.GLUE_DIR / t.folder}: "
                        f"it cannot be fine-tuned here (dev-only task)")
    rows = glue.load_split(data_dir, task_name, "train")
    if recipe.max_train and len(rows) > recipe.max_train:
        keep = np.random.default_rng(seed).choice(len(rows), recipe.max_train, replace=False)
        rows = [rows[i] for i in sorted(keep)]
    return rows


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
    if cache_dir is None:
        rows = training_rows(data_dir, task_name, recipe, seed)
        data = encode_split(loaded.tokenizer, rows, min(recipe.max_tokens, loaded.info.max_positions))
        t0 = time.perf_counter()
        log = train(model, t, data, loaded.tokenizer, recipe, seed, None, progress, f"fine-tune {task_name}/{seed}")
        return FineTuned(model, _meta(loaded, t, recipe, seed, data, log, time.perf_counter() - t0, None, why), False)
    directory = checkpoint_dir(cache_dir, loaded, task_name, recipe, seed, data_dir)
    with checkpoints.locked(directory):
        meta = None if force else checkpoints.complete_meta(directory)
        if meta is not None:
            checkpoints.load_weights(directory, model, loaded.info.device)
            model.eval()
            return FineTuned(model, meta, True)
        state = directory / "partial-state.pt"
        checkpoints.start(directory, force, (state.name,))
        rows = training_rows(data_dir, task_name, recipe, seed)
        data = encode_split(loaded.tokenizer, rows, min(recipe.max_tokens, loaded.info.max_positions))
        t0 = time.perf_counter()
        log = train(model, t, data, loaded.tokenizer, recipe, seed, state, progress, f"fine-tune {task_name}/{seed}")
        meta = _meta(loaded, t, recipe, seed, data, log, time.perf_counter() - t0, directory, why)
        checkpoints.save(directory, model, meta, (state.name,))
        return FineTuned(model, meta, False)


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
