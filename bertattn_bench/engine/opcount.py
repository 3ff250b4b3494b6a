"""Counting what a reducer asks of the device, without a device (issue 47): the operators it dispatches, and the
operations that would make a GPU wait for the host or the host for the GPU.

On a GPU the attention core is launch-bound: every dispatched operator is a kernel launch, and one synchronising
operation per batch drains the queue. Both are visible on the CPU: :class:`OpCount` is a context manager that
counts every ATen operator dispatched inside it (``torch.utils._python_dispatch.TorchDispatchMode``; in-place ops
included; views, which launch no kernel, counted apart) and records each synchronising operation with its name:

* reading a device value on the host: ``.item()``, ``.cpu()``, ``.tolist()``, ``.numpy()``, ``bool()`` / ``int()``
  / ``float()`` of a tensor (``aten::_local_scalar_dense``);
* data-dependent shapes (the host must learn a size from the device): ``nonzero``, ``masked_select``, boolean
  indexing (``aten::index`` with a bool index), ``bincount``, ``unique``, ``repeat_interleave`` by a tensor;
* a blocking copy onto a device: ``.to(device)`` / ``.cuda()`` without ``non_blocking=True``, and
  ``torch.tensor`` / ``as_tensor`` / ``new_tensor`` with a ``device`` (a copy from pageable host memory).
"""
from __future__ import annotations

import os
from collections import Counter

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

HOST_READS = {"item", "cpu", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__"}
DATA_DEPENDENT = {"nonzero", "nonzero_static", "masked_select", "bincount", "unique", "_unique", "_unique2",
                  "unique_dim", "unique_consecutive", "argwhere", "_local_scalar_dense"}
CREATES_ON_DEVICE = {"tensor", "as_tensor", "new_tensor"}
IGNORED = {"detach", "lift_fresh"}  # bookkeeping of tensor creation, no kernel
NO_KERNEL = {"_unsafe_view", "_reshape_alias"}  # views by another name (matmul's reshapes)


def _op_name(func) -> str:
    name = getattr(func, "__name__", str(func))
    return name.split(".")[0]


def _has_device(args, kwargs) -> bool:
    if "device" in kwargs:
        return True
    return any(isinstance(a, (torch.device, str, int)) and not isinstance(a, bool) for a in args[1:])


class _Functions(TorchFunctionMode):
    def __init__(self, owner: "OpCount"):
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in HOST_READS:
            self.owner._sync(name)
        elif name in ("to", "cuda") and not kwargs.get("non_blocking", False) and (
                name == "cuda" or _has_device(args, kwargs)):
            self.owner._sync(f"{name}(device) blocking")
        elif name in CREATES_ON_DEVICE and "device" in kwargs:
            self.owner._sync(f"{name}(device=...)")
        return func(*args, **kwargs)


class _Dispatch(TorchDispatchMode):
    def __init__(self, owner: "OpCount"):
        super().__init__()
        self.owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _op_name(func)
        if name not in IGNORED:
            self.owner.calls += 1
            if not getattr(func, "is_view", False) and name not in NO_KERNEL:  # a view launches no kernel
                self.owner.ops[name] += 1
        if name in DATA_DEPENDENT:
            self.owner._sync(f"aten::{name}")
        elif name in ("index", "index_put", "index_put_") and any(
                isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
                for i in (args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else ())):
            self.owner._sync(f"aten::{name} (boolean mask)")
        elif name == "repeat_interleave" and isinstance(args[0], torch.Tensor) and len(args) == 1:
            self.owner._sync("aten::repeat_interleave(tensor)")
        return func(*args, **kwargs)


class OpCount:
    """``with OpCount() as c: ...`` then ``c.n_ops`` (ATen operators dispatched that compute: views, which launch
    no kernel, are left out; ``c.calls`` counts them too), ``c.ops`` (by name),
    ``c.syncs`` (synchronising operations by name), ``c.where`` (each with the first ``file:line`` outside torch
    that asked for it) and ``c.n_syncs``."""

    def __init__(self) -> None:
        self.ops: Counter = Counter()
        self.syncs: Counter = Counter()
        self.calls = 0  # every operator, views included
        self.where: Counter = Counter()  # (synchronising operation, the first file:line outside torch that asked)
        self._modes: tuple = ()

    def _sync(self, name: str) -> None:
        import traceback

        self.syncs[name] += 1
        frames = [f for f in traceback.extract_stack()[:-1]
                  if f"{os.sep}torch{os.sep}" not in f.filename and not f.filename.endswith("opcount.py")]
        self.where[(name, f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?")] += 1

    def __enter__(self) -> "OpCount":
        self._modes = (_Functions(self), _Dispatch(self))
        for m in self._modes:
            m.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for m in reversed(self._modes):
            m.__exit__(*exc)

    @property
    def n_ops(self) -> int:
        return sum(self.ops.values())

    @property
    def n_syncs(self) -> int:
        return sum(self.syncs.values())


def reducer_counts(reducer, batches, probs_of, n_layers: int) -> dict:
    """Drive ``reducer`` over ``batches`` as :func:`attention.run_reducers` does (``start_batch``, ``update`` per
    layer with ``probs_of(batch, layer)``, ``end_batch``), counting inside the batch loop only (``finalize`` is
    outside it). Returns ``{"ops_per_layer": ..., "ops_per_batch": ..., "syncs": Counter, "ops": Counter}``:
    ops_per_layer = the operators of ``update`` and ``end_batch`` per layer, ops_per_batch those of
    ``start_batch``, both averaged over the batches."""
    per_layer: list[float] = []
    per_batch: list[float] = []
    syncs: Counter[str] = Counter()
    ops: Counter[str] = Counter()
    for batch in batches:
        maps = [probs_of(batch, layer) for layer in range(n_layers)]
        with OpCount() as start:
            reducer.start_batch(batch)
        with OpCount() as layers:
            for layer, p in enumerate(maps):
                reducer.update(layer, p)
            if hasattr(reducer, "end_batch"):
                reducer.end_batch(None)
        per_layer.append(layers.n_ops / n_layers)
        per_batch.append(start.n_ops)
        syncs += start.syncs + layers.syncs
        ops += layers.ops
    n = max(len(per_layer), 1)
    return {"ops_per_layer": sum(per_layer) / n, "ops_per_batch": sum(per_batch) / n, "syncs": syncs, "ops": ops}


def top_operators(device, fn, by: str = "device", rows: int = 10) -> tuple[float, str]:
    """``fn()`` once under torch.profiler (the host's activity, and the GPU's where ``device`` is one), timed by the
    suite's one timer: its seconds and the table of its ``rows`` operators with the most self time, on the device
    (``by="device"``; the host where there is no GPU) or on the host (``by="host"``), with their call counts. The
    profiler is a development tool of the timing scripts (scripts/core_vs_floor.py, scripts/finetune_vs_naive.py)."""
    from torch.profiler import ProfilerActivity, profile

    from .passes import timed

    cuda = torch.device(device).type == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        seconds = timed(device, fn)[1]
    sort = "self_device_time_total" if cuda and by == "device" else "self_cpu_time_total"
    return seconds, prof.key_averages().table(sort_by=sort, row_limit=rows, max_name_column_width=48)
