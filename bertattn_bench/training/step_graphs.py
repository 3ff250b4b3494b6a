"""The fine-tune's training step replayed as CUDA graphs, one graph per batch shape (issue 47).

On a GPU a small encoder's training step is launch-bound: MiniLM's step launches about 490 kernels and keeps the
device busy a third of the step (docs/speed.md, stop 53); the rest is the host dispatching operators one by one. A
CUDA graph records the whole step once (forward, backward, clipping, the optimiser's update, the epoch's loss sum)
and replays it with one launch. A graph fixes its tensors' shapes and addresses, so :class:`ShapeGraphs` keeps one
graph per input shape, with its own input buffers: each step copies its batch into them and replays. Batches padded
to a multiple of a few pieces (``Recipe.pad_to_multiple``) keep the number of shapes, and so of captures, small.

What a captured step needs, and this module arranges (PyTorch's "CUDA Graphs" notes, "whole-network capture"):

* the optimiser's state and every lazy initialisation exist before the first capture: the first step runs eagerly,
  on the side stream the graphs are captured on (the notes' warm-up, so that the libraries' per-stream state, such
  as cuBLAS's workspace, exists before a capture needs it);
* gradients live outside the graphs' memory and are zeroed in place (``zero_grad(set_to_none=False)``), so that
  every graph reads and writes the same persistent tensors; the epoch's loss sum is one persistent tensor too;
* the learning rate is a device tensor that the scheduler fills (a Python float would be frozen into the graph),
  and the optimiser is ``capturable`` (its step count on the device);
* nothing in the step reads the device from the host (``tests/test_finetune.py`` checks the loop for that).

A capture that fails (an operation a graph cannot hold, in some model's own code) leaves the step eager for the
rest of the run, and the reason is in the training log. Everything but the capture itself runs on the CPU too:
:func:`eager_capture` stands in for it in the tests, so the buffers, the copies and the bookkeeping are checked
against plain training step for step.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager, nullcontext
from typing import Callable, Iterator

import torch

from ..base.errors import one_line

Capture = Callable[[Callable[[], None]], Callable[[], None]]


def eager_capture(fn: Callable[[], None]) -> Callable[[], None]:
    """A stand-in for :func:`cuda_capture` that records nothing: its "replay" runs ``fn`` again (tests, CPU)."""
    return fn


class CudaCapture:
    """Capture on the current CUDA device, on one side stream; the graphs share one memory pool (every tensor a
    step allocates dies within the step, and the graphs replay one after another on one stream: none outlives
    another's replay). :meth:`warmup` runs a step eagerly on that side stream (the first step, before any capture)."""

    def __init__(self):
        self.pool = torch.cuda.graph_pool_handle()
        self.stream = torch.cuda.Stream()

    def __call__(self, fn: Callable[[], None]) -> Callable[[], None]:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool, stream=self.stream):
            fn()
        return graph.replay

    @contextmanager
    def warmup(self) -> Iterator[None]:
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            yield
        torch.cuda.current_stream().wait_stream(self.stream)


def capture_for(device: torch.device) -> Capture | None:
    """How to capture a step on ``device``: CUDA graphs on a CUDA device, None elsewhere (the step stays eager)."""
    return CudaCapture() if torch.device(device).type == "cuda" else None


class ShapeGraphs:
    """``runner(inputs, y)`` trains one step on a batch (``inputs``: the model's keyword tensors, ``y`` its
    labels), like ``step(inputs, y)``: eagerly for the first step, then by replaying the graph captured for the
    batch's shapes (captured at the first batch of each shape). ``step(inputs, y)`` must leave the gradients zeroed
    in place when ``keep_grads`` is set on it, and name in ``step.trained`` the parameters its first call gave a
    gradient (only theirs are allocated before the first capture: a parameter the loss does not reach, such as an
    unused pooler, keeps no gradient, so the optimiser leaves it alone as in plain training; see the module's
    notes). ``log``: counts and the reason of a fallback."""

    def __init__(self, step, capture: Capture):
        self.step, self.capture = step, capture
        self.graphs: dict[tuple, tuple[dict, torch.Tensor, Callable[[], None]]] = {}
        self.eager_steps = 0
        self.replays = 0
        self.fallback: str | None = None

    @property
    def log(self) -> dict:
        return {"graphs": len(self.graphs), "replays": self.replays, "eager_steps": self.eager_steps,
                "fallback": self.fallback}

    def _eager(self, inputs: dict, y: torch.Tensor) -> None:
        # the first step on the capture's side stream where it has one (the warm-up before any capture)
        warm = getattr(self.capture, "warmup", None) if self.eager_steps == 0 else None
        self.eager_steps += 1
        with warnings.catch_warnings(), (warm() if warm else nullcontext()):
            # a capturable optimiser's step outside a capture: expected here
            warnings.filterwarnings("ignore", message="This instance was constructed with capturable=True")
            self.step(inputs, y)

    def __call__(self, inputs: dict, y: torch.Tensor) -> None:
        if self.fallback is not None or self.eager_steps == 0:
            return self._eager(inputs, y)  # the first step creates the optimiser's state and every lazy init
        key = (tuple((k, tuple(v.shape), v.dtype) for k, v in sorted(inputs.items())), tuple(y.shape), y.dtype)
        entry = self.graphs.get(key)
        if entry is None:
            entry = self._captured(inputs, y)
            if entry is None:
                return self._eager(inputs, y)
            self.graphs[key] = entry
        static, static_y, replay = entry
        for name, value in inputs.items():
            static[name].copy_(value, non_blocking=True)
        static_y.copy_(y, non_blocking=True)
        replay()
        self.replays += 1

    def _captured(self, inputs: dict, y: torch.Tensor):
        if not getattr(self.step, "keep_grads", False):
            for p in self.step.trained:  # persistent gradients, outside the graphs' pool, zero as a fresh step's
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            self.step.keep_grads = True
        static = {name: value.clone() for name, value in inputs.items()}
        static_y = y.clone()
        try:
            replay = self.capture(lambda: self.step(static, static_y))
        except Exception as exc:  # noqa: BLE001 - a model whose step a graph cannot hold trains eagerly
            self.fallback = one_line(exc)
            return None
        return static, static_y, replay
