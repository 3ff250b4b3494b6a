"""Toy GLUE rows for the fine-tuning tests: sentence pairs from a 16-word vocabulary with a learnable rule (the
second sentence is a copy of the first exactly when the label is 1), seeded."""
from __future__ import annotations

import numpy as np

MRPC_HEADER = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
STSB_HEADER = "index\tgenre\tsentence1\tsentence2\tscore\n"
WORDS = "the a cat dog sat ran on under mat log big small red blue quickly slowly".split()


def toy_pairs(n: int, seed: int) -> list[tuple[int, str, str]]:
    """``n`` (label, sentence a, sentence b): b copies a where the label is 1 (a paraphrase), else is drawn anew."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a = " ".join(rng.choice(WORDS, rng.integers(3, 9)))
        label = int(rng.integers(0, 2))
        b = a if label else " ".join(rng.choice(WORDS, rng.integers(3, 9)))
        out.append((label, a, b))
    return out


def mrpc_lines(n: int, seed: int, bare_quote: bool = False) -> list[str]:
    """MRPC TSV lines (no header); ``bare_quote`` opens each second sentence with a lone ``"``, as the real files do."""
    quote = '" ' if bare_quote else ""
    return [f"{label}\t{i}\t{i + 1000}\t{a}\t{quote}{b}\n" for i, (label, a, b) in enumerate(toy_pairs(n, seed))]


def write_mrpc(root, n_train: int, n_dev: int, bare_quote: bool = False):
    """A GLUE data folder with MRPC's train (``n_train`` pairs, seed 0) and dev (``n_dev``, seed 1) under
    ``root/glue/MRPC``; returns ``root``."""
    d = root / "glue" / "MRPC"
    d.mkdir(parents=True)
    for split, n, seed in (("train", n_train, 0), ("dev", n_dev, 1)):
        (d / f"{split}.tsv").write_text(MRPC_HEADER + "".join(mrpc_lines(n, seed, bare_quote)), encoding="utf-8")
    return root
