"""Run the architecture matrix (bertattn_bench.architectures) and print the README's Markdown table.

    PYTHONPATH=. python scripts/architectures.py [--no-families] [LABEL_SUBSTRING ...]
"""
import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("only", nargs="*", help="run only architectures whose label contains one of these")
    ap.add_argument("--no-families", action="store_true", help="load, reading and interventions only")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    import torch
    from transformers import AutoTokenizer

    from bertattn_bench import architectures as A
    from bertattn_bench.model import embedded_model_path

    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(str(embedded_model_path()))
    archs = [a for a in A.MATRIX if not args.only or any(s.lower() in a.label.lower() for s in args.only)]
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        data = None if args.no_families else A.toy_data_dir(Path(tmp))
        probes = []
        for arch in archs:
            t = time.time()
            probes.append(A.probe(arch, tok, data))
            print(f"# {arch.label}: {time.time() - t:.1f}s", file=sys.stderr)
    print(A.markdown(probes), end="")
    print(f"# {len(probes)} architectures in {time.time() - start:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
