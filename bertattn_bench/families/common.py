"""What several families share and none owns (issue 44: no family imports another's module): the surface
statistics' result, read by the surface family (Clark §3), the norms family's two readings of the same statistics
(Kobayashi et al. 2020) and the clustering family."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class SurfaceResult:
    """Per-head means, each a ``(n_layers, n_heads)`` tensor on the CPU; ``n_segments`` / ``n_tokens`` = n."""

    stats: dict[str, torch.Tensor]
    n_segments: int
    n_tokens: int
    sep_chance: float  # mean over segments of n_sep / L (the separators' share of the tokens: chance)
    token_counts: torch.Tensor | None = None  # (vocab,) word-piece frequencies over the segments
    top_tokens: list = None  # [(piece, count)] most frequent first, special tokens excluded (set by the pass)
    # every statistic per segment, (n_segments, n_layers, n_heads) float32 (72 numbers per segment and statistic on
    # MiniLM, never a map): ``stats`` is their mean; the claims' bootstrap over segments resamples them
    per_segment: dict[str, torch.Tensor] | None = None
    sep_chance_per_segment: torch.Tensor | None = None  # (n_segments,)

    def resample(self, idx: torch.Tensor) -> "SurfaceResult":
        """The result over the segments ``idx`` (with repeats: one bootstrap sample), statistics only."""
        return SurfaceResult(stats={k: v[idx].mean(0) for k, v in self.per_segment.items()},
                             n_segments=len(idx), n_tokens=self.n_tokens,
                             sep_chance=float(self.sep_chance_per_segment[idx].double().mean()),
                             token_counts=self.token_counts, top_tokens=self.top_tokens)

    def per_layer(self, name: str) -> torch.Tensor:
        """Mean over heads: Clark Fig. 2's per-layer curves."""
        return self.stats[name].mean(dim=1)

    @property
    def n_layers(self) -> int:
        return self.stats["entropy"].shape[0]
