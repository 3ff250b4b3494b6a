"""The gradient family's claim metrics (named by reference_numbers/clark2019_gradient.toml)."""
from __future__ import annotations

import torch

from ...claims.registry import Measurement, NotApplicable, metric, relative_depth
from .reduce import GradientResult


def _result(pr) -> GradientResult:
    return pr.result  # a pass without a masked-LM head measured nothing: its claims never reach a metric


def _n(res: GradientResult) -> dict:
    return {"n": res.n_segments, "n_unit": "segments"}


def _ratios(res: GradientResult, stat: str, versus: str) -> torch.Tensor:
    return res.per_layer(stat) / res.per_layer(versus).clamp(min=1e-30)


def _layers_text(values: torch.Tensor, fmt: str = ".2f") -> str:
    return " ".join(f"L{i + 1}={v:{fmt}}" for i, v in enumerate(values.tolist()))


def _from_layer0(n_layers: int, from_layer: int, of_layers: int) -> int:
    """First 0-based layer at relative depth >= from_layer / of_layers (layer 5 of 12 → layer 3 of 6)."""
    return next(l for l in range(n_layers) if relative_depth(l, n_layers) >= from_layer / of_layers - 1e-9)


@metric("gradient_ratio_from_depth")
def gradient_ratio_from_depth(pr, stat: str = "sep", versus: str = "unmasked", from_layer: int = 5,
                              of_layers: int = 12) -> Measurement:
    """Largest per-layer ratio mean|∂L/∂α| to ``stat`` over ``versus`` in the layers from relative depth
    from_layer/of_layers on (Clark §3.2, Fig. 3: from layer 5 of 12 the [SEP] gradient is small)."""
    res = _result(pr)
    ratios = _ratios(res, stat, versus)
    start = _from_layer0(res.n_layers, from_layer, of_layers)
    worst = start + int(torch.argmax(ratios[start:]))
    detail = (f"max at L{worst + 1} over L{start + 1}-L{res.n_layers}; {stat}/{versus} by layer: {_layers_text(ratios)}; "
              f"mean |dL/da| {stat}: {_layers_text(res.per_layer(stat), '.2e')}; {versus}: "
              f"{_layers_text(res.per_layer(versus), '.2e')}; {res.n_masked} masked pieces")
    return Measurement(float(ratios[worst]), detail=detail, unit="x", **_n(res))


def _first_layer_from_which(flags: list[bool]) -> int | None:
    """First 0-based layer from which every flag up to the last layer is True."""
    first = None
    for i in range(len(flags) - 1, -1, -1):
        if not flags[i]:
            break
        first = i
    return first


@metric("gradient_onset_gap")
def gradient_onset_gap(pr, stat: str = "sep", versus: str = "unmasked", small_ratio: float = 0.5,
                       peak_fraction: float = 0.5, min_peak_over_chance: float = 5.0) -> Measurement:
    """Distance in relative depth between the layer from which the ``stat`` gradient stays small (ratio to
    ``versus`` below ``small_ratio`` in every later layer) and the first layer whose attention to [SEP] reaches
    ``peak_fraction`` of its peak (Clark §3.2: both at layer 5 of 12). No such gradient layer counts as onset
    L+1 (after the last layer). Without a [SEP] peak of ``min_peak_over_chance`` times chance (2/L) attention to
    [SEP] never "becomes high" and the claim does not apply."""
    res = _result(pr)
    n = res.n_layers
    share = res.sep_share()
    peak = float(share.max())
    if peak < min_peak_over_chance * res.sep_chance:
        raise NotApplicable(f"attention to [SEP] never becomes high: peak {peak:.3f} < {min_peak_over_chance:g}x "
                            f"chance {res.sep_chance:.3f} ({_layers_text(share, '.3f')})")
    attn_onset = next(i for i, v in enumerate(share.tolist()) if v >= peak_fraction * peak)
    ratios = _ratios(res, stat, versus)
    grad_onset = _first_layer_from_which([r < small_ratio for r in ratios.tolist()])
    grad_text = f"L{grad_onset + 1}" if grad_onset is not None else "no layer"
    if grad_onset is None:
        grad_onset = n  # after the last layer
    detail = (f"{stat} gradient below {small_ratio:g}x {versus} from {grad_text}; [SEP] share >= "
              f"{peak_fraction:g} of its peak from L{attn_onset + 1} of {n}; ratios {_layers_text(ratios)}; "
              f"[SEP] share {_layers_text(share, '.3f')}")
    return Measurement(abs(grad_onset - attn_onset) / n, detail=detail, unit="rel. depth", **_n(res))
