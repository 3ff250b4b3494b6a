"""Recording a model's baseline: every measured claim value with its n and full provenance (never typed by hand)."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import platform
import subprocess
import sys
from pathlib import Path

from .cache import data_files
from .claims import baseline_key


def file_sha256(path: Path) -> str:
    from .errors import DataError

    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError as exc:  # e.g. the data folder disappeared mid-run: the project's clean error, not a traceback
        raise DataError(f"{path}: cannot read the data file for its checksum ({exc.strerror or exc})") from None
    return h.hexdigest()


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


def describe_data(paths: list[Path], data_dir: Path) -> str:
    """``relative/path sha256:… (k file(s))`` for the files a pass read (a folder: its data files)."""
    digest, names, count = hashlib.sha256(), [], 0
    for p in paths:
        p = Path(p)
        files = data_files(p)
        for f in files:
            digest.update(f.name.encode())
            digest.update(file_sha256(f).encode())
        count += len(files)
        try:
            names.append(p.relative_to(data_dir).as_posix())
        except ValueError:
            names.append(p.name)
    return f"{' + '.join(names)} sha256:{digest.hexdigest()[:16]} ({count} file(s))"


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
                                                        "holds": o.holds, "head": o.head, "detail": o.detail}
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
        earlier = []
        if path.is_file():  # keep what other corpora/claims recorded earlier, with the provenance of those runs
            old = json.loads(path.read_text(encoding="utf-8"))
            kept = {k: v for k, v in old.get("results", {}).items() if k not in results}
            results = {**kept, **results}
            dates = {v.get("recorded") for v in kept.values()}
            runs = [old.get("provenance", {}), *old.get("provenance", {}).get("earlier_runs", [])]
            earlier = [{k: v for k, v in run.items() if k != "earlier_runs"} for run in runs if run.get("date") in dates]
        if earlier:
            provenance["earlier_runs"] = earlier
        doc = {"provenance": provenance, "results": dict(sorted(results.items()))}
        path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written
