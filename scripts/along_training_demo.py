"""Claims along training, shown: a short MRPC fine-tune of the embedded model (a plain PyTorch loop), the selected
claims measured every N steps with ``bertattn_bench.claims_along_training`` (what ``ClaimsCallback`` does inside a
``transformers`` Trainer), and the claims × steps matrix it leaves in OUT/matrix.md.

    .venv/bin/python scripts/along_training_demo.py --data-dir ../shared/data --out out/along --steps 240 --every 60

Each step's dev accuracy (on DEV_PAIRS MRPC dev pairs, against the majority class) is written beside the matrix
(OUT/accuracy.csv), so a reader sees whether the model had learned anything when a claim moved.
"""
from __future__ import annotations

import argparse
import csv
import random
import time
from pathlib import Path

import torch

SELECT = ("clark.cls_early_layers or clark.sep_mid_layers or clark.sep_peak_over_half or clark.sep_to_sep_90 or "
          "clark.special_over_half or clark.cls_entropy_last_layer or clark.dep_dobj or clark.dep_nsubj or "
          "clark.dep_det or clark.dep_pobj")
DEV_PAIRS = 408


def batches(tok, rows, size: int):
    for i in range(0, len(rows), size):
        chunk = rows[i:i + size]
        enc = tok([r.text_a for r in chunk], [r.text_b for r in chunk], truncation=True, max_length=128,
                  padding=True, return_tensors="pt")
        yield enc, torch.tensor([int(r.label) for r in chunk])


@torch.inference_mode()
def accuracy(model, tok, rows) -> float:
    model.eval()
    right = 0
    for enc, labels in batches(tok, rows, 64):
        right += int((model(**enc).logits.argmax(-1) == labels).sum())
    model.train()
    return 100.0 * right / len(rows)


def main() -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    import bertattn_bench as bb
    from bertattn_bench.data import glue
    from bertattn_bench.engine.model import embedded_model_path

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--out", default="out/along")
    p.add_argument("--steps", type=int, default=240)
    p.add_argument("--every", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--select", default=SELECT)
    args = p.parse_args()

    torch.manual_seed(args.seed)  # before any data order or weight is drawn
    rng = random.Random(args.seed)
    path = embedded_model_path()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2)
    train = glue.load_split(Path(args.data_dir), "mrpc", "train")
    dev = glue.load_split(Path(args.data_dir), "mrpc", "dev")[:DEV_PAIRS]
    majority = 100.0 * max(sum(int(r.label) for r in dev), sum(1 - int(r.label) for r in dev)) / len(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = [("step", "dev_accuracy", "majority", "claims_seconds")]

    def measure(step: int) -> None:
        start = time.perf_counter()
        res = bb.claims_along_training(model, tok, step, out, select=args.select, name="minilm-mrpc",
                                       data_dir=args.data_dir)
        acc = accuracy(model, tok, dev)
        log.append((step, round(acc, 2), round(majority, 2), round(time.perf_counter() - start, 1)))
        held = sum(bool(o.holds) for o in res if not o.skipped)
        print(f"step {step}: dev acc {acc:.2f} (majority {majority:.2f}); {held} of {len(res)} claims hold")

    model.train()
    order, step = [], 0
    measure(0)
    while step < args.steps:
        if not order:
            order = list(range(len(train)))
            rng.shuffle(order)
        chunk = [train[i] for i in order[:args.batch_size]]
        order = order[args.batch_size:]
        (enc, labels), = batches(tok, chunk, args.batch_size)
        loss = torch.nn.functional.cross_entropy(model(**enc).logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % args.every == 0 or step == args.steps:
            measure(step)
    with open(out / "accuracy.csv", "w", newline="") as f:
        csv.writer(f).writerows(log)
    print(f"matrix: {out / 'matrix.md'}; accuracy per step: {out / 'accuracy.csv'}")


if __name__ == "__main__":
    main()
