"""Interleaved timing of the own-code (fallback) reading path against its floor, the eager model's own
``output_attentions`` (issue 25; docs/encoders.md "Cost").

For each model type and size, a randomly initialised model is built twice from one config: through the project's
loader (own-code path: a forward hook on each layer's probability module feeds an observer that reduces every map
to its per-head sum) and as transformers' ``attn_implementation="eager"`` twin called with ``output_attentions=True``
(the same maps, kept). Both run the same batch alternately, ``--rounds`` times; the minimum and median seconds per
pass and the ratio of medians are printed as a Markdown table.

    PYTHONPATH=. python scripts/fallback_cost.py [--rounds 7] [--batch-size 32] [--tokens 128] [--types megatron-bert mpnet deberta-v2]
"""
import argparse
import statistics
import time
import warnings

SIZES = {"tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64),
         "MiniLM": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--types", nargs="*", default=["megatron-bert", "mpnet", "deberta-v2"])
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from bertattn_bench.engine import attention
    from bertattn_bench.engine.batching import model_inputs
    from bertattn_bench.engine.model import embedded_model_path, model_from_config

    tok = AutoTokenizer.from_pretrained(str(embedded_model_path()))
    print("| model type | size | path | fallback path s/pass (min, median) | eager output_attentions s/pass "
          "(min, median) | ratio of medians |\n|---|---|---|---|---|---|")
    for model_type in args.types:
        for size, shape in SIZES.items():
            cfg = AutoConfig.for_model(model_type, vocab_size=tok.vocab_size, max_position_embeddings=512, **shape)
            loaded = model_from_config(cfg, tok, f"cost-{model_type}", f"cost-{model_type}", seed=0, device="cpu")
            twin = AutoModel.from_config(cfg, attn_implementation="eager").eval()
            twin.load_state_dict(loaded.model.state_dict())
            gen = torch.Generator().manual_seed(0)
            ids = torch.randint(1000, tok.vocab_size, (args.batch_size, args.tokens), generator=gen)
            mask = torch.ones_like(ids)
            mask[args.batch_size // 2:, args.tokens * 3 // 4:] = 0  # half the rows padded
            x = model_inputs(loaded.model, ids, mask)
            sums = {}

            def observe(layer, probs):
                sums[layer] = probs.sum((0, 2, 3))

            def ours():
                with torch.inference_mode(), attention.attention_run(loaded.model, observe=observe):
                    loaded.model(**x)

            def floor():
                with torch.inference_mode():
                    out = twin(**x, output_attentions=True)
                    for layer, a in enumerate(out.attentions):
                        sums[layer] = a.sum((0, 2, 3))

            times = {"ours": [], "floor": []}
            for fn in (ours, floor):  # warm-up
                fn()
            for _ in range(args.rounds):
                for name, fn in (("ours", ours), ("floor", floor)):
                    start = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - start)
            o, f = statistics.median(times["ours"]), statistics.median(times["floor"])
            print(f"| {model_type} | {size} ({shape['num_hidden_layers']}x{shape['num_attention_heads']}, "
                  f"{args.batch_size}x{args.tokens} tokens) | {attention.site(loaded.model).path} "
                  f"| {min(times['ours']):.4f}, {o:.4f} | {min(times['floor']):.4f}, {f:.4f} | {o / f:.2f} |",
                  flush=True)
    print(f"\n{args.rounds} interleaved rounds after one warm-up; torch threads: {torch.get_num_threads()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
