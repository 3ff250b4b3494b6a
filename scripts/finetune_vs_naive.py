#!/usr/bin/env python
"""Time the suite's fine-tuning against a naive Hugging Face loop on the same task, in one run (issue 27).

* ``ours-bf16`` / ``ours-fp32``: :func:`bertattn_bench.training.glue_finetune.train` (length-pooled batches of 32, the paper's
  recipe) with bf16 autocast on or off;
* ``ours-graphs``: ``ours-fp32`` with the step replayed as CUDA graphs per batch shape and batches padded to a
  multiple of 16 pieces (``Recipe.step_graphs``, ``pad_to_multiple``; on a CPU the step stays eager: padding only);
  ``ours-pad16``: the padding alone, eager (what the padding costs or saves without the graphs);
* ``naive``: ``AutoModelForSequenceClassification`` on the same encoder, batches of 32 in a seeded random order,
  tokenised per batch and padded to the longest in the batch, AdamW 5e-5 with linear warm-up/decay, fp32.

Same training rows, same epochs, one after the other, on ``--device`` (``auto``: the GPU where there is one; each
timing waits for the device's queued work); a variant may be named more than once (interleaved rounds: the first
run of a process also pays the device's warm-up). Prints seconds per variant, the dev accuracy each reaches (a
sanity check that every loop trains), the thread count and the CPU's bf16 units; ``--profile``: each variant's
training under torch.profiler, its operators with the most host time.

    PYTHONPATH=$PWD BERTATTN_DATA_DIR=../shared/data HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \\
        .venv/bin/python scripts/finetune_vs_naive.py --data-dir ../shared/data [--epochs 3] [--variants ours-fp32,naive]
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import statistics
from pathlib import Path

import numpy as np
import torch

from bertattn_bench.data import glue
from bertattn_bench.engine.model import load_model
from bertattn_bench.engine.opcount import top_operators
from bertattn_bench.engine.passes import timed
from bertattn_bench.training import glue_finetune as finetune
from bertattn_bench.training import precision

VARIANTS = ("ours-bf16", "ours-fp32", "ours-graphs", "ours-pad16", "naive")
PROFILE = False


def timed_region(device: torch.device, name: str, fn) -> float:
    """Seconds ``fn`` takes, the device's queued work included (the suite's one timer); with ``--profile`` under
    torch.profiler, then its twelve operators with the most host time (a launch-bound loop spends its time there)."""
    if not PROFILE:
        return timed(device, fn)[1]
    secs, table = top_operators(device, fn, by="host", rows=12)
    print(f"== profile: {name}\n{table}")
    return secs


RECIPES = {"ours-bf16": {"bf16_autocast": True}, "ours-fp32": {"bf16_autocast": False},
           "ours-graphs": {"bf16_autocast": False, "step_graphs": True, "pad_to_multiple": 16},
           "ours-pad16": {"bf16_autocast": False, "pad_to_multiple": 16}}


def ours(loaded, t, rows, dev_rows, epochs: int, variant: str) -> tuple[float, float]:
    recipe = dataclasses.replace(finetune.Recipe(), epochs=epochs, **RECIPES[variant])
    data = finetune.encode_split(loaded.tokenizer, rows, recipe.max_tokens)
    dev = finetune.encode_split(loaded.tokenizer, dev_rows, recipe.max_tokens)
    model = finetune.task_model(loaded, t, 0)
    device = next(model.parameters()).device
    log = {}
    secs = timed_region(device, variant, lambda: log.update(finetune.train(model, t, data, loaded.tokenizer, recipe, 0)))
    # what each run trained: its losses and a hash of its weights (the graphs' run against the same padding eager,
    # ours-pad16: the same numbers up to the GPU's non-deterministic kernels, if the capture holds the same step)
    digest = hashlib.sha256()
    for name, value in sorted(model.state_dict().items()):
        digest.update(name.encode() + value.detach().float().cpu().numpy().tobytes())
    print(f"{variant:>10}: loss per epoch {[round(x, 6) for x in log['loss_per_epoch']]}, weights "
          f"{digest.hexdigest()[:16]}" + (f", step graphs {log['step_graphs']}" if "step_graphs" in log else ""))
    acc = float((finetune.predict(model, dev, loaded.tokenizer).argmax(-1) == dev.labels).mean())
    return secs, acc


def naive(source: str, t, rows, dev_rows, epochs: int, device: torch.device) -> tuple[float, float]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

    tok = AutoTokenizer.from_pretrained(source)
    model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=t.num_labels).to(device)
    gen = torch.Generator().manual_seed(0)
    steps = epochs * ((len(rows) + 31) // 32)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, int(0.1 * steps), steps)
    labels = torch.tensor([int(r.label) for r in rows])

    def loop() -> None:
        model.train()
        for _ in range(epochs):
            order = torch.randperm(len(rows), generator=gen).tolist()
            for b0 in range(0, len(order), 32):
                idx = order[b0:b0 + 32]
                enc = tok([rows[i].text_a for i in idx], [rows[i].text_b for i in idx], truncation=True, max_length=128,
                          padding="longest", return_tensors="pt")
                loss = model(**enc.to(device), labels=labels[idx].to(device)).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad()

    secs = timed_region(device, "naive", loop)
    model.eval()
    correct = 0
    with torch.inference_mode():
        for b0 in range(0, len(dev_rows), 64):
            chunk = dev_rows[b0:b0 + 64]
            enc = tok([r.text_a for r in chunk], [r.text_b for r in chunk], truncation=True, max_length=128,
                      padding="longest", return_tensors="pt")
            pred = model(**enc.to(device)).logits.argmax(-1).cpu().numpy()
            correct += int((pred == np.array([int(r.label) for r in chunk])).sum())
    return secs, correct / len(dev_rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--task", default="mrpc")
    ap.add_argument("--device", default="auto", help="auto (a GPU where there is one), cpu, cuda, cuda:N")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--max-train", type=int, default=None, help="the first N training rows (a smoke check)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated of {', '.join(VARIANTS)}")
    ap.add_argument("--profile", action="store_true", help="each variant's training under torch.profiler")
    args = ap.parse_args()
    global PROFILE
    PROFILE = args.profile
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        raise SystemExit(f"--variants: unknown {', '.join(bad)} (expected some of {', '.join(VARIANTS)})")
    loaded = load_model(args.model, device=args.device)
    device = torch.device(loaded.info.device)
    t = glue.task(args.task)
    rows = glue.load_split(Path(args.data_dir), args.task, "train")[:args.max_train]
    dev_rows = glue.load_split(Path(args.data_dir), args.task, "dev")
    flags = precision._cpu_flags()
    print(f"{loaded.info.name}, {args.task}: {len(rows)} training examples, {args.epochs} epoch(s), dev n = "
          f"{len(dev_rows)}; on {device}; torch {torch.__version__}, {torch.get_num_threads()} threads; CPU amx_bf16 "
          f"{'amx_bf16' in flags}, avx512_bf16 {'avx512_bf16' in flags}")
    times: dict[str, list[float]] = {}
    for v in variants:
        if v == "naive":
            secs, acc = naive(loaded.info.source, t, rows, dev_rows, args.epochs, device)
        else:
            secs, acc = ours(loaded, t, rows, dev_rows, args.epochs, v)
        times.setdefault(v, []).append(secs)
        print(f"{v:>10}: {secs:7.1f} s, dev accuracy {100 * acc:.1f}", flush=True)
    if "naive" in times:  # the measure: each of ours against the plain loop, medians of the interleaved runs
        base = statistics.median(times["naive"])
        for v in (v for v in VARIANTS if v in times and v != "naive"):
            mine = statistics.median(times[v])
            print(f"median {v} {mine:.2f} s / naive {base:.2f} s = {mine / base:.2f}x the plain loop "
                  f"({len(times[v])} and {len(times['naive'])} run(s); issue 47's target on a GPU: <= 0.8x)")


if __name__ == "__main__":
    main()
