"""Interleaved timing of the Clark §4 attention core against its floor (README "Measured speed").

The pytest benchmarks time each pass once; on a shared machine one round can be off by 30%. This runs the core
(forward + every §4 statistic reduced on the device) and the bare batched forward with output_attentions on the
same batches, alternately, ``--rounds`` times, and prints every round, the minimum and the median.

    .venv/bin/python scripts/core_vs_floor.py --data-dir ../shared/data [--model embedded] [--device auto] [--rounds 5]
"""
import argparse
import statistics
import time
from pathlib import Path

import torch

from bertattn_bench.batching import iter_batches
from bertattn_bench.model import load_model
from bertattn_bench.registry import families


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--corpus", default="ewt_dev")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    loaded = load_model(args.model, device=args.device)
    dev = torch.device(loaded.info.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    prep = families()["dependency"].prepare(loaded, Path(args.data_dir), args.corpus, limit=None,
                                            batch_size=args.batch_size)
    n = len(prep.encoded)

    def bare() -> float:
        sync()
        start = time.perf_counter()
        with torch.inference_mode():
            for batch in iter_batches(prep.encoded, loaded.tokenizer, dev, args.batch_size, with_words=False):
                loaded.model(**batch.model_inputs(loaded.model), output_attentions=True)
        sync()
        return time.perf_counter() - start

    bare()  # warm-up
    core, floor = [], []
    for _ in range(args.rounds):
        core.append(prep.run().seconds)
        floor.append(bare())
    print(f"{loaded.info.name} on {loaded.info.device}, {args.corpus}: n = {n} sentences, batch {args.batch_size}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("core  s:", " ".join(f"{x:.2f}" for x in core))
    print("floor s:", " ".join(f"{x:.2f}" for x in floor))
    for name, pick in (("min", min), ("median", statistics.median)):
        c, f = pick(core), pick(floor)
        print(f"{name:>6}: core {n / c:.0f} sent/s, floor {n / f:.0f} sent/s, core/floor time {c / f:.2f}")


if __name__ == "__main__":
    main()
