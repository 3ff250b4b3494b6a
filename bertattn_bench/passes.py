"""Passes: one (model, corpus) forward sweep that feeds every reducer of a claim family.

``prepare_*`` loads and tokenises (not timed); :meth:`PreparedPass.run` is the attention core that the
benchmarks time. A claim never runs the model itself: it reads a :class:`PassResult`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .attention import run_reducers
from .batching import Encoded, Skipped, drop_too_long, encode_words, iter_batches
from .data.segments import CORPORA as SEGMENT_CORPORA
from .model import LoadedModel, ModelInfo
from .registry import family



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


@family("surface", corpora=tuple(SEGMENT_CORPORA), default_corpus="wikitext2")
def prepare_surface(loaded: LoadedModel, data_dir: Path, corpus: str = "wikitext2", max_tokens: int = 128,
                    limit: int | None = None, batch_size: int = 32) -> PreparedPass:
    """Clark §3: segments of at most ``max_tokens`` pieces, by default built as the authors' preprocess_unlabeled.py
    builds them (see :mod:`bertattn_bench.data.segments` for the recipe and the named alternatives)."""
    from .data.segments import load_segment_set
    from .metrics.surface import SurfaceReducer

    max_tokens = min(max_tokens, loaded.info.max_positions)
    segs = load_segment_set(data_dir, corpus, loaded.tokenizer, max_tokens, limit)
    info, tok = loaded.info, loaded.tokenizer

    def finish(result):
        counts = result.token_counts.clone()
        counts[tok.all_special_ids] = 0
        top = torch.topk(counts, 20)
        result.top_tokens = list(zip(tok.convert_ids_to_tokens(top.indices.tolist()), top.values.tolist()))
        return result

    return PreparedPass("surface", corpus, segs.description, loaded, segs.encoded, segs.skipped,
                        lambda: SurfaceReducer(info.n_layers, info.n_heads, info.device, len(tok)),
                        finish=finish, batch_size=batch_size, data_paths=[data_dir / SEGMENT_CORPORA[corpus]])


@family("dependency", corpora=("ewt_dev", "ewt_test", "gum_dev", "gum_test"), default_corpus="ewt_dev")
def prepare_dependency(loaded: LoadedModel, data_dir: Path, corpus: str = "ewt_dev", limit: int | None = None,
                       batch_size: int = 32, max_tokens: int | None = None) -> PreparedPass:
    """Clark §4.2: one sentence per example; sentences longer than the model's positions are skipped, counted."""
    from .data.ud import CORPORA, load_corpus
    from .metrics.syntax import NOMINAL_UPOS, DependencyReducer, offset_baselines, sd_arcs

    sentences = load_corpus(data_dir, corpus, limit)
    encoded_all = [encode_words(loaded.tokenizer, i, s.words) for i, s in enumerate(sentences)]
    encoded, skipped = drop_too_long(encoded_all, min(max_tokens or loaded.info.max_positions, loaded.info.max_positions))
    arcs = [sd_arcs(s) for s in sentences]
    kept_arcs = [arcs[e.index] for e in encoded]
    nominal = [np.array([u in NOMINAL_UPOS for u in s.upos], dtype=bool) for s in sentences]
    info = loaded.info

    def finish(result):
        result.baselines = offset_baselines(kept_arcs)
        return result

    return PreparedPass("dependency", corpus, f"{CORPORA[corpus]} (UD trees mapped to SD, Clark Table 1 relations)",
                        loaded, encoded, skipped,
                        lambda: DependencyReducer(arcs, info.n_layers, info.n_heads, info.device, nominal_per_example=nominal),
                        finish=finish, with_words=True, batch_size=batch_size, data_paths=[data_dir / CORPORA[corpus]])

