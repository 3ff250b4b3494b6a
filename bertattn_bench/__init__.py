"""bertattn-bench: the claims of the BERT attention-analysis papers as runnable, parametrized checks.

``bertattn_bench.run(model, select=..., data_dir=...)`` runs claims from Python (:mod:`bertattn_bench.faces.api`); the
names below are imported on first use, so ``import bertattn_bench`` stays light (no torch until a run).
"""

__version__ = "0.1.0"
__all__ = ["run", "Results", "ClaimsCallback", "claims_along_training", "BenchError", "ModelLoadError",
           "NothingSelected"]


_LAZY = {"run": "faces.api", "Results": "faces.api", "ClaimsCallback": "faces.along_training",
         "claims_along_training": "faces.along_training", "BenchError": "base.errors",
         "ModelLoadError": "base.errors", "NothingSelected": "base.errors"}


def __getattr__(name):
    # imported by name at first use (importlib, not an import statement: the pass cache keys a family by the modules
    # its code imports, and the package's faces are none of them)
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'bertattn_bench' has no attribute {name!r}")
