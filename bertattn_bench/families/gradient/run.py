"""The gradient family's pass and its prepare (``-k gradient``): the §3 segments, masked, and the MLM model."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ...claims.registry import family
from ...data.segments import CORPORA as SEGMENT_CORPORA
from ...engine.attention import SEAM, seam_reason
from ...engine.attention import site as attention_site
from ...engine.batching import Encoded, Skipped, iter_batches
from ...engine.passes import NothingToMeasure
from .constants import EDITS, MASK_RATE, MASK_SEED
from .mlm_head import mlm_head_problem, mlm_model
from .reduce import MaskedExample, attention_gradients, batch_labels, mask_pieces, run_gradients


@dataclass
class NoMLMHead(NothingToMeasure):
    """Pass result for a model whose checkpoint has no trained MLM head (the claims are skipped)."""


# ---- the pass -----------------------------------------------------------------------------------------------

@dataclass
class GradientPass:
    """Prepared pass (a ``passes.Pass``): tokenised, masked segments and the MLM model to load."""

    family: str
    corpus: str
    data: str
    loaded: object
    masked: dict[int, MaskedExample]
    skipped: Skipped
    batch_size: int = 16
    no_head: str | None = None
    data_paths: list = field(default_factory=list)

    @property
    def encoded(self) -> list[Encoded]:
        return [m.encoded for m in self.masked.values()]

    def nothing_to_measure(self) -> str | None:
        return self.no_head

    def artifacts(self, progress: bool = False) -> None:
        """Nothing to make: the MLM model is loaded inside ``run`` (before its timer starts)."""

    def run(self, progress: bool = False):
        from ...engine.passes import PassResult, timed

        info = self.loaded.info
        if self.no_head:
            why = self.no_head if self.no_head.startswith(EDITS) else f"needs a masked-LM head; {self.no_head}"
            return PassResult(self.family, self.corpus, self.data, info, NoMLMHead(why), 0, self.skipped)
        mlm = mlm_model(self.loaded)  # not timed: loading
        dev = torch.device(info.device)
        encoded = self.encoded
        warm = next(iter_batches(encoded[:2], mlm.tokenizer, dev, 2), None)
        if warm is not None:  # untimed warm-up (CUDA context, kernels)
            attention_gradients(mlm.model, warm, batch_labels(warm, self.masked), info.n_layers)
        result, seconds = timed(dev, lambda: run_gradients(
            mlm.model, iter_batches(encoded, mlm.tokenizer, dev, self.batch_size), self.masked, info.n_layers,
            info.n_heads, info.device, progress=progress, desc=f"{self.family}:{self.corpus}"))
        model_info = dataclasses.replace(info, has_mlm_head=True,
                                         extra={**info.extra, "mlm_model_class": type(mlm.model).__name__})
        return PassResult(self.family, self.corpus, self.data, model_info, result, len(encoded), self.skipped, seconds)


@family("gradient", corpora=tuple(SEGMENT_CORPORA), default_corpus="wikitext2", quick_limit=200)
def prepare_gradient(loaded, data_dir: Path, corpus: str = "wikitext2", max_tokens: int = 128,
                     limit: int | None = None, batch_size: int = 32) -> GradientPass:
    """Clark §3.2 Fig. 3: the §3 segments, 15% of pieces masked; no pass without a trained MLM head."""
    from ...data.segments import load_segment_set

    masking = f"{MASK_RATE:.0%} masked, seed {MASK_SEED}"
    paths = [data_dir / SEGMENT_CORPORA[corpus]]
    bs = max(1, batch_size // 2)  # a backward pass holds every layer's maps: half the forward-only batch
    if loaded.info.random_init_seed is None:
        problem = mlm_head_problem(loaded.info, loaded.model.config)
    else:  # a random twin gets a random head, where transformers has a masked-LM class for the architecture
        from transformers import MODEL_FOR_MASKED_LM_MAPPING

        problem = None if type(loaded.model.config) in MODEL_FOR_MASKED_LM_MAPPING else (
            f"{loaded.info.name}: transformers has no masked-LM class for {loaded.model.config.model_type}")
    if problem is None and attention_site(loaded.model).path == SEAM:
        problem = f"{EDITS} {seam_reason(loaded.model)}"
    if problem:
        return GradientPass("gradient", corpus, f"{SEGMENT_CORPORA[corpus]} (§3 segments, {masking})", loaded,
                            {}, Skipped(), bs, no_head=problem, data_paths=paths)
    max_tokens = min(max_tokens, loaded.info.max_positions)
    segs = load_segment_set(data_dir, corpus, loaded.tokenizer, max_tokens, limit)
    tok = loaded.tokenizer
    masked = {e.index: mask_pieces(e, tok) for e in segs.encoded}
    return GradientPass("gradient", corpus, f"{segs.description}; {masking}", loaded, masked, segs.skipped, bs,
                        data_paths=paths)
