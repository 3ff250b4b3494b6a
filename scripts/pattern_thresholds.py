"""Kovaleva patterns family, pre-trained maps of the five GLUE tasks (issue 36, audit items 1 and 7b):

1. the map-type rule's sensitivity: every map (dev example x head) is re-typed with each threshold (STRUCTURED 0.5,
   MIX 0.25, BLOCK 0.6) moved by -20% and +20%, one at a time, and the pre-trained share claims are re-judged
   (kov.patterns_five_types: every type >= 5%, block only on pairs; kov.vertical_third: vertical >= 1/3;
   kov.heterogeneous_share_pretrained: heterogeneous in [0.32, 0.61]). No labelled maps exist to check the
   thresholds on (the authors' ~400 hand labels were never released: kovaleva2019-methods-notes.md §2);
2. kov.sst2_sep_highest on the pre-trained passes of the five tasks (the full tier's dev sets: <= 1,000 examples per
   task, the same seeded sample), without the full tier's fine-tunes: the length-matched margin (the claim's
   metric) beside the pre-audit one (mean score x length, unmatched) and the paper's unmatched score.

    PYTHONPATH=. .venv/bin/python scripts/pattern_thresholds.py --data-dir ../shared/data [--model embedded]
        [--tasks mrpc,sts-b,sst-2,rte,qnli] [--tier full] [--json OUT]
"""
import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from bertattn_bench.claims.registry import families
from bertattn_bench.engine.attention import Reducer, run_reducers
from bertattn_bench.engine.batching import iter_batches
from bertattn_bench.engine.model import load_model
from bertattn_bench.families import patterns as P

CLAIMS = {  # pre-trained share claims: (types, test)
    "kov.patterns_five_types": "min share >= 0.05",
    "kov.vertical_third": "vertical >= 1/3",
    "kov.heterogeneous_share_pretrained": "heterogeneous in [0.32, 0.61]",
}


class MapFeatures(Reducer):
    """(v, d, b) of every map, kept on the CPU (a few MB for 1,000 examples x 72 heads x 6 layers)."""

    def __init__(self):
        self.rows: list[list[torch.Tensor]] = []

    def start_batch(self, batch) -> None:
        self.m = P.map_masks(batch)
        self.rows.append([])

    def update(self, layer: int, probs: torch.Tensor) -> None:
        v, d, b = P.map_features(probs, self.m)
        self.rows[-1].append(torch.stack([v, d, b], -1).cpu())  # (B, H, 3)

    def finalize(self) -> np.ndarray:
        return torch.cat([torch.stack(r, 1) for r in self.rows]).numpy()  # (N, L, H, 3)


def verdicts(shares: np.ndarray, is_pair: bool) -> dict[str, bool]:
    wanted = [i for i, t in enumerate(P.TYPES) if t != "block" or is_pair]
    return {"kov.patterns_five_types": bool(min(shares[i] for i in wanted) >= 0.05),
            "kov.vertical_third": bool(shares[P.TYPES.index("vertical")] >= 1 / 3),
            "kov.heterogeneous_share_pretrained": bool(0.32 <= shares[P.TYPES.index("heterogeneous")] <= 0.61)}


def shares_of(feats: np.ndarray, **thresholds) -> np.ndarray:
    t = torch.from_numpy(feats.reshape(-1, 3))
    types = P.classify(t[:, 0], t[:, 1], t[:, 2], **thresholds)
    return np.bincount(types.numpy(), minlength=len(P.TYPES)) / len(types)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--tasks", default="mrpc,sts-b,sst-2,rte,qnli")
    ap.add_argument("--tier", default="full", help="whose dev sample: full (<= 1,000 per task), quick (100)")
    ap.add_argument("--json", default=None, help="write the numbers here")
    args = ap.parse_args()
    loaded = load_model(args.model, device=args.device)
    dev = torch.device(loaded.info.device)
    info = loaded.info
    out = {"model": info.name, "tier": args.tier, "tasks": {}}
    passes = {}
    for task in args.tasks.split(","):
        prep = families()["patterns"].prepare(loaded, Path(args.data_dir), task, options={"tier": args.tier})
        red, feats = P.PatternReducer(info.n_layers, info.n_heads, info.device, keep_examples=False), MapFeatures()
        with torch.inference_mode():
            glue, f = run_reducers(loaded.model, iter_batches(prep.dev, loaded.tokenizer, dev, 32), [red, feats])
        is_pair = prep.task.is_pair
        base = shares_of(f)
        rows = {"default": (base, verdicts(base, is_pair))}
        for name, key, value in (("STRUCTURED", "structured_min", P.STRUCTURED), ("MIX", "mix", P.MIX),
                                 ("BLOCK", "block_min", P.BLOCK)):
            for k in (0.8, 1.2):
                s = shares_of(f, **{key: value * k})
                rows[f"{name} {value * k:.3g}"] = (s, verdicts(s, is_pair))
        out["tasks"][task] = {"n_examples": len(prep.dev), "n_maps": int(f.shape[0] * f.shape[1] * f.shape[2]),
                              "shares": {k: dict(zip(P.TYPES, map(float, s))) for k, (s, _) in rows.items()},
                              "verdicts": {k: v for k, (_, v) in rows.items()}}
        print(f"\n{task} ({len(prep.dev)} examples, {out['tasks'][task]['n_maps']} maps)")
        for k, (s, v) in rows.items():
            changed = [c for c in CLAIMS if v[c] != rows["default"][1][c]]
            print(f"  {k:16s} " + " ".join(f"{t[:5]} {x:.3f}" for t, x in zip(P.TYPES, s))
                  + "  " + " ".join(f"{c.split('.')[1]}={'H' if v[c] else '-'}" for c in CLAIMS)
                  + (f"  CHANGED: {', '.join(changed)}" if changed else ""))
        ms = P.ModelStats("pre-trained", glue, None)
        passes[task] = SimpleNamespace(corpus=task, result=P.PatternsResult(
            task, is_pair, args.tier, len(prep.dev), prep.n_dev_total, "ewt_dev", ms, None, "", "[CLS]",
            info.n_layers, info.n_heads))
    if "sst-2" in passes and len(passes) > 1:
        me, others = passes["sst-2"], [p for t, p in passes.items() if t != "sst-2"]
        m = P.sep_score_task_margin(me, others)
        free = {t: float(p.result.pretrained.glue.sep_free_examples.mean()) for t, p in passes.items()}
        old = free["sst-2"] - max(v for t, v in free.items() if t != "sst-2")
        out["sst2_sep_highest"] = {"value": m.value, "se": m.standard_error, "n": m.n, "detail": m.detail,
                                   "pre_audit_value": old, "pre_audit_means": free}
        print(f"\nkov.sst2_sep_highest (length-matched): {m.value:+.5f} (SE {m.standard_error:.5f}, n {m.n}); "
              f"{m.detail}\npre-audit (x length, unmatched): {old:+.4f}; " +
              ", ".join(f"{t} {v:.3f}" for t, v in free.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
