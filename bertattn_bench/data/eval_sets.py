"""A task's evaluation data from the datasets people use (issue 46), instead of the shipped GLUE TSV copies: a
Hugging Face ``datasets`` object or folder (``save_to_disk``), a local Parquet, CSV/TSV or JSON(L) file, or a hub
dataset already in the local ``datasets`` cache (``hub:NAME[:CONFIG]``; never downloaded unless the run allows it).

A source maps its columns onto the task's (``text``, ``text_pair``, ``label``; by default the GLUE names the hub's
``glue`` configs use, then the TSV headers) and its splits onto dev (default ``validation``, else ``dev``) and train
(default ``train``, read for head importance only). Labels may be the class index, the class name, or a ``ClassLabel``
whose names are the task's. Rows come out as :class:`~bertattn_bench.data.glue.Example`, exactly as the TSV reader
gives them, so the same examples from either source give the same values; :func:`rows_digest` (sha256 over the rows
read) goes into the pass's cache key and the report. Bad input is a DataError naming the source and the row or column.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import DataError
from . import glue

# the hub's glue configs' column names per task, then the shipped TSVs' headers
COLUMNS = {
    "mrpc": (("sentence1", "#1 String"), ("sentence2", "#2 String"), ("label", "Quality")),
    "rte": (("sentence1",), ("sentence2",), ("label",)),
    "sts-b": (("sentence1",), ("sentence2",), ("label", "score")),
    "sst-2": (("sentence",), (), ("label",)),
    "qnli": (("question",), ("sentence",), ("label",)),
}
SPLITS = {"dev": ("validation", "dev", "validation_matched"), "train": ("train",)}
FILE_KINDS = {".parquet": "parquet", ".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json"}
KEYS = ("split", "train_split", "text", "text_pair", "label")


@dataclass(frozen=True)
class EvalSource:
    """Where one task's evaluation examples come from, and how its columns and splits map onto the task's."""

    task: str
    source: object  # a path (folder or file), "hub:NAME[:CONFIG]", or a datasets Dataset / DatasetDict
    split: str | None = None  # the dev split's name (a DatasetDict, a hub dataset); None: validation, else dev
    train_split: str | None = None  # the train split's name (head importance); None: train
    text: str | None = None
    text_pair: str | None = None
    label: str | None = None

    def describe(self) -> str:
        if isinstance(self.source, (str, Path)):
            return str(self.source)
        return f"a {type(self.source).__name__} object"

    def on_disk(self) -> list[Path]:
        """The files or folder the source reads (their digests key the cache like any data file)."""
        if isinstance(self.source, (str, Path)) and not str(self.source).startswith("hub:"):
            return [Path(self.source)]
        return []


def parse_option(text: str) -> EvalSource:
    """``TASK=SOURCE[,KEY=VALUE...]`` (``--eval-data``), keys: split, train_split, text, text_pair, label."""
    task, sep, rest = text.partition("=")
    t = glue.task_of(task)
    if not sep or t is None:
        raise DataError(f"--eval-data {text}: expected TASK=SOURCE[,KEY=VALUE...] with TASK one of "
                        f"{', '.join(glue.TASKS)}")
    source, *pairs = rest.split(",")
    keys = {}
    for pair in pairs:
        k, eq, v = pair.partition("=")
        if not eq or k not in KEYS or not v:
            raise DataError(f"--eval-data {text}: {pair!r} is not KEY=VALUE with KEY one of {', '.join(KEYS)}")
        keys[k] = v
    if not source:
        raise DataError(f"--eval-data {text}: no source")
    if not source.startswith("hub:") and not Path(source).exists():
        raise DataError(f"--eval-data {text}: {source}: no such file or folder")
    return EvalSource(t.name, source, **keys)


def of(value, task: str | None = None) -> EvalSource:
    """An :class:`EvalSource` from what a caller gives: one already, an option's text, or (with ``task``) a path or
    a datasets object."""
    if isinstance(value, EvalSource):
        return value
    if isinstance(value, str) and "=" in value.split(",")[0] and task is None:
        return parse_option(value)
    if task is None:
        raise DataError(f"eval data {value!r}: which task? (TASK=SOURCE, or eval_data={{'mrpc': ...}})")
    t = glue.task_of(task)
    if t is None:
        raise DataError(f"eval data for {task!r}: not a task (one of {', '.join(glue.TASKS)})")
    if isinstance(value, (str, Path)):
        return parse_option(f"{t.name}={value}")
    return EvalSource(t.name, value)


def _hub(spec: str, split: str, allow_download: bool):
    import datasets

    name, _, config = spec[len("hub:"):].partition(":")
    offline = datasets.config.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = offline or not allow_download  # the local cache only, unless allowed
    try:
        return datasets.load_dataset(name, config or None, split=split)
    except Exception as exc:  # not in the cache (offline), no such split, ...
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise DataError(f"eval data {spec} split {split!r}: cannot be loaded from the local datasets cache"
                        f"{'' if allow_download else ' (downloads not allowed)'}: {type(exc).__name__}: {first}") from None
    finally:
        datasets.config.HF_HUB_OFFLINE = offline


def _table(src: EvalSource, which: str, allow_download: bool = False):
    """The rows of one split (``dev`` or ``train``) as a datasets ``Dataset`` (or anything with ``column_names``
    and ``features``, iterable over dict rows)."""
    wanted = src.split if which == "dev" else src.train_split
    names = (wanted,) if wanted else SPLITS[which]
    obj = src.source
    where = src.describe()
    if isinstance(obj, (str, Path)) and str(obj).startswith("hub:"):
        return _hub(str(obj), names[0], allow_download)
    if isinstance(obj, (str, Path)):
        path = Path(obj)
        import datasets

        try:
            if path.is_dir():
                obj = datasets.load_from_disk(str(path))
            else:
                kind = FILE_KINDS.get(path.suffix.lower())
                if kind is None:
                    raise DataError(f"eval data {path}: {path.suffix or 'no suffix'} is not a known format "
                                    f"({', '.join(FILE_KINDS)}, or a datasets folder)")
                extra = {"delimiter": "\t"} if path.suffix.lower() == ".tsv" else {}
                obj = datasets.load_dataset(kind, data_files=str(path), split="train", **extra)
        except DataError:
            raise
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise DataError(f"eval data {path}: cannot be read ({type(exc).__name__}: {first})") from None
    if hasattr(obj, "column_names") and not isinstance(obj.column_names, dict):  # one split: the dev set
        if which == "train":
            raise DataError(f"eval data ({where}): one split, the dev set; it has no train split (a DatasetDict or "
                            f"a datasets folder with one does)")
        return obj
    if hasattr(obj, "keys"):  # a DatasetDict: the split by name
        for name in names:
            if name in obj.keys():
                return obj[name]
        raise DataError(f"eval data ({where}): no split {' / '.join(names)} (it has {', '.join(obj.keys())}; "
                        f"set {'split' if which == 'dev' else 'train_split'}=NAME)")
    raise DataError(f"eval data ({where}): not a datasets Dataset, DatasetDict, folder or file")


def _column(table, given: str | None, candidates: tuple, role: str, where: str) -> str | None:
    cols = list(table.column_names)
    if given:
        if given not in cols:
            raise DataError(f"eval data ({where}): no column {given!r} for {role} (columns: {', '.join(cols)})")
        return given
    for c in candidates:
        if c in cols:
            return c
    if not candidates:
        return None
    raise DataError(f"eval data ({where}): no {role} column (tried {', '.join(candidates)}; columns: "
                    f"{', '.join(cols)}; set {role}=NAME)")


def _label(value, t: glue.Task, names: list | None, where: str) -> float:
    if t.is_regression:
        try:
            out = float(value)
        except (TypeError, ValueError):
            raise DataError(f"{where}: score {value!r} is not a number") from None
        if not math.isfinite(out):
            raise DataError(f"{where}: score {value!r} is not finite")
        return out
    if isinstance(value, bool) or value is None:
        raise DataError(f"{where}: label {value!r} is not one of {list(t.labels)}")
    if isinstance(value, int) and names is not None:  # a ClassLabel: its name decides
        if not 0 <= value < len(names):
            raise DataError(f"{where}: label {value} is outside the ClassLabel's {len(names)} names")
        value = names[value]
    if isinstance(value, str):
        if value in t.labels:
            return float(t.labels.index(value))
        if value.strip().isdigit():
            value = int(value)
        else:
            raise DataError(f"{where}: label {value!r} is not one of {list(t.labels)}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not 0 <= value < t.num_labels:
        raise DataError(f"{where}: label {value!r} is not a class index 0..{t.num_labels - 1} of {list(t.labels)}")
    return float(value)


def _class_names(table, column: str, t: glue.Task) -> list | None:
    """A ClassLabel's names where they are the task's classes (then they map the indices), else None."""
    feature = getattr(table, "features", {}).get(column) if hasattr(table, "features") else None
    names = list(getattr(feature, "names", None) or [])
    return names if names and set(names) <= set(t.labels or ()) else None


def rows(src: EvalSource, which: str = "dev", limit: int | None = None, allow_download: bool = False) -> list[glue.Example]:
    """The split's examples, in the source's order, as the TSV reader gives them (the first ``limit``)."""
    return _rows_of(src, _table(src, which, allow_download), which, limit)


def _rows_of(src: EvalSource, table, which: str, limit: int | None) -> list[glue.Example]:
    t = glue.task(src.task)
    where = src.describe()
    a_col = _column(table, src.text, COLUMNS[t.name][0], "text", where)
    b_col = _column(table, src.text_pair, COLUMNS[t.name][1], "text_pair", where) if t.is_pair else None
    y_col = _column(table, src.label, COLUMNS[t.name][2], "label", where)
    names = _class_names(table, y_col, t)
    out = []
    n = len(table) if limit is None else min(limit, len(table))
    for i in range(n):
        row = table[i]
        at = f"{where} ({which}) row {i}"
        a = row[a_col]
        b = row[b_col] if b_col else None
        if not isinstance(a, str) or not a.strip() or (b_col and (not isinstance(b, str) or not b.strip())):
            raise DataError(f"{at}: empty or non-text sentence")
        out.append(glue.Example(a.strip(), b.strip() if b_col else None, _label(row[y_col], t, names, at),
                                f"{Path(str(where)).name}:{i}"))
    if not out:
        raise DataError(f"eval data ({where}) {which}: no rows")
    return out


def train_rows(src: EvalSource) -> list[glue.Example] | None:
    """The source's train split (a DatasetDict or folder with one, a hub dataset's), read once; None where it has
    none."""
    try:
        table = _table(src, "train")
    except DataError:
        return None
    return _rows_of(src, table, "train", None)


def rows_digest(examples: list[glue.Example]) -> str:
    """sha256 over the examples read (text, pair, label): the data part of a pass's key and report."""
    doc = json.dumps([(e.text_a, e.text_b, e.label) for e in examples], ensure_ascii=False)
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()
