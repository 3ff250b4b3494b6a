#!/usr/bin/env python
"""Issue 46's checks on the real model (docs/results.md, "Issue 46"): a task model judged as it is.

1. Round trip: the suite's own MRPC seed-0 fine-tune of the embedded MiniLM (the quick tier's recipe, from the
   checkpoint cache) exported as a standard transformers sequence-classification folder and judged as a user's model
   (its ``finetuning_task`` says mrpc) gives the same Table 1, disabling, pruning and speed-up values as the suite's
   own path on that checkpoint (timings aside: measured anew each run).
2. A model fine-tuned outside the suite: a plain ``transformers.Trainer`` run on MiniLM for MRPC (``--steps``
   steps), with ``ClaimsCallback(task="mrpc", select="disable")`` every ``--every`` steps (the along-training matrix
   with disabling columns), then judged as given: from the shipped TSV and from a ``datasets`` folder built from it
   (the same values); its provenance says "as given" and its values are computed, not loaded from the suite's
   checkpoints.

    PYTHONPATH=$PWD BERTATTN_DATA_DIR=../shared/data HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \\
        .venv/bin/python scripts/judge_given.py --out /tmp/judge-given --cache /tmp/judge-given-cache
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

SELECT = "finetune or disable or prune or speedup"


def values(results) -> dict:
    return {f"{o.claim_id}@{o.corpus}": {"measured": o.measured, "n": o.n, "verdict": o.verdict,
                                         "skipped": o.skipped} for o in results}


def compare(a: dict, b: dict) -> dict:
    """Per claim of both: equal, or the difference (timings are listed apart)."""
    out = {"equal": [], "timing": [], "differ": {}, "only_suite": sorted(set(a) - set(b)),
           "only_given": sorted(set(b) - set(a))}
    for k in sorted(set(a) & set(b)):
        x, y = a[k], b[k]
        if "speed" in k:
            out["timing"].append(k)
        elif x["measured"] == y["measured"] and x["n"] == y["n"]:
            out["equal"].append(k)
        elif x["measured"] is not None and y["measured"] is not None and abs(x["measured"] - y["measured"]) <= 1e-4 \
                * max(1.0, abs(x["measured"])):
            out["equal"].append(k)
        else:
            out["differ"][k] = (x, y)
    return out


def round_trip(args, data_dir: Path) -> dict:
    import bertattn_bench as bb
    from bertattn_bench.engine.model import load_model
    from bertattn_bench.training import glue_finetune as finetune
    from bertattn_bench.training.given import export_classifier
    from bertattn_bench.training.glue_pass import recipe_for

    kw = dict(select=SELECT, data_dir=data_dir, cache_dir=args.cache, tier="quick", baseline=False)
    t0 = time.perf_counter()
    suite = bb.run("embedded", **kw)
    t_suite = time.perf_counter() - t0
    loaded = load_model("embedded")
    ft = finetune.finetuned(loaded, "mrpc", 0, data_dir, args.cache, recipe_for("mrpc", "quick"))
    folder = export_classifier(ft.model, loaded.tokenizer, "mrpc", args.out / "minilm-mrpc-seed0-exported")
    t0 = time.perf_counter()
    given = bb.run(str(folder), **kw)
    t_given = time.perf_counter() - t0
    given.write_report(args.out / "report-exported")
    suite.write_report(args.out / "report-suite")
    return {"checkpoint_cached": ft.cached, "checkpoint": ft.meta.get("path"), "exported": str(folder),
            "suite_errors": suite.errors, "given_errors": given.errors, "seconds": [t_suite, t_given],
            "given_model": sorted({o.model for o in given}), "compare": compare(values(suite), values(given)),
            "suite": values(suite), "given": values(given)}


def trainer_model(args, data_dir: Path) -> Path:
    """MiniLM + a fresh classification head, fine-tuned on MRPC train by a plain transformers Trainer; the
    ClaimsCallback measures the disabling claims along the way."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

    import bertattn_bench as bb
    from bertattn_bench.data import glue
    from bertattn_bench.engine.model import embedded_model_path

    path = str(embedded_model_path())
    tok = AutoTokenizer.from_pretrained(path)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path, num_labels=2)
    config.finetuning_task = "mrpc"  # transformers 5 drops it as a from_pretrained keyword (docs/your-model.md)
    model = AutoModelForSequenceClassification.from_pretrained(path, config=config)
    train = glue.load_split(data_dir, "mrpc", "train")
    enc = tok([r.text_a for r in train], [r.text_b for r in train], truncation=True, max_length=128)
    rows = [{"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
             "token_type_ids": enc["token_type_ids"][i], "labels": int(r.label)} for i, r in enumerate(train)]
    from transformers import DataCollatorWithPadding

    cb = bb.ClaimsCallback(tok, args.out / "along", select="disable", every=args.every, name="minilm-trainer",
                           data_dir=data_dir, task="mrpc", tier="quick")
    targs = TrainingArguments(output_dir=str(args.out / "trainer"), max_steps=args.steps, per_device_train_batch_size=16,
                              learning_rate=5e-5, warmup_steps=30, weight_decay=0.01, report_to=[], save_strategy="no",
                              logging_steps=50, use_cpu=True, disable_tqdm=True, seed=0)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    Trainer(model=model, args=targs, train_dataset=rows, data_collator=DataCollatorWithPadding(tok),
            callbacks=[cb]).train()
    print(f"trainer: {args.steps} steps + callback in {time.perf_counter() - t0:.0f} s", flush=True)
    folder = args.out / "minilm-mrpc-trainer"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def judged_outside(args, data_dir: Path, folder: Path) -> dict:
    import datasets

    import bertattn_bench as bb
    from bertattn_bench.data import glue

    def table(split):
        rows = glue.load_split(data_dir, "mrpc", split)
        return datasets.Dataset.from_dict({"sentence1": [r.text_a for r in rows],
                                           "sentence2": [r.text_b for r in rows],
                                           "label": [int(r.label) for r in rows]})

    ds = args.out / "mrpc-datasets"
    datasets.DatasetDict({"train": table("train"), "validation": table("dev")}).save_to_disk(str(ds))
    kw = dict(select=SELECT, data_dir=data_dir, cache_dir=args.cache, tier="quick", baseline=False)
    tsv = bb.run(str(folder), **kw)
    tsv.write_report(args.out / "report-trainer-tsv")
    from_ds = bb.run(str(folder), eval_data={"mrpc": str(ds)}, **kw)
    from_ds.write_report(args.out / "report-trainer-datasets")
    run = json.loads((args.out / "report-trainer-tsv" / "run.json").read_text())
    return {"errors": [tsv.errors, from_ds.errors], "as_given": run.get("as_given"),
            "trained_models": run.get("trained_models"), "passes": [(p["family"], p["cached"], p["data"])
                                                                   for p in tsv.passes],
            "compare_tsv_vs_datasets": compare(values(tsv), values(from_ds)), "values": values(tsv)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--only", choices=("round-trip", "trainer"), default=None)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data_dir = Path(os.environ["BERTATTN_DATA_DIR"])
    doc = {}
    if args.only in (None, "round-trip"):
        doc["round_trip"] = round_trip(args, data_dir)
        print(json.dumps({k: v for k, v in doc["round_trip"].items() if k not in ("suite", "given")}, indent=1,
                         default=str), flush=True)
    if args.only in (None, "trainer"):
        folder = trainer_model(args, data_dir)
        doc["trainer"] = judged_outside(args, data_dir, folder)
        print(json.dumps({k: v for k, v in doc["trainer"].items() if k != "values"}, indent=1, default=str),
              flush=True)
    (args.out / "judge_given.json").write_text(json.dumps(doc, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
