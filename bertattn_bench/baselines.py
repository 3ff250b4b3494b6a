"""Recording a model's baseline: every measured claim value with its n and full provenance (never typed by hand)."""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

from .cache import DigestIndex, files_digest
from .claims import baseline_key


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
    and memo as the pass cache's key (:func:`cache.files_digest`)."""
    names = []
    for p in map(Path, paths):
        try:
            names.append(p.relative_to(data_dir).as_posix())
        except ValueError:
            names.append(p.name)
    digest, count = files_digest(paths, index)
    return f"{' + '.join(names)} sha256:{digest[:16]} ({count} file(s))"


def _data_of(session, slug: str) -> dict[str, str]:
    """``family/corpus`` -> the data files (with checksums) that pass read, from the session's pass summaries."""
    return {f"{p['family']}/{p['corpus']}": p.get("data_files") or p.get("data", "")
            for p in session.passes if p["slug"] == slug}


def record_baselines(session, directory: Path, date: str | None = None) -> list[Path]:
    """Write (or merge into) ``directory/<slug>.json`` for each model of the session; ``date`` defaults to now (UTC)."""
    import torch
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    by_model: dict[str, list] = {}
    for o in session.outcomes:
        if o.skipped is None and not o.negative_control:  # the twin's values are a control, not a baseline
            by_model.setdefault(o.model_slug, []).append(o)
    written = []
    for slug, outcomes in by_model.items():
        results = {baseline_key(o.claim_id, o.corpus): {"measured": o.measured, "n": o.n, "n_unit": o.n_unit,
                                                        "holds": o.holds, "head": o.head, "detail": o.detail,
                                                        **({"inconclusive": True} if getattr(o, "inconclusive", False)
                                                           else {})}
                   for o in outcomes}
        path = directory / f"{slug}.json"
        info = next(p for p in session.passes if p["slug"] == slug)
        provenance = {
            "model": info["model"], "source": info["source"].replace(str(Path(sys.prefix)), "<venv>"),
            "command": "pytest " + " ".join(session.config.invocation_params.args),
            "date": date or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "commit": git_commit(), "data": _data_of(session, slug),
            "attn_implementation": info["attn_implementation"], "device": info["device"],
            "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "limit": session.config.getoption("--limit"),
        }
        for r in results.values():
            r["recorded"] = provenance["date"]  # which run (provenance or earlier_runs) measured it
        spread = sorted(p.relative_to(directory).as_posix() for p in (directory / "spread").glob(f"{slug}-*.json"))
        if spread:  # the measured spread behind the tolerances of trained values (scripts/probe_spread.py)
            provenance["tolerance_spread"] = spread
        # read-merge-write under a lock: two processes recording other claims into the same file keep both
        with FileLock(str(path) + ".lock"):
            _write_atomic(path, _merged(path, provenance, results))
        written.append(path)
    return written


def _merged(path: Path, provenance: dict, results: dict) -> dict:
    """``results`` merged over what ``path`` holds: earlier values of other claims/corpora are kept, with the
    provenance of the runs that measured them (``earlier_runs``)."""
    earlier = []
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        kept = {k: v for k, v in old.get("results", {}).items() if k not in results}
        results = {**kept, **results}
        dates = {v.get("recorded") for v in kept.values()}
        runs = [old.get("provenance", {}), *old.get("provenance", {}).get("earlier_runs", [])]
        earlier = [{k: v for k, v in run.items() if k != "earlier_runs"} for run in runs if run.get("date") in dates]
    if earlier:
        provenance = {**provenance, "earlier_runs": earlier}
    return {"provenance": provenance, "results": dict(sorted(results.items()))}


def _write_atomic(path: Path, doc: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
