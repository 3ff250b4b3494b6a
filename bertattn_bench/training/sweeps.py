"""The batched sweep of head configurations over a dev set (Kovaleva §4.6 disabling, Michel §3 masking), with
the plain model's prefix computed once and shared.

Every batch row carries its own configuration (:class:`attention.UniformRows` or per-row gates), and a
configuration whose first intervened layer is ``l`` computes exactly the plain model's hidden states below ``l``:
so each batch of examples runs once plainly (each encoder layer's output kept by forward hooks), and the
configurations, grouped by their first intervened layer, run only layers ``l..L-1`` (the layers below return the
kept output, repeated per configuration row). The sharing is at the encoder-layer boundary, never inside attention.

Kept out of :mod:`bertattn_bench.training.glue_finetune` so that the fine-tuned checkpoints' cache key (which covers that module
and what it imports) does not change when the evaluation does.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Sequence

import numpy as np
import torch

from ..engine import attention
from ..engine.batching import iter_batches
from .task_model import EncodedSplit, TaskModel


def encoder_layers(model: torch.nn.Module) -> list[torch.nn.Module] | None:
    """The encoder's layers in order (one ``ModuleList`` entry per hidden layer, each holding that layer's
    self-attention module), or ``None`` where layers share modules (ALBERT) or no such list is found: there a
    sweep runs every configuration through the whole model."""
    mods = attention.attention_modules(model)
    n_l = int(model.config.num_hidden_layers)
    if len(mods) != n_l:
        return None
    for lst in model.modules():
        if isinstance(lst, torch.nn.ModuleList) and len(lst) == n_l and all(
                any(m is mod for m in layer.modules()) for layer, mod in zip(lst, mods)):
            return list(lst)
    return None


def first_layers(masks: torch.Tensor) -> list[int]:
    """Per configuration ``(C, L, H)``: its first intervened layer (0-based; ``L`` for a configuration with none)."""
    n_l = masks.shape[1]
    touched = masks.any(-1)  # (C, L)
    return [int(t.nonzero()[0, 0]) if bool(t.any()) else n_l for t in touched]


def _repeat_rows(x, k: int):
    """A layer's output with every tensor's batch rows repeated ``k`` times, configuration-major."""
    if isinstance(x, torch.Tensor):
        return x.repeat(k, *([1] * (x.dim() - 1)))
    if isinstance(x, tuple):
        return type(x)(_repeat_rows(v, k) for v in x)
    return x


@contextmanager
def _prefix_served(layers: Sequence[torch.nn.Module], outputs: Sequence, first: int, k: int):
    """While active, layers ``0..first-1`` compute nothing: each returns layer ``first-1``'s output of the plain
    pass, repeated for ``k`` configurations (what those layers compute for a configuration that first intervenes
    in layer ``first``), so only layers ``first..L-1`` run."""
    if first == 0:
        yield
        return
    served = _repeat_rows(outputs[first - 1], k)
    saved = [layer.__dict__.get("forward") for layer in layers[:first]]

    def serve(*args, **kwargs):
        return served

    try:
        for layer in layers[:first]:
            layer.forward = serve
        yield
    finally:
        for layer, old in zip(layers[:first], saved):
            if old is None:
                del layer.forward
            else:
                layer.forward = old


@contextmanager
def _captured(layers: Sequence[torch.nn.Module], outputs: list, inputs: list | None = None):
    """Record each layer's output (in layer order) into ``outputs`` while active, and, with ``inputs``, the hidden
    states each layer was called with (its first tensor argument)."""
    handles = [layer.register_forward_hook(lambda m, a, o, i=i: outputs.__setitem__(i, o))
               for i, layer in enumerate(layers)]
    if inputs is not None:
        def pre(m, args, kwargs, i):
            first = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
            inputs.__setitem__(i, first)

        handles += [layer.register_forward_pre_hook(lambda m, a, k, i=i: pre(m, a, k, i), with_kwargs=True)
                    for i, layer in enumerate(layers)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _leading(x):
    return x if isinstance(x, torch.Tensor) else next((v for v in x if isinstance(v, torch.Tensor)), None) \
        if isinstance(x, tuple) else None


def prefix_servable(inputs: list, outputs: list, batch: int, length: int) -> bool:
    """Whether serving kept outputs is exact for this batch: the layers form a chain (layer i+1 is called with
    layer i's output: not so where the list holds only each layer's attention, as XLM's, with its feed-forward
    block between them) and their outputs are batch-first ``(batch, length, ...)`` (not so for XLNet's
    sequence-first layers; where batch == length the layout cannot be told and nothing is served)."""
    if batch == length:
        return False
    for i, out in enumerate(outputs):
        lead = _leading(out)
        if lead is None or lead.dim() < 2 or tuple(lead.shape[:2]) != (batch, length):
            return False
        if i + 1 < len(outputs):
            nxt = inputs[i + 1]
            if nxt is None or nxt.shape != lead.shape or not (nxt.data_ptr() == lead.data_ptr()
                                                               or torch.equal(nxt, lead)):
                return False
    return True


def sweep_layer_passes(configs: Sequence[Sequence[tuple[int, int]]], n_layers: int, share_prefix: bool = True) -> int:
    """Layer passes per example (ignoring batching) of a sweep: ``C x L`` without prefix sharing, else one plain
    pass (``L``) plus ``L - l`` per configuration whose first intervened layer is ``l``."""
    if not share_prefix:
        return len(configs) * n_layers
    firsts = [min(layer for layer, _ in heads) if heads else n_layers for heads in configs]
    return n_layers + sum(n_layers - f for f in firsts)


# Rows per forward pass and examples per batch of a sweep, by device type (``sweep``'s defaults). On a CPU a pass
# of 16 length-sorted examples x 4 configurations ran at 0.93x a plain batch-32 pass per configuration, 256 rows of
# 32 examples x 8 configurations at 1.12x (MiniLM, MRPC dev, 2 cores; docs/speed.md): the attention tensors of a
# 256-row pass fall out of cache and a 32-example batch pads more. A GPU wants wide passes.
PASS_SHAPE = {"cpu": (64, 16), "cuda": (256, 32)}


def pass_shape(device: torch.device, rows_per_pass: int | None, examples_per_batch: int | None) -> tuple[int, int]:
    """``(rows_per_pass, examples_per_batch)``: the given ones, else the device type's (:data:`PASS_SHAPE`)."""
    rows, examples = PASS_SHAPE.get(torch.device(device).type, PASS_SHAPE["cuda"])
    return rows_per_pass or rows, examples_per_batch or examples


def sweep(model: TaskModel, data: EncodedSplit, tokenizer, configs: Sequence[Sequence[tuple[int, int]]],
          kind: str = "uniform", rows_per_pass: int | None = None, examples_per_batch: int | None = None,
          progress: bool = False, desc: str = "sweep", share_prefix: bool = True) -> np.ndarray:
    """Logits ``(C, N, ...)`` of every configuration (a list of 0-based heads to disable) on every example.

    Each forward pass holds ``examples_per_batch`` length-sorted examples repeated for ``k`` configurations
    (``rows_per_pass // examples_per_batch``; both by default the device type's, :data:`PASS_SHAPE`); row
    ``j*b + i`` is example i under configuration j, set per row by :class:`attention.UniformRows`
    (``kind="uniform"``, Kovaleva) or per-row gates (``kind="mask"``, Michel).

    Prefix sharing (``share_prefix``, on by default): a configuration whose first intervened layer is ``l``
    computes exactly the plain model's hidden states below ``l``. So each batch runs once plainly (each encoder
    layer's output kept), and the configurations, grouped by first intervened layer, run layers ``l..L-1`` only
    (the layers below return the kept output, :func:`_prefix_served`). For a single-head + single-layer sweep that
    is about ``(L + 1) / 2L`` of the plain passes' cost instead of 1 (0.59 for 6 x 12) (:func:`sweep_layer_passes`). Models
    whose layers share modules (ALBERT) run every configuration through the whole model, and so does every batch
    where serving kept outputs cannot be shown exact (:func:`prefix_servable`: XLM's attention-only list, XLNet's
    sequence-first layers).
    """
    if kind not in ("uniform", "mask"):
        raise ValueError(f"sweep kind {kind!r}: 'uniform' or 'mask'")
    device = next(model.parameters()).device
    rows_per_pass, examples_per_batch = pass_shape(device, rows_per_pass, examples_per_batch)
    n_l, n_h = attention.layers_heads(model)
    masks = torch.zeros(len(configs), n_l, n_h, dtype=torch.bool)
    for c, heads in enumerate(configs):
        for layer, head in heads:
            if not (0 <= layer < n_l and 0 <= head < n_h):
                raise ValueError(f"configuration {c}: head {attention.head_name(layer, head)} is outside {n_l}x{n_h}")
            masks[c, layer, head] = True
    layers = encoder_layers(model) if share_prefix else None
    firsts = first_layers(masks) if layers is not None else [0] * len(configs)
    groups: dict[int, list[int]] = {}
    for c, f in enumerate(firsts):
        groups.setdefault(f, []).append(c)
    masks = masks.to(device)
    n = len(data.examples)
    b = max(1, min(examples_per_batch, n))
    k = max(1, rows_per_pass // b)
    chunks = [(f, cs[c0:c0 + k]) for f, cs in sorted(groups.items()) for c0 in range(0, len(cs), k)]
    out = None
    rows = attention.UniformRows()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=math.ceil(n / b) * (len(chunks) + (layers is not None)), desc=desc, unit="pass",
                   leave=False, disable=None)
    with torch.inference_mode():
        for batch in iter_batches(data.examples, tokenizer, device, b):
            idx = batch.positions
            inputs = batch.model_inputs()
            outputs, called = [None] * n_l, [None] * n_l
            servable = False
            if layers is not None:
                with _captured(layers, outputs, called):
                    model(**inputs)
                servable = prefix_servable(called, outputs, len(idx), inputs["input_ids"].shape[1])
                if bar is not None:
                    bar.update(1)
            for first, cs in chunks:
                kk = len(cs)
                sel = torch.as_tensor(cs, device=device)
                rep = {name: x.repeat(kk, 1) for name, x in inputs.items()}
                row_mask = masks[sel].repeat_interleave(len(idx), dim=0)  # (k'*b, L, H), config-major
                if kind == "uniform":
                    ivs = [rows.set(row_mask).intervention()]
                else:
                    ivs = [attention.gate_heads((~row_mask).float())]
                with attention.attention_run(model, interventions=ivs), \
                        _prefix_served(layers or [], outputs, first if servable else 0, kk):
                    logits = model(**rep).float().cpu().numpy()
                logits = logits.reshape(kk, len(idx), *logits.shape[1:])
                if out is None:
                    out = np.zeros((len(configs), n, *logits.shape[2:]), dtype=np.float32)
                out[np.ix_(cs, idx)] = logits
                if bar is not None:
                    bar.update(1)
    if bar is not None:
        bar.close()
    return out


# ---- one seed's sweep kept with its checkpoint ------------------------------------------------------------------


# Modules in the sweep code's import closure that cannot change its logits, left out of the key with what only they
# import: the timer (``engine.passes``, and through it the model loader ``engine.model``: a sweep is given a loaded
# model), the settings reader (its help texts) and the error messages. Stop 68: an edited help text in
# ``base.settings`` made every kept sweep be computed again.
NOT_IN_SWEEP_KEY = tuple(f"{__package__.rpartition('.')[0]}.{m}" for m in ("engine.passes", "base.settings",
                                                                           "base.errors"))


def sweep_code_version() -> str:
    """The code part of :func:`sweep_key`: this module and what it imports, without :data:`NOT_IN_SWEEP_KEY` and the
    key-only modules (the hasher)."""
    from ..base.hashing import KEY_ONLY_MODULES, module_version

    return module_version(__name__, exclude=KEY_ONLY_MODULES + NOT_IN_SWEEP_KEY)


def sweep_key(data: EncodedSplit, configs: Sequence[Sequence[tuple[int, int]]], kind: str, rows_per_pass: int,
              examples_per_batch: int, device) -> str:
    """What a sweep's logits depend on besides the weights (the checkpoint folder they are kept in): the examples'
    pieces in order, the configurations, the kind, the pass shape (the batching orders float sums), the device type,
    torch's version and the sweep code (:func:`sweep_code_version`)."""
    import hashlib
    import json

    from ..base.hashing import pieces_digest

    doc = {"data": pieces_digest(data.examples), "configs": [sorted(map(list, c)) for c in configs],
           "kind": kind, "shape": [rows_per_pass, examples_per_batch], "device": torch.device(device).type,
           "torch": torch.__version__, "code": sweep_code_version()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]


def cached_sweep(directory, model: TaskModel, data: EncodedSplit, tokenizer,
                 configs: Sequence[Sequence[tuple[int, int]]], kind: str = "uniform", rows_per_pass: int | None = None,
                 examples_per_batch: int | None = None, progress: bool = False,
                 desc: str = "sweep") -> tuple[np.ndarray, float, bool]:
    """(logits, seconds, found) of :func:`sweep`, kept in ``directory/sweeps/`` (a fine-tune's checkpoint folder:
    the weights are its key) under :func:`sweep_key`: a seed's sweep is computed once, whichever run or set of seeds
    asks for it (the regression tier's seeds 0-2 and a check's 1-3 share two). ``seconds`` is the computing run's
    time (a found sweep reports the time it took, not the read). ``directory`` None: computed, nothing kept. A file
    that cannot be read is computed again and replaced."""
    import os
    import zipfile
    from pathlib import Path

    from ..engine.passes import timed

    device = next(model.parameters()).device
    rows, examples = pass_shape(device, rows_per_pass, examples_per_batch)
    path = None if directory is None else (
        Path(directory) / "sweeps" / f"{sweep_key(data, configs, kind, rows, examples, device)}.npz")
    if path is not None and path.is_file():
        try:
            with np.load(path) as z:
                logits, seconds = z["logits"], float(z["seconds"])
            if logits.shape[:2] == (len(configs), len(data.examples)):
                return logits, seconds, True
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            pass  # a torn or foreign file: computed again below and replaced
    logits, seconds = timed(device, lambda: sweep(model, data, tokenizer, configs, kind, rows, examples,
                                                  progress=progress, desc=desc))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, logits=logits, seconds=np.float64(seconds))
        os.replace(tmp, path)
    return logits, seconds, False
