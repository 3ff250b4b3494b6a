"""ARCT (Habernal et al. 2018) and Niven & Kao's adversarial ARCT, with ``file:line`` errors; the authors' per-seed
results (``results_from_paper/<experiment>/accs.csv``) as reference distributions.

Files (see ``../shared/data/arct_original/SOURCE.md`` and ``arct_adversarial/SOURCE.md``):

* ``arct_original/{train,dev,test}-full.txt`` and ``train-w-swap-full.txt``: UKPLab's tab-separated export. No
  CSV quoting: a ``"`` is part of the text (no field there starts with one).
* ``arct_adversarial/{train-swapped,train-adv-negated,dev-adv-negated,test-adv-negated}.csv``: tab-separated,
  written by pandas, so a field with a ``"`` is quoted and its quotes doubled; the label column's position differs
  between files (columns are found by header name); the last column is a boolean ``swapped`` / ``adversarial``.
* ``arct_adversarial/claim_map.csv``: comma-separated ``original,negated``.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..base.errors import DataError
from ..base.settings import data_file
from . import read_text

ORIGINAL_FILES = {  # split -> file (relative to the data directory)
    "train": "arct_original/train-full.txt",
    "dev": "arct_original/dev-full.txt",
    "test": "arct_original/test-full.txt",
    "train_swap": "arct_original/train-w-swap-full.txt",
}
ADVERSARIAL_FILES = {
    "train_swapped": "arct_adversarial/train-swapped.csv",
    "train_adv": "arct_adversarial/train-adv-negated.csv",
    "dev_adv": "arct_adversarial/dev-adv-negated.csv",
    "test_adv": "arct_adversarial/test-adv-negated.csv",
}
CLAIM_MAP = "arct_adversarial/claim_map.csv"
RESULTS_DIR = "arct_adversarial/results_from_paper"

REQUIRED_COLUMNS = ("#id", "warrant0", "warrant1", "correctLabelW0orW1", "reason", "claim")
FLAG_COLUMNS = ("swapped", "adversarial")
ACCS_COLUMNS = ("run_no", "seed", "train", "dev", "test")  # + optional test_adv


@dataclass(frozen=True)
class ArctItem:
    """One argument: claim, reason, two warrants, the index (0/1) of the correct one."""

    id: str
    warrant0: str
    warrant1: str
    label: int
    reason: str
    claim: str
    debate_title: str = ""
    debate_info: str = ""
    flag: bool | None = None  # the file's ``swapped`` / ``adversarial`` column, None where it has none
    source: str = ""  # "file:line"

    @property
    def warrants(self) -> tuple[str, str]:
        return self.warrant0, self.warrant1


def _rows(path: Path, delimiter: str, quoted: bool):
    """(line number, fields) per non-empty line; each line parsed alone so errors name their line."""
    text = read_text(path)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            if quoted:
                (fields,) = list(csv.reader([line], delimiter=delimiter, quotechar='"', doublequote=True, strict=True))
            else:
                fields = line.split(delimiter)
        except (csv.Error, ValueError) as exc:
            raise DataError(f"{path}:{number}: malformed {'CSV' if delimiter == ',' else 'TSV'} line: {exc}") from exc
        yield number, fields


def _header(path: Path, rows, required, expected: str, about: str = "") -> list[str]:
    """The first row of ``rows`` as the header, which must name every ``required`` column: else an error naming
    the file (empty: ``expected``) or the header's line (``about``: what such a header looks like)."""
    first = next(rows, None)
    if first is None:
        raise DataError(f"{path}: empty file (expected {expected})")
    number, header = first
    missing = [c for c in required if c not in header]
    if missing:
        more = f"; {about}" if about else ""
        raise DataError(f"{path}:{number}: header lacks column(s) {missing} (found {header}{more})")
    return header


def read_arct(path: Path, quoted: bool | None = None, unique_ids: bool = True) -> list[ArctItem]:
    """An ARCT file (header line ``#id ...``). ``quoted``: CSV quoting (default: True for ``.csv`` files);
    ``unique_ids``: a repeated id is an error (UKPLab's ``train-w-swap-full.txt`` lists every id twice: the row,
    then its warrant-swapped copy)."""
    path = Path(path)
    quoted = path.suffix == ".csv" if quoted is None else quoted
    rows = _rows(path, "\t", quoted)
    header = _header(path, rows, REQUIRED_COLUMNS, "a header line starting with #id",
                     f"an ARCT header starts with #id and names {', '.join(REQUIRED_COLUMNS)}")
    col = {name: i for i, name in enumerate(header)}
    flag_col = next((c for c in FLAG_COLUMNS if c in col), None)
    items, seen = [], {}
    for number, fields in rows:
        where = f"{path}:{number}"
        if len(fields) != len(header):
            raise DataError(f"{where}: expected {len(header)} tab-separated fields (as the header), found {len(fields)}")
        get = {name: fields[i] for name, i in col.items()}
        label = get["correctLabelW0orW1"].strip()
        if label not in ("0", "1"):
            raise DataError(f"{where}: correctLabelW0orW1 must be 0 or 1, found {label!r}")
        for name in ("#id", "warrant0", "warrant1", "claim", "reason"):
            if not get[name].strip():
                raise DataError(f"{where}: empty {name}")
        flag = None
        if flag_col:
            value = get[flag_col].strip()
            if value not in ("True", "False"):
                raise DataError(f"{where}: column {flag_col} must be True or False, found {value!r}")
            flag = value == "True"
        if unique_ids and get["#id"] in seen:
            raise DataError(f"{where}: duplicate id {get['#id']!r} (first at line {seen[get['#id']]})")
        seen[get["#id"]] = number
        items.append(ArctItem(get["#id"], get["warrant0"], get["warrant1"], int(label), get["reason"], get["claim"],
                              get.get("debateTitle", ""), get.get("debateInfo", ""), flag, where))
    return items


def load_original(data_dir: Path) -> dict[str, list[ArctItem]]:
    """train / dev / test and the swapped-warrant train (``train_swap``) of the original ARCT."""
    return {split: read_arct(data_file(data_dir, rel), quoted=False, unique_ids=split != "train_swap")
            for split, rel in ORIGINAL_FILES.items()}


def load_adversarial(data_dir: Path) -> dict[str, list[ArctItem]]:
    """train_swapped (the errata's training set), train_adv, dev_adv, test_adv (claim-negated + originals)."""
    return {split: read_arct(data_file(data_dir, rel), quoted=True) for split, rel in ADVERSARIAL_FILES.items()}


@dataclass(frozen=True)
class ClaimMapEntry:
    original: str
    negated: str
    source: str  # "file:line"


def read_claim_map(path: Path) -> list[ClaimMapEntry]:
    """``original,negated`` pairs (comma-separated, CSV quoting); a conflicting duplicate original is an error."""
    path = Path(path)
    rows = _rows(path, ",", True)
    first = next(rows, None)
    if first is None or [f.strip() for f in first[1]] != ["original", "negated"]:
        where = f"{path}:{first[0]}" if first else str(path)
        raise DataError(f"{where}: expected the header 'original,negated', found {first[1] if first else 'nothing'}")
    out, seen = [], {}
    for number, fields in rows:
        where = f"{path}:{number}"
        if len(fields) != 2:
            raise DataError(f"{where}: expected 2 comma-separated fields (original,negated), found {len(fields)}")
        original, negated = fields
        if not original.strip() or not negated.strip():
            raise DataError(f"{where}: empty claim")
        if original in seen and seen[original][0] != negated:
            raise DataError(f"{where}: claim {original!r} mapped to {negated!r}, but to {seen[original][0]!r} "
                            f"at line {seen[original][1]}")
        seen.setdefault(original, (negated, number))
        out.append(ClaimMapEntry(original, negated, where))
    return out


# ---- the authors' per-seed results ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    """Summary of per-seed accuracies as the paper reports them: mean ± population sd (``np.std``), median, max."""

    mean: float
    sd: float
    median: float
    max: float
    min: float
    n: int

    @classmethod
    def of(cls, values) -> "Summary":
        v = np.asarray(values, dtype=float)
        if v.size == 0:
            nan = float("nan")
            return cls(nan, nan, nan, nan, nan, 0)
        return cls(float(v.mean()), float(v.std()), float(np.median(v)), float(v.max()), float(v.min()), int(v.size))

    def text(self) -> str:
        return f"{self.mean:.3f} ± {self.sd:.3f}, median {self.median:.3f}, max {self.max:.3f} (n={self.n} seeds)"


@dataclass
class SeedRuns:
    """One experiment's shipped runs: per seed the train/dev/test accuracy (and ``test_adv`` where present)."""

    experiment: str
    seeds: list[int]
    columns: dict[str, list[float]]
    source: str = ""
    listed_seeds: list[int] = field(default_factory=list)  # seeds.txt, where present

    @property
    def n(self) -> int:
        return len(self.seeds)

    def summary(self, column: str = "test", where: np.ndarray | None = None) -> Summary:
        if column not in self.columns:
            raise KeyError(f"{self.experiment}: no column {column!r} (has {sorted(self.columns)})")
        values = np.asarray(self.columns[column])
        return Summary.of(values if where is None else values[where])

    def array(self, column: str) -> np.ndarray:
        return np.asarray(self.columns[column], dtype=float)


def read_accs(path: Path, experiment: str | None = None) -> SeedRuns:
    """``accs.csv``: ``run_no,seed,train,dev,test[,test_adv]``; accuracies must lie in [0, 1]."""
    path = Path(path)
    rows = _rows(path, ",", True)
    header = _header(path, rows, ACCS_COLUMNS, f"the header {','.join(ACCS_COLUMNS)}[,test_adv]")
    acc_cols = [c for c in header if c not in ("run_no", "seed")]
    seeds, columns, seen = [], {c: [] for c in acc_cols}, {}
    for number, fields in rows:
        where = f"{path}:{number}"
        if len(fields) != len(header):
            raise DataError(f"{where}: expected {len(header)} comma-separated fields, found {len(fields)}")
        row = dict(zip(header, fields))
        try:
            seed = int(row["seed"])
        except ValueError:
            raise DataError(f"{where}: seed {row['seed']!r} is not an integer") from None
        if seed in seen:
            raise DataError(f"{where}: seed {seed} appears twice (first at line {seen[seed]})")
        seen[seed] = number
        for c in acc_cols:
            try:
                value = float(row[c])
            except ValueError:
                raise DataError(f"{where}: {c} accuracy {row[c]!r} is not a number") from None
            if not (0.0 <= value <= 1.0) or math.isnan(value):
                raise DataError(f"{where}: {c} accuracy {value} is outside [0, 1]")
            columns[c].append(value)
        seeds.append(seed)
    if not seeds:
        raise DataError(f"{path}: no runs after the header")
    return SeedRuns(experiment or path.parent.name, seeds, columns, str(path))


def results_files(data_dir: Path) -> list[Path]:
    """Every ``results_from_paper/<experiment>/accs.csv`` (sorted)."""
    root = data_file(data_dir, RESULTS_DIR)
    files = sorted(root.glob("*/accs.csv"))
    if not files:
        raise DataError(f"{root}: no <experiment>/accs.csv files")
    return files


def load_shipped_results(data_dir: Path) -> dict[str, SeedRuns]:
    """experiment name -> its runs (with ``seeds.txt`` where shipped, which must list the same seeds)."""
    out = {}
    for path in results_files(data_dir):
        runs = read_accs(path)
        seeds_txt = path.parent / "seeds.txt"
        if seeds_txt.is_file():
            listed = []
            for number, line in enumerate(read_text(seeds_txt).splitlines(), 1):
                if line.strip():
                    try:
                        listed.append(int(line))
                    except ValueError:
                        raise DataError(f"{seeds_txt}:{number}: seed {line!r} is not an integer") from None
            runs.listed_seeds = listed
            if sorted(listed) != sorted(runs.seeds):
                raise DataError(f"{seeds_txt}: lists seeds {listed}, but {path} has runs for {runs.seeds}")
        out[runs.experiment] = runs
    return out


def data_paths(data_dir: Path) -> list[Path]:
    """Every file the ARCT family reads (cache key and provenance)."""
    rels = list(ORIGINAL_FILES.values()) + list(ADVERSARIAL_FILES.values()) + [CLAIM_MAP]
    return [data_file(data_dir, r) for r in rels] + results_files(data_dir)
