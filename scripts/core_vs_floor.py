"""Interleaved timing of the Clark §4 attention core against its floor (README "Measured speed").

The pytest benchmarks time each pass once; on a shared machine one round can be off by 30%. This runs the core
(forward + every §4 statistic reduced on the device) and the bare batched forward with output_attentions on the
same batches, alternately, ``--rounds`` times, and prints every round, the minimum and the median. A third timing,
the same passes stopped after the last layer's map as the core stops them (issue 47) with nothing reduced, gives
the statistics' own cost (core / stopped floor) beside the issue's measure (core / floor).

``--sweep disable|prune`` times a head-configuration sweep instead (the ``disable`` family's 1 + L*H + L
configurations, or the ``prune`` family's 1 + L*H + 9 curve steps + 1; issue 27): the prefix-shared sweep, the same
sweep through the whole model per configuration, and one plain dev pass (``finetune.predict``, batch 32), on the same
examples, alternately; the ratio is sweep / (configurations x plain pass). The model is the MRPC fine-tune from
``--cache-dir`` when it is there, else the encoder with a fresh seeded head (same compute; the output says which).

    .venv/bin/python scripts/core_vs_floor.py --data-dir ../shared/data [--model embedded] [--device auto] [--rounds 5]
    .venv/bin/python scripts/core_vs_floor.py --data-dir ../shared/data --sweep disable [--limit 128] [--rounds 3]
"""
import argparse
import statistics
from pathlib import Path

import torch

from bertattn_bench.claims.registry import families
from bertattn_bench.engine.attention import forward, layers_heads
from bertattn_bench.engine.batching import iter_batches
from bertattn_bench.engine.model import load_model
from bertattn_bench.engine.opcount import top_operators
from bertattn_bench.engine.passes import timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--corpus", default="ewt_dev")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sweep", choices=("disable", "prune"), default=None, help="time a configuration sweep")
    ap.add_argument("--task", default="mrpc", help="GLUE task of --sweep")
    ap.add_argument("--limit", type=int, default=None, help="the first N sentences (--sweep: dev examples)")
    ap.add_argument("--cache-dir", default=None, help="--sweep: where a fine-tuned checkpoint may be cached")
    ap.add_argument("--profile", action="store_true",
                    help="after the rounds, one core pass and one floor pass under torch.profiler: the operators "
                         "with the most device (or CPU) time, and how many of each")
    args = ap.parse_args()
    loaded = load_model(args.model, device=args.device)
    if args.sweep:
        return sweep_vs_plain(args, loaded)
    dev = torch.device(loaded.info.device)
    prep = families()["dependency"].prepare(loaded, Path(args.data_dir), args.corpus, limit=args.limit,
                                            batch_size=args.batch_size)
    n = len(prep.encoded)
    batches = lambda: iter_batches(prep.encoded, loaded.tokenizer, dev, args.batch_size, with_words=False)  # noqa: E731

    def bare_passes() -> None:
        with torch.inference_mode():
            for batch in batches():
                loaded.model(**batch.model_inputs(loaded.model), output_attentions=True)

    last = layers_heads(loaded.model)[0] - 1

    def stopped_passes() -> None:  # the same forward passes, stopped where the core stops them, maps read by no one
        for _ in forward(loaded.model, batches(), lambda layer, probs: None, until_layer=last):
            pass

    bare = lambda: timed(dev, bare_passes)[1]  # noqa: E731  (the suite's one timer: the device synchronised)
    stopped = lambda: timed(dev, stopped_passes)[1]  # noqa: E731

    prep.run(), bare(), stopped()  # warm-up (a GPU's kernels loaded and tuned before any round counts)
    core, floor, stop = [], [], []
    for _ in range(args.rounds):
        core.append(prep.run().seconds)
        floor.append(bare())
        stop.append(stopped())
    print(f"{loaded.info.name} on {loaded.info.device}, {args.corpus}: n = {n} sentences, batch {args.batch_size}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("core  s:", " ".join(f"{x:.2f}" for x in core))
    print("floor s:", " ".join(f"{x:.2f}" for x in floor))
    print("stop  s:", " ".join(f"{x:.2f}" for x in stop), " (the floor's passes stopped after the last map, as the "
          "core's are: the statistics' own cost is core/stop)")
    for name, pick in (("min", min), ("median", statistics.median)):
        c, f, st = pick(core), pick(floor), pick(stop)
        print(f"{name:>6}: core {n / c:.0f} sent/s, floor {n / f:.0f} sent/s, core/floor time {c / f:.2f}; "
              f"core/stopped floor {c / st:.2f}")
    if args.profile:
        profile(dev, {"core": prep.run, "floor": bare_passes})


def profile(dev: torch.device, runs: dict) -> None:
    """Each run once under torch.profiler: its ten operators with the most self time on the device (the CPU where
    there is no GPU), with their call counts: where a core's time over its floor goes."""
    for name, fn in runs.items():
        print(f"== profile: {name}")
        print(top_operators(dev, fn)[1])


def sweep_vs_plain(args, loaded) -> None:
    import numpy as np

    from bertattn_bench.data import glue
    from bertattn_bench.families import disable as disabling
    from bertattn_bench.families import prune as pruning
    from bertattn_bench.training import glue_finetune as finetune
    from bertattn_bench.training import sweeps

    t = glue.task(args.task)
    dev = finetune.encode_split(loaded.tokenizer, glue.load_split(Path(args.data_dir), args.task, "dev", args.limit),
                                finetune.Recipe().max_tokens)
    model, which = finetune.task_model(loaded, t, 0), "fresh seeded head (no cached fine-tune)"
    if args.cache_dir:
        directory = finetune.checkpoint_dir(Path(args.cache_dir), loaded, args.task, finetune.Recipe(), 0,
                                            Path(args.data_dir))
        if (directory / "model.safetensors").is_file():
            model = finetune.finetuned(loaded, args.task, 0, Path(args.data_dir), Path(args.cache_dir)).model
            which = f"fine-tuned seed 0 ({directory.name})"
    L, H = loaded.info.n_layers, loaded.info.n_heads
    if args.sweep == "disable":
        configs, kind = disabling.configurations(L, H)[0], "uniform"
    else:
        raw, _ = pruning.head_importance(model, t, dev, loaded.tokenizer)
        norm = pruning.normalize_by_layer(raw)
        curve = pruning.pruning_steps(pruning.order_from_scores(norm), pruning.step_counts(L, H))[1:]
        kept = [int(np.argmax(norm[layer])) for layer in range(L)]
        configs = [[]] + [[(layer, h)] for layer in range(L) for h in range(H)] + curve + [
            pruning.one_head_per_layer(kept, H)]
        kind = "mask"
    C, dv, tok = len(configs), loaded.info.device, loaded.tokenizer
    plain = lambda: finetune.predict(model, dev, tok, batch_size=32)  # noqa: E731
    shared = lambda: sweeps.sweep(model, dev, tok, configs, kind)  # noqa: E731
    whole = lambda: sweeps.sweep(model, dev, tok, configs, kind, share_prefix=False)  # noqa: E731
    plain()  # warm-up
    times = {"plain": [], "shared": [], "whole": []}
    for _ in range(args.rounds):
        for name, fn in (("plain", plain), ("shared", shared), ("whole", whole)):
            out, secs = timed(dv, fn)
            times[name].append(secs)
            if name != "plain":
                diff = float(np.abs(out[0] - base).max())
                if diff > 1e-4:
                    raise SystemExit(f"the {name} sweep's configuration 'none' differs from the plain pass by {diff}")
            else:
                base = out
    print(f"{loaded.info.name} on {dv}, {args.task} dev: n = {len(dev.examples)} examples, {args.sweep} sweep of "
          f"C = {C} configurations ({kind}), model: {which}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {args.rounds} interleaved rounds; sweep passes of "
          f"{'{} rows = {} examples x configurations'.format(*sweeps.pass_shape(torch.device(dv), None, None))}")
    lp_s, lp_w = sweeps.sweep_layer_passes(configs, L), sweeps.sweep_layer_passes(configs, L, share_prefix=False)
    print(f"layer passes per example: shared {lp_s}, whole {lp_w} ({lp_s / lp_w:.2f}x)")
    for name in times:
        print(f"{name:>6} s:", " ".join(f"{x:.2f}" for x in times[name]))
    for name, pick in (("min", min), ("median", statistics.median)):
        p, s_, w = pick(times["plain"]), pick(times["shared"]), pick(times["whole"])
        print(f"{name:>6}: plain {p:.2f} s, C x plain {C * p:.1f} s; shared sweep {s_:.1f} s = {s_ / (C * p):.2f}x; "
              f"whole-model sweep {w:.1f} s = {w / (C * p):.2f}x; shared/whole {s_ / w:.2f}")


if __name__ == "__main__":
    main()
