"""Passes: what a claim family measures on one (model, corpus), behind one protocol (:class:`Pass`).

A family's ``prepare`` loads and tokenises (not timed) and returns a :class:`Pass`; :meth:`Pass.artifacts` makes
what the measurement reads and the cache keeps (fine-tuned checkpoints; not timed); :meth:`Pass.run` is the
measurement the benchmarks time. :class:`PreparedPass` is the forward-sweep pass most families use. A claim never
runs the model itself: it reads a :class:`PassResult`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, runtime_checkable

import torch

from ..claims.registry import NothingToMeasure  # noqa: F401 (the passes' result with only a reason)
from .attention import forward, run_reducers
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
    # the learned-model guard's tests of the trained models this pass read (``learned.Check``, one per fine-tune,
    # ARCT run set or probe): a claim reading a model that did not learn is "not judged" (:mod:`bertattn_bench.claims.learned`)
    learning: tuple = ()

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


@runtime_checkable
class Pass(Protocol):
    """What the plugin, the cache and the scripts need of a family's prepared pass: prepare → artifacts → run.

    ``family``/``corpus``/``data`` name it (``data`` is the readable description of the files and split);
    ``loaded`` is the model it measures; ``encoded`` the examples it reads (their count and content key the cache);
    ``data_paths`` the files and folders read (their digests key the cache)."""

    family: str
    corpus: str
    data: str
    loaded: LoadedModel
    data_paths: list

    @property
    def encoded(self) -> list: ...

    def nothing_to_measure(self) -> str | None:
        """Why this pass cannot run on this model (``run`` then returns :class:`NothingToMeasure`), else None."""

    def artifacts(self, progress: bool = False) -> None:
        """Make the cached artifacts ``run`` reads (fine-tuned checkpoints), outside the timed call, so a pass's time
        does not depend on the checkpoint cache's state. A no-op for passes that only read data and the model."""

    def run(self, progress: bool = False) -> "PassResult":
        """The measurement (the benchmarks time it): a :class:`PassResult`."""


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

    def artifacts(self, progress: bool = False) -> None:
        """A forward sweep reads only the data and the model: nothing to make before it is timed."""

    def warm_up(self, device) -> None:
        """One untimed forward pass on a small batch: CUDA context, cuBLAS handles and kernels load outside the
        timing (a first pass on a GPU is several times slower than the rest)."""
        if not self.encoded:
            return
        for _ in forward(self.loaded.model, iter_batches(self.encoded[:2], self.loaded.tokenizer, device, 2)):
            pass
