"""Save the architecture matrix's tiny models (seed 0, with the embedded tokenizer) as model folders, one per row
that loads, so that the claim benchmarks can run on them: ``pytest benchmarks --model DIR ...``.

    PYTHONPATH=. python scripts/tiny_models.py OUT_DIR [LABEL_SUBSTRING ...]   # prints one folder per line
"""
import argparse
import sys
import warnings
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("only", nargs="*", help="only rows whose label contains one of these")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    from transformers import AutoTokenizer

    from bertattn_bench.base.errors import ModelLoadError
    from bertattn_bench.engine.model import embedded_model_path, slugify

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the matrix: a support module of the tests
    import architecture_matrix as A

    tok = AutoTokenizer.from_pretrained(str(embedded_model_path()))
    for arch in A.MATRIX:
        if args.only and not any(s.lower() in arch.label.lower() for s in args.only):
            continue
        try:
            loaded = A.build(arch, tok)
        except ModelLoadError as exc:
            print(f"# {arch.label}: refused ({exc})", file=sys.stderr)
            continue
        folder = Path(args.out) / f"tiny-{slugify(arch.label.lower().replace(' ', '-'))}"
        loaded.model.save_pretrained(folder)
        tok.save_pretrained(folder)
        print(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
