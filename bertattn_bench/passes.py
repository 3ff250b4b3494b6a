"""Passes: one (model, corpus) forward sweep that feeds every reducer of a claim family.

``prepare_*`` loads and tokenises (not timed); :meth:`PreparedPass.run` is the attention core that the
benchmarks time. A claim never runs the model itself: it reads a :class:`PassResult`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from .attention import run_reducers
from .batching import Encoded, Skipped, iter_batches
from .model import LoadedModel, ModelInfo


@dataclass
class PassResult:
    family: str
    corpus: str
    data: str  # readable description: files and split
    model: ModelInfo
    result: object
    n_examples: int
    skipped: Skipped
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)
    # the budget tier that shaped this pass where the family's own result does not say (a forward family's capped
    # quick-tier sample); None: no tier changed it. Part of the corpus label (claims.corpus_label)
    tier: str | None = None

    @property
    def examples_per_second(self) -> float:
        return self.n_examples / self.seconds if self.seconds else float("nan")


def timed(device, fn: Callable[[], object]) -> tuple[object, float]:
    """The one timer of every pass: ``fn()`` and its wall time, the device synchronised before and after (CUDA
    kernels run asynchronously; on CPU this is a plain clock)."""
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    out = fn()
    sync()
    return out, time.perf_counter() - start


@dataclass
class NothingToMeasure:
    """A pass result that holds no statistics, only why (e.g. no MLM head): its claims skip and nothing is timed."""

    reason: str


@dataclass
class PreparedPass:
    family: str
    corpus: str
    data: str
    loaded: LoadedModel
    encoded: list[Encoded]
    skipped: Skipped
    make_reducer: Callable[[], object]
    finish: Callable[[object], object] = lambda r: r
    with_words: bool = False
    batch_size: int = 32
    data_paths: list = field(default_factory=list)  # files/folders read: part of the cache key

    def run(self, progress: bool = False) -> PassResult:
        """The timed attention core: batched forward passes reduced to statistics on the model's device."""
        dev = torch.device(self.loaded.info.device)
        reducer = self.make_reducer()
        self.warm_up(dev)
        batches = lambda: iter_batches(self.encoded, self.loaded.tokenizer, dev, self.batch_size, self.with_words)  # noqa: E731
        (raw,), seconds = timed(dev, lambda: run_reducers(self.loaded.model, batches(), [reducer], progress=progress,
                                                          desc=f"{self.family}:{self.corpus}"))
        return PassResult(self.family, self.corpus, self.data, self.loaded.info, self.finish(raw),
                          len(self.encoded), self.skipped, seconds)

    def nothing_to_measure(self) -> str | None:
        """Why this pass cannot run on this model (its ``run`` then returns :class:`NothingToMeasure`), else None."""
        return None

    def warm_up(self, device) -> None:
        """One untimed forward pass on a small batch: CUDA context, cuBLAS handles and kernels load outside the
        timing (a first pass on a GPU is several times slower than the rest)."""
        if not self.encoded:
            return
        batch = next(iter_batches(self.encoded[:2], self.loaded.tokenizer, device, 2, False))
        with torch.inference_mode():
            self.loaded.model(**batch.model_inputs(self.loaded.model))
