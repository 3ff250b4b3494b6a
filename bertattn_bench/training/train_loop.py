"""The training loop of a fine-tune (GLUE's :mod:`.glue_finetune`, ARCT's :mod:`.arct_finetune`): the paper's
recipe (Kovaleva §3 after Devlin et al.: batch 32, 3 epochs, at most 128 pieces; see :class:`Recipe` for the choices
the paper leaves open). Seeded: head init, data order and dropout are drawn from generators seeded per (seed,
epoch), so a run resumed from its last finished epoch (:func:`train`'s state file) continues exactly as an
uninterrupted one. The training precision and the step as CUDA graphs are chosen in :mod:`.precision` and recorded
in the recipe (the checkpoint's key) and its meta.
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..base.errors import one_line
from ..data import glue
from ..engine import attention
from ..engine.batching import Encoded, length_order, padded, to_device, to_device_parts
from . import step_graphs
from .task_model import EncodedSplit, TaskModel, loss_per_example


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


def epoch_on_device(data: EncodedSplit, batches: Sequence[Sequence[int]], pad_id: int, device, multiple: int = 1
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


def train(model: TaskModel, t: glue.Task, data: EncodedSplit, tokenizer, recipe: Recipe, seed: int,
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

