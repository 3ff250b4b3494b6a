"""The papers' head names: ``layer-head``, 1-based (Clark's "8-10", Michel's, Kovaleva's), to and from 0-based
indices."""
from __future__ import annotations


def head_name(layer: int, head: int) -> str:
    """0-based indices → the papers' ``layer-head`` name, 1-based."""
    return f"{layer + 1}-{head + 1}"


def parse_head_name(name: str) -> tuple[int, int]:
    """The papers' 1-based ``layer-head`` name → 0-based ``(layer, head)``; the inverse of :func:`head_name`."""
    try:
        layer, head = (int(x) for x in name.split("-"))
    except ValueError:
        raise ValueError(f"head {name!r}: expected 'layer-head', 1-based (e.g. '5-4')") from None
    if layer < 1 or head < 1:
        raise ValueError(f"head {name!r}: layers and heads are numbered from 1")
    return layer - 1, head - 1
