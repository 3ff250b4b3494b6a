"""GLUE tasks (MRPC, STS-B, SST-2, RTE train/dev; QNLI dev only) from the original GLUE TSV files.

One reader for the TSV format (``csv.QUOTE_NONE``: sentences contain bare quotes; MRPC files start with a BOM),
columns found by their header names, every row keeping its ``file:line`` for errors. The task metric (accuracy
and F1 for MRPC, Pearson/Spearman for STS-B) comes from scikit-learn/scipy; the majority-class and
constant-predictor scores per dev set are computed from the labels, never typed in.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..base.errors import DataError
from ..base.settings import data_file
from . import read_text

GLUE_DIR = "glue"


@dataclass(frozen=True)
class Task:
    name: str  # the corpus name used on the command line (``mrpc``)
    folder: str  # GLUE folder (``MRPC``)
    text_a: str  # header name of the first sentence
    text_b: str | None  # header name of the second sentence (None: single-sentence task)
    label: str  # header name of the label
    labels: tuple[str, ...] | None  # class names in index order; None: regression
    metric: str  # the primary metric, in points (x100): "acc", "pearson"
    positive: str | None = None  # the positive class for F1

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    @property
    def is_pair(self) -> bool:
        return self.text_b is not None


TASKS: dict[str, Task] = {
    "mrpc": Task("mrpc", "MRPC", "#1 String", "#2 String", "Quality", ("0", "1"), "acc", positive="1"),
    "rte": Task("rte", "RTE", "sentence1", "sentence2", "label", ("entailment", "not_entailment"), "acc"),
    "sts-b": Task("sts-b", "STS-B", "sentence1", "sentence2", "score", None, "pearson"),
    "sst-2": Task("sst-2", "SST-2", "sentence", None, "label", ("0", "1"), "acc"),
    "qnli": Task("qnli", "QNLI", "question", "sentence", "label", ("entailment", "not_entailment"), "acc"),
}


@dataclass(frozen=True)
class Example:
    text_a: str
    text_b: str | None
    label: float  # class index, or the regression target
    source: str  # "file:line"


# how other code names the tasks (transformers' run_glue.py sets ``finetuning_task`` to "stsb", "sst2", ...)
ALIASES = {"stsb": "sts-b", "sst2": "sst-2", "sts_b": "sts-b", "sst_2": "sst-2"}


def task_of(name: str | None) -> Task | None:
    """The task a name denotes, case and spelling aside ("MRPC", "stsb", "sst2"), else None."""
    if not isinstance(name, str):
        return None
    key = name.strip().lower()
    return TASKS.get(ALIASES.get(key, key))


def task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise DataError(f"unknown GLUE task {name!r}; known: {', '.join(TASKS)}") from None


def split_path(data_dir: Path, t: Task, split: str) -> Path:
    return data_file(Path(data_dir), f"{GLUE_DIR}/{t.folder}/{split}.tsv")


def has_split(data_dir: Path, t: Task, split: str) -> bool:
    return (Path(data_dir) / GLUE_DIR / t.folder / f"{split}.tsv").is_file()


def read_tsv(path: Path, t: Task) -> list[Example]:
    """Rows of one GLUE TSV file; a malformed row is a DataError naming ``file:line``."""
    path = Path(path)
    out: list[Example] = []
    reader = csv.reader(io.StringIO(read_text(path), newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    try:
        header = next(reader)
    except StopIteration:
        raise DataError(f"{path}: empty file (expected a header line)") from None
    wanted = [t.text_a, t.label] + ([t.text_b] if t.text_b else [])
    missing = [c for c in wanted if c not in header]
    if missing:
        raise DataError(f"{path}:1: header lacks column(s) {missing} for GLUE {t.folder} (header: {header})")
    col = {c: header.index(c) for c in wanted}
    for row in reader:
        line = reader.line_num
        where = f"{path}:{line}"
        if not row or row == [""]:
            continue
        if len(row) != len(header):
            raise DataError(f"{where}: {len(row)} tab-separated fields, the header has {len(header)}")
        raw = row[col[t.label]].strip()
        if t.is_regression:
            try:
                label = float(raw)
            except ValueError:
                raise DataError(f"{where}: score {raw!r} is not a number") from None
            if not math.isfinite(label):
                raise DataError(f"{where}: score {raw!r} is not finite")
        else:
            if raw not in t.labels:
                raise DataError(f"{where}: label {raw!r} is not one of {list(t.labels)}")
            label = float(t.labels.index(raw))
        a = row[col[t.text_a]].strip()
        b = row[col[t.text_b]].strip() if t.text_b else None
        if not a or (t.text_b and not b):
            raise DataError(f"{where}: empty sentence")
        out.append(Example(a, b, label, f"{path.name}:{line}"))
    if not out:
        raise DataError(f"{path}: no data rows")
    return out


def load_split(data_dir: Path, name: str, split: str, limit: int | None = None) -> list[Example]:
    t = task(name)
    rows = read_tsv(split_path(data_dir, t, split), t)
    return rows[:limit] if limit else rows


# ---- metrics -------------------------------------------------------------------------------------------------

def scores(t: Task, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The task's metrics in points (x100): accuracy (+ F1 of the positive class), or Pearson/Spearman."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if t.is_regression:
        from ..claims.stats import rank_correlation

        if np.std(predictions) == 0 or np.std(labels) == 0:
            return {"pearson": 0.0, "spearman": 0.0}  # a constant predictor has no correlation (scored 0)
        return {"pearson": 100 * rank_correlation(predictions, labels, "pearson")[0],
                "spearman": 100 * rank_correlation(predictions, labels)[0]}
    from sklearn.metrics import accuracy_score, f1_score

    out = {"acc": 100 * float(accuracy_score(labels, predictions))}
    if t.positive is not None:
        pos = t.labels.index(t.positive)
        out["f1"] = 100 * float(f1_score(labels, predictions, pos_label=pos, zero_division=0))
    return out


def constant_scores(t: Task, labels: np.ndarray) -> dict[str, dict[str, float]]:
    """Every constant predictor's scores on ``labels`` (per class; the train mean for regression is not known
    here, so regression gets the dev mean, which has Pearson 0 by definition)."""
    labels = np.asarray(labels)
    if t.is_regression:
        return {"mean": scores(t, np.full_like(labels, labels.mean()), labels)}
    return {t.labels[c]: scores(t, np.full_like(labels, c), labels) for c in range(len(t.labels))}


def majority_score(t: Task, labels: np.ndarray) -> tuple[str, float]:
    """The majority class of ``labels`` and its primary score."""
    const = constant_scores(t, labels)
    best = max(const, key=lambda k: const[k][t.metric])
    return best, const[best][t.metric]


def one_example_step(t: Task, n: int) -> float:
    """The smallest change of the primary score that one example can make (accuracy: 100/n points)."""
    return 100.0 / n if not t.is_regression else float("nan")
