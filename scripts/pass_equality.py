"""Every forward family's pass result at this checkout, dumped bit for bit, and two dumps compared: the check behind
"every statistic unchanged" when a reducer or the forward loop changes (docs/speed.md, issue 47).

    # at the old commit (a worktree of it) and at the new one, then compare:
    PYTHONPATH=<checkout> .venv/bin/python scripts/pass_equality.py dump old.pkl --data-dir ../shared/data --cache-dir C
    PYTHONPATH=<checkout> .venv/bin/python scripts/pass_equality.py dump new.pkl --data-dir ../shared/data --cache-dir C
    .venv/bin/python scripts/pass_equality.py compare old.pkl new.pkl

``dump``: MiniLM on the CPU (the gradient family on its random-init twin: MiniLM has no MLM head), each family's
default corpus at a small ``limit``; every field of each pass's result converted to numpy (timings aside). Families
that fine-tune (patterns, probes) read and write their checkpoints under ``--cache-dir``; pass the same folder to
both dumps. ``compare``: per family "bit-identical" or the fields that differ (exit 1 if any)."""
from __future__ import annotations

import argparse
import dataclasses
import pickle
import sys
import time
from pathlib import Path

import numpy as np

JOBS = [("dependency", "ewt_dev", 400), ("surface", "wikitext2", 120), ("clustering", "wikitext2", 60),
        ("coref", "gum_dev", 150), ("framenet", "notebook", 150), ("patterns", "mrpc", 64), ("probes", "ewt_dev", 60),
        ("norms", "wikitext2_types01", 40), ("gradient", "wikitext2", 40)]
TRAINS = ("patterns", "probes")


def plain(x, depth: int = 0):
    """``x`` as nested dicts/lists of numpy arrays and scalars (tensors to numpy, dataclasses and objects by field)."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, (np.ndarray, np.generic, int, float, str, bool, type(None))):
        return x
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {"__cls__": type(x).__name__, **{f.name: plain(getattr(x, f.name), depth + 1) for f in dataclasses.fields(x)}}
    if isinstance(x, dict):
        return {str(k): plain(v, depth + 1) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v, depth + 1) for v in x]
    if hasattr(x, "__dict__") and depth < 6:
        return {"__cls__": type(x).__name__, **{k: plain(v, depth + 1) for k, v in vars(x).items() if not k.startswith("_")}}
    return repr(x)


def dump(out: Path, data_dir: Path, cache_dir: Path, only: list[str]) -> None:
    from bertattn_bench.claims.registry import families
    from bertattn_bench.engine.model import load_model

    loaded = load_model("embedded", device="cpu")
    twin = load_model("random:embedded", device="cpu")
    result = {}
    for fam, corpus, limit in JOBS:
        if only and fam not in only:
            continue
        start = time.time()
        kwargs = {"limit": limit}
        if fam in TRAINS:
            kwargs["options"] = {"tier": "quick", "cache_dir": cache_dir}
        p = families()[fam].prepare(twin if fam == "gradient" else loaded, data_dir, corpus, **kwargs)
        p.artifacts()
        r = p.run()
        result[fam] = plain(r.result)
        print(f"{fam} {corpus}: {r.seconds:.2f} s timed, {time.time() - start:.1f} s", flush=True)
    with open(out, "wb") as fh:
        pickle.dump(result, fh)


def differences(x, y, path: str, out: list[str]) -> None:
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            if k == "seconds":  # timings
                continue
            if k not in x or k not in y:
                out.append(f"{path}.{k}: on one side only")
            else:
                differences(x[k], y[k], f"{path}.{k}", out)
    elif isinstance(x, list) and isinstance(y, list):
        if len(x) != len(y):
            out.append(f"{path}: length {len(x)} vs {len(y)}")
        for i, (u, v) in enumerate(zip(x, y)):
            differences(u, v, f"{path}[{i}]", out)
    elif isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        a, b = np.asarray(x), np.asarray(y)
        if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            gap = (np.abs(a.astype(float) - b.astype(float)).max()
                   if a.shape == b.shape and a.dtype.kind in "fiub" and b.dtype.kind in "fiub" else "shape/dtype")
            out.append(f"{path}: arrays differ (largest gap {gap})")
    elif not (x == y or (isinstance(x, float) and isinstance(y, float) and x != x and y != y)):
        out.append(f"{path}: {x!r} vs {y!r}"[:300])


def compare(a_path: Path, b_path: Path) -> int:
    with open(a_path, "rb") as fa, open(b_path, "rb") as fb:
        a, b = pickle.load(fa), pickle.load(fb)
    bad = 0
    for fam in sorted(set(a) | set(b)):
        if fam not in a or fam not in b:
            print(f"{fam}: in one dump only")
            bad += 1
            continue
        diffs: list[str] = []
        differences(a[fam], b[fam], fam, diffs)
        print(f"{fam}: bit-identical" if not diffs else f"{fam}: {len(diffs)} differences: " + "; ".join(diffs[:6]))
        bad += bool(diffs)
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out", type=Path)
    d.add_argument("--data-dir", type=Path, required=True)
    d.add_argument("--cache-dir", type=Path, required=True)
    d.add_argument("--only", nargs="*", default=[], help="these families only")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = ap.parse_args()
    if args.cmd == "dump":
        dump(args.out, args.data_dir, args.cache_dir, args.only)
        return 0
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
