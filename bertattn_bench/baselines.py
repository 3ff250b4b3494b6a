"""Recording a model's baseline: every measured claim value with its n and full provenance (never typed by hand)."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import platform
import subprocess
import sys
from pathlib import Path

from .claims import baseline_key


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                             cwd=Path(__file__).resolve().parent)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=Path(__file__).resolve().parent).stdout.strip()
        return out.stdout.strip() + ("+uncommitted-changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def data_files(session, corpora: set[str]) -> dict[str, str]:
    from .data import segments, ud

    known = {**ud.CORPORA, **segments.CORPORA}
    out = {}
    for c in sorted(corpora):
        path = session.data_dir / known[c]
        files = sorted(path.glob("*.conllu")) if path.is_dir() else [path]
        h = hashlib.sha256()
        for f in files:
            h.update(file_sha256(f).encode())
        out[c] = f"{known[c]} sha256:{h.hexdigest()[:16]} ({len(files)} file(s))"
    return out


def record_baselines(session, directory: Path) -> list[Path]:
    import torch
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    by_model: dict[str, list] = {}
    for o in session.outcomes:
        if o.skipped is None:
            by_model.setdefault(o.model_slug, []).append(o)
    written = []
    for slug, outcomes in by_model.items():
        results = {baseline_key(o.claim_id, o.corpus): {"measured": o.measured, "n": o.n, "n_unit": o.n_unit,
                                                        "holds": o.holds, "head": o.head, "detail": o.detail}
                   for o in outcomes}
        path = directory / f"{slug}.json"
        if path.is_file():  # keep what other corpora/claims recorded earlier
            old = json.loads(path.read_text(encoding="utf-8"))
            results = {**old.get("results", {}), **results}
        info = next(p for p in session.passes if p["slug"] == slug)
        doc = {
            "provenance": {
                "model": info["model"], "source": info["source"].replace(str(Path(sys.prefix)), "<venv>"),
                "command": "pytest " + " ".join(session.config.invocation_params.args),
                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "commit": git_commit(), "data": data_files(session, {o.corpus for o in outcomes}),
                "attn_implementation": info["attn_implementation"], "device": info["device"],
                "torch": torch.__version__, "transformers": transformers.__version__,
                "python": platform.python_version(), "limit": session.config.getoption("--limit"),
            },
            "results": dict(sorted(results.items())),
        }
        path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written
