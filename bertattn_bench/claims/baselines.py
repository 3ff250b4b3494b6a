"""Recording a model's baseline: every measured claim value with its n and full provenance (never typed by hand)."""
from __future__ import annotations

import datetime as dt
import json
import platform
import subprocess
import sys
import warnings
from pathlib import Path

from filelock import FileLock

from ..base.documents import baseline_document, read_baseline_text
from ..base.errors import BenchError
from ..base.hashing import DigestIndex, files_digest
from . import verdicts
from .catalog import REFERENCE_DIR
from .outcome import baseline_key
from .recorded import provenance_runs

BASELINE_DIR = REFERENCE_DIR / "baselines"  # the package's recorded baselines, one JSON per model


def baseline_path(model_slug: str, directory: Path = BASELINE_DIR) -> Path:
    return directory / f"{model_slug}.json"


def load_baseline(model_slug: str, directory: Path | None = None) -> dict:
    """A model's recorded baseline from the package's folder (or ``directory``); {} where none is recorded."""
    path = baseline_path(model_slug, directory or BASELINE_DIR)
    return load_baseline_file(path) if path.is_file() else {}


def load_baseline_file(path: Path) -> dict:
    """A baseline JSON file (the one parser: :func:`documents.baseline_document`)."""
    return baseline_document(read_baseline_text(path), str(path))


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                             cwd=Path(__file__).resolve().parent)
        # the recorded baselines are this function's output, not code: re-recording one does not dirty the commit
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/",
                                ":(top,exclude)reference_numbers/baselines"], capture_output=True,
                               text=True, cwd=Path(__file__).resolve().parent).stdout.strip()
        return out.stdout.strip() + ("+uncommitted-changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def describe_data(paths: list[Path], data_dir: Path, index: DigestIndex | None = None) -> str:
    """``relative/path sha256:… (k file(s))`` for the files a pass read (a folder: all its files); the same hasher
    and memo as the pass cache's key (:func:`hashing.files_digest`)."""
    names = []
    for p in map(Path, paths):
        try:
            names.append(p.relative_to(data_dir).as_posix())
        except ValueError:
            names.append(p.name)
    digest, count = files_digest(paths, index)
    return f"{' + '.join(names)} sha256:{digest[:16]} ({count} file(s))"


def _data_of(passes: list[dict], slug: str) -> dict[str, str]:
    """``family/corpus`` -> the data files (with checksums) that pass read, from the run's pass summaries."""
    return {f"{p['family']}/{p['corpus']}": p.get("data_files") or p.get("data", "")
            for p in passes if p["slug"] == slug}


def _spread_files(directory: Path, slug: str):
    """(path, runs, claims) of each readable spread file of ``slug`` (``directory/spread/<slug>-*.json``,
    scripts/spread.py), in name order; an unreadable one is passed over."""
    for path in sorted((Path(directory) / "spread").glob(f"{slug}-*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            runs, claims = doc.get("runs") or [], doc.get("claims") or {}
        except (OSError, ValueError, AttributeError):
            continue
        yield path, runs, claims


def spread_tolerances(directory: Path, slug: str) -> dict[str, tuple[float, str]]:
    """``claim@corpus`` -> (proposed tolerance, spread file) from the measured spreads of ``slug``'s trained values
    (``directory/spread/<slug>-*.json``, scripts/spread.py); the widest where two files measure one key."""
    out: dict[str, tuple[float, str]] = {}
    for path, _, claims in _spread_files(directory, slug):
        for key, entry in claims.items():
            tol = entry.get("proposed_tolerance")
            if isinstance(tol, (int, float)) and (key not in out or tol > out[key][0]):
                out[key] = (float(tol), f"spread/{path.name}")
    return out


def seed_spreads(slug: str, directory: Path | None = None) -> dict[str, dict]:
    """``claim@corpus`` -> the seed spread of ``slug``'s value measured by scripts/spread.py (``directory/spread/
    <slug>-*.json``): {"sd": sd over the seeds (ddof 1), "k": how many seeds, "seeds": [...], "values": [...],
    "source": "spread/<file>"}; the widest sd where two files measure one key. Only runs at the file's first thread
    count count (one value per seed: a thread count is another machine, not another seed). {} where none is
    recorded."""
    import statistics

    out: dict[str, dict] = {}
    for path, runs, claims in _spread_files(directory or BASELINE_DIR, slug):
        for key, entry in claims.items():
            seeds, values = entry.get("seeds"), entry.get("seed_values")
            if seeds is None and len(entry.get("values") or ()) == len(runs) and runs:  # an older file: by its runs
                first = runs[0].get("omp_num_threads")
                picked = {}
                for r, v in zip(runs, entry["values"]):
                    if r.get("omp_num_threads") == first and r.get("seed") not in picked:
                        picked[r.get("seed")] = v
                seeds, values = list(picked), list(picked.values())
            if not seeds or not values or len(values) < 2 or any(not isinstance(v, (int, float)) for v in values):
                continue
            sd = statistics.stdev(float(v) for v in values)
            if key not in out or sd > out[key]["sd"]:
                out[key] = {"sd": sd, "k": len(values), "seeds": list(seeds), "values": [float(v) for v in values],
                            "source": f"spread/{path.name}"}
    return out


def record_baselines(outcomes: list, passes: list[dict], directory: Path, command: str = "",
                     limit: int | None = None, date: str | None = None, settings: dict | None = None) -> list[Path]:
    """Write (or merge into) ``directory/<slug>.json`` for each model of a run (its claim ``outcomes`` and pass
    summaries ``passes``); ``date`` defaults to now (UTC)."""
    import torch
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    by_model: dict[str, list] = {}
    for o in outcomes:
        if o.skipped is None and not o.negative_control:  # the twin's values are a control, not a baseline
            by_model.setdefault(o.model_slug, []).append(o)
    written = []
    for slug, outcomes in by_model.items():
        results = {baseline_key(o.claim_id, o.corpus): {"measured": o.measured, "n": o.n, "n_unit": o.n_unit,
                                                        "holds": o.holds, "head": o.head, "detail": o.detail,
                                                        **({"inconclusive": True} if getattr(o, "inconclusive", False)
                                                           else {}),
                                                        **({"not_judged": o.not_judged} if getattr(o, "not_judged", None)
                                                           else {}),
                                                        # issue 61's audit reads these: every judged row carries
                                                        # an interval, bounds or an exact reason
                                                        "interval": getattr(o, "interval", None),
                                                        **({"exact": True} if getattr(o, "exact", None) else {})}
                   for o in outcomes}
        path = directory / f"{slug}.json"
        info = next(p for p in passes if p["slug"] == slug)
        provenance = {
            "model": info["model"], "source": info["source"].replace(str(Path(sys.prefix)), "<venv>"),
            "command": command,
            "date": date or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "commit": git_commit(), "data": _data_of(passes, slug),
            "attn_implementation": info["attn_implementation"], "device": info["device"],
            "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "limit": limit,
            **({"settings": settings} if settings else {}),  # every option that can change a value (RunOptions)
        }
        for r in results.values():
            r["recorded"] = provenance["date"]  # which run (provenance or earlier_runs) measured it
        tolerances = spread_tolerances(directory, slug)
        for o in outcomes:
            key = baseline_key(o.claim_id, o.corpus)
            if key in tolerances and tolerances[key][0] > (o.tolerance or 0.0):
                results[key]["tolerance"], results[key]["tolerance_spread"] = tolerances[key]
        spread = sorted(p.relative_to(directory).as_posix() for p in (directory / "spread").glob(f"{slug}-*.json"))
        if spread:  # the measured spread behind the tolerances of trained values (scripts/spread.py)
            provenance["tolerance_spread"] = spread
        # read-merge-write under a lock: two processes recording other claims into the same file keep both
        with FileLock(str(path) + ".lock"):
            try:
                doc = _merged(path, provenance, results)
            except BenchError as exc:  # the old file cannot be merged into: this run's values are never lost
                path = unmerged_path(path, provenance["date"])
                warnings.warn(f"{exc}: not merged; this run's values are written beside it, to {path}",
                              BaselineWarning)
                doc = {"provenance": provenance, "results": dict(sorted(results.items()))}
            _write_atomic(path, doc)
        written.append(path)
    return written


class BaselineWarning(UserWarning):
    """A recorded baseline that could not be merged into: the run's values were written beside it."""


def unmerged_path(path: Path, date: str) -> Path:
    """Where a run's baseline goes when ``path`` cannot be merged into: beside it, named by the run's date."""
    stamp = "".join(c for c in date if c.isalnum())[:15]
    return path.with_name(f"{path.stem}.unmerged-{stamp}.json")


def check_record_target(directory: Path, slugs: list[str]) -> None:
    """Before any pass: each ``directory/<slug>.json`` a run will merge into is a readable, valid baseline and
    writable (a BenchError naming the file and the entry), so a finished run's values are never lost at the end."""
    import os

    for slug in slugs:
        path = baseline_path(slug, Path(directory))
        if path.exists() and not path.is_file():
            raise BenchError(f"--record-baseline {directory}: {path} is not a file")
        if path.is_file():
            try:
                load_baseline_file(path)
            except BenchError as exc:
                raise BenchError(f"--record-baseline {directory}: cannot merge into {exc} (fix or move the file)") \
                    from None
            if not os.access(path, os.W_OK):
                raise BenchError(f"--record-baseline {directory}: {path} is not writable")


def _merged(path: Path, provenance: dict, results: dict) -> dict:
    """``results`` merged over what ``path`` holds: earlier values of other claims/corpora are kept, with the
    provenance of the runs that measured them (``earlier_runs``)."""
    earlier = []
    if path.is_file():
        old = load_baseline_file(path)  # checked: a malformed file is a BenchError naming it and its entry
        kept = {k: v for k, v in old.get("results", {}).items() if k not in results}
        results = {**kept, **results}
        dates = {v.get("recorded") for v in kept.values()}
        earlier = [{k: v for k, v in run.items() if k != "earlier_runs"}
                   for run in provenance_runs(old.get("provenance", {})) if run.get("date") in dates]
    if earlier:
        provenance = {**provenance, "earlier_runs": earlier}
    return {"provenance": provenance, "results": dict(sorted(results.items()))}


def _write_atomic(path: Path, doc: dict) -> None:
    """The baseline as a versioned strict-JSON document (schema ``bertattn-bench/baseline``), written atomically."""
    from ..base.documents import envelope, write_json

    write_json(path, envelope("baseline", doc), "baseline")


# ---- what moved between two recorded baselines ----------------------------------------------------------------

def read_baseline(spec: str, root: Path | None = None) -> dict:
    """A baseline JSON from a file path, or ``REV:PATH`` for the file as git revision REV held it; a versioned document
    (``{"schema": "bertattn-bench/baseline", "version": 1, ...}``) or an older one without those keys. Errors are
    BenchError (the commands' usage/input status, 4)."""
    from ..base.errors import BenchError

    path = Path(spec)
    if not path.is_file() and ":" in spec:
        rev, _, rel = spec.partition(":")
        out = subprocess.run(["git", "show", f"{rev}:{rel}"], capture_output=True, text=True, cwd=root)
        if out.returncode:
            raise BenchError(f"baseline {spec!r}: git show failed: {out.stderr.strip()}")
        text, where = out.stdout, spec
    elif path.is_file():
        text, where = read_baseline_text(path), str(path)
    else:
        raise BenchError(f"baseline {spec!r}: no such file (or REV:PATH in a git checkout)")
    return baseline_document(text, where)


def verdict_of(entry: dict | None) -> str:
    return "—" if entry is None else verdicts.verdict_of(entry)


def _interval(entry: dict | None) -> str:
    import re

    # the detail's interval as claims.evaluate writes it: value ± z SE, or a metric's explicit bounds
    m = re.search(r"\[(?:[\d.]+ SE interval|bounds) (\S+) \.\. ([^\s:\]]+)", (entry or {}).get("detail") or "")
    return f"{m.group(1)} .. {m.group(2)}" if m else ""


def baseline_diff(old: dict, new: dict, prefix: str = "", rel_tol: float = 1e-9) -> list[dict]:
    """Rows for every result key (``claim@corpus``) under ``prefix`` whose value, n or verdict moved, or that one side
    lacks: key, before/after value, n and verdict, and the after value's 95% interval where it has one."""
    rows = []
    o, n = old["results"], new["results"]
    # recorded with another --limit: where n differs too, the values are other samples' (compared, not judged)
    limits_differ = old.get("provenance", {}).get("limit") != new.get("provenance", {}).get("limit")
    for key in sorted(k for k in set(o) | set(n) if k.startswith(prefix)):
        a, b = o.get(key), n.get(key)
        va, vb = (a or {}).get("measured"), (b or {}).get("measured")
        same_value = (va == vb) or (isinstance(va, (int, float)) and isinstance(vb, (int, float))
                                    and abs(va - vb) <= rel_tol * max(1.0, abs(va), abs(vb)))
        if a and b and same_value and a.get("n") == b.get("n") and verdict_of(a) == verdict_of(b):
            continue
        rows.append({"key": key, "before": va, "after": vb, "n_before": (a or {}).get("n"), "n_after": (b or {}).get("n"),
                     "verdict_before": verdict_of(a), "verdict_after": verdict_of(b), "interval_after": _interval(b),
                     "flipped": verdict_of(a) != verdict_of(b),
                     "entry_tolerance": (a or {}).get("tolerance"),  # the recorded entry's own (measured spread)
                     "comparable": not (limits_differ and (a or {}).get("n") != (b or {}).get("n"))})
    return rows


FAIL_ON = ("flips", "values", "flips+values", "any", "never")


def catalog_tolerances() -> dict[str, float]:
    """claim id -> its tolerance (allowed |value - recorded|) from the claims catalog; a claim whose check compares
    the verdict only (``checked = "verdict"``: a wall-clock value, another on each machine) has none."""
    from .catalog import load_claims

    return {c.id: c.tolerance for c in load_claims() if c.checked == "value"}


def diff_failures(rows: list[dict], fail_on: str = "flips+values", tolerances: dict[str, float] | None = None) -> list[str]:
    """What in ``rows`` (:func:`baseline_diff`) fails the build under the policy ``fail_on``: ``flips`` (a verdict
    that changed, the key on both sides), ``values`` (a value that moved by more than its claim's tolerance from the
    catalog; a claim not in the catalog has none and is not judged), ``flips+values`` (the default), ``any`` (any
    row: also a changed n or a key on one side only), ``never``. A row measured with another ``--limit`` and another
    n (``comparable`` false) fails only under ``any``. One line per failure, naming the key."""
    if fail_on not in FAIL_ON:
        from ..base.errors import BenchError

        raise BenchError(f"--fail-on {fail_on!r}: expected one of {', '.join(FAIL_ON)}")
    if fail_on == "never":
        return []
    tolerances = catalog_tolerances() if tolerances is None else tolerances
    out = []
    for r in rows:
        if not r.get("comparable", True) and fail_on != "any":  # another --limit's sample
            continue
        both = r["verdict_before"] != "—" and r["verdict_after"] != "—"
        if fail_on in ("flips", "flips+values", "any") and both and r["flipped"]:
            out.append(f"{r['key']}: verdict {r['verdict_before']} -> {r['verdict_after']}")
            continue
        tol = tolerances.get(r["key"].split("@", 1)[0])
        if tol is not None and r.get("entry_tolerance"):  # the recorded entry's measured spread, never narrower
            tol = max(tol, float(r["entry_tolerance"]))
        a, b = r["before"], r["after"]
        if (fail_on in ("values", "flips+values", "any") and tol is not None and isinstance(a, (int, float))
                and isinstance(b, (int, float)) and abs(b - a) > tol + 1e-9):
            out.append(f"{r['key']}: value {a:.4g} -> {b:.4g} ({b - a:+.3g}, tolerance {tol})")
            continue
        if fail_on == "any":
            out.append(f"{r['key']}: moved (value {a} -> {b}, n {r['n_before']} -> {r['n_after']}, verdict "
                       f"{r['verdict_before']} -> {r['verdict_after']})")
    return out


def diff_markdown(rows: list[dict]) -> str:
    def num(v):
        return "—" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))

    lines = ["| claim@corpus | before (n) | after (n) | after 95% interval | verdict before → after |",
             "|---|---|---|---|---|"]
    for r in rows:
        flip = " **(flipped)**" if r["flipped"] else ""
        lines.append(f"| {r['key']} | {num(r['before'])} ({num(r['n_before'])}) | {num(r['after'])} ({num(r['n_after'])}) "
                     f"| {r['interval_after']} | {r['verdict_before']} → {r['verdict_after']}{flip} |")
    return "\n".join(lines)


# ---- joining the baseline fragments of a split run (issue 28) ------------------------------------------------------

# what must be equal across the fragments of one model's baseline: the checkout and the example limit
FRAGMENT_MUST_MATCH = ("commit", "limit")


def _comparable(entry: dict) -> dict:
    """A result without the run that measured it (``recorded``: a date): what two fragments must agree on."""
    return {k: v for k, v in entry.items() if k != "recorded"}


def merge_baseline_fragments(paths: list[Path]) -> dict[str, dict]:
    """``slug -> baseline document`` from fragments (``<slug>.json`` files written by ``--record-baseline DIR`` in
    separate runs): the union of their results, a key measured in two fragments must have the same value, n and
    verdict; fragments recorded with another commit or example limit, or whose passes read other data for the same
    family/corpus, are refused (BenchError naming both files). The provenance is the first fragment's, with the
    data of all, ``command`` saying it is a merge, and each fragment's own provenance under ``fragments``."""
    from ..base.errors import BenchError

    by_slug: dict[str, list[tuple[Path, dict]]] = {}
    for path in paths:
        doc = read_baseline(str(path))
        if not isinstance(doc.get("provenance"), dict):
            raise BenchError(f"baseline {path}: no 'provenance' object")
        by_slug.setdefault(Path(path).stem, []).append((Path(path), doc))
    first_path, first = next((p, d) for group in by_slug.values() for p, d in group) if by_slug else (None, None)
    out = {}
    for slug, group in sorted(by_slug.items()):
        results: dict[str, tuple[Path, dict]] = {}
        data: dict[str, tuple[Path, str]] = {}
        for path, doc in group:
            prov = doc["provenance"]
            for key in FRAGMENT_MUST_MATCH:
                if prov.get(key) != first["provenance"].get(key):
                    raise BenchError(f"cannot merge baseline {path} with {first_path}: recorded with different {key}"
                                     f" ({prov.get(key)!r} vs {first['provenance'].get(key)!r})")
            for key, desc in prov.get("data", {}).items():
                if key in data and data[key][1] != desc:
                    raise BenchError(f"cannot merge baseline {path} with {data[key][0]}: {key} read different data "
                                     f"({desc!r} vs {data[key][1]!r})")
                data.setdefault(key, (path, desc))
            for key, entry in doc["results"].items():
                if key in results and _comparable(results[key][1]) != _comparable(entry):
                    raise BenchError(f"cannot merge baseline {path} with {results[key][0]}: {key} differs "
                                     f"({entry.get('measured')} vs {results[key][1].get('measured')})")
                results.setdefault(key, (path, entry))
        provenance = {**group[0][1]["provenance"], "command": f"python -m bertattn_bench merge ({len(group)} "
                      f"fragment(s))", "data": {k: v[1] for k, v in sorted(data.items())},
                      "fragments": [{k: v for k, v in d["provenance"].items() if k != "data"} for _, d in group]}
        out[slug] = {"provenance": provenance, "results": {k: v[1] for k, v in sorted(results.items())}}
    return out


def write_merged_baselines(paths: list[Path], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for slug, doc in merge_baseline_fragments(paths).items():
        path = directory / f"{slug}.json"
        _write_atomic(path, doc)
        written.append(path)
    return written
