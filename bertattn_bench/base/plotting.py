"""matplotlib helpers shared by the figure writers (Agg backend: no display needed)."""
from __future__ import annotations

from pathlib import Path


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (imported lazily: figures are optional output)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, directory: Path, name: str, dpi: int = 120) -> Path:
    """Lay out, write ``directory/name`` (creating the folder) and close ``fig``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path
