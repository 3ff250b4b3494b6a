"""Niven & Kao (the model-free arct family): the pass (data only, no model) and its prepare."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ...claims.registry import NotApplicable, family
from ...engine.batching import Skipped
from .adversarial import AdversarialCheck, check_adversarial
from .cues import CueTable, cue_table
from .tokens import TOKENIZATIONS

# ---- the pass ---------------------------------------------------------------------------------------------------

ORIGINAL_SPLITS = ("train", "dev", "test", "all", "train_swap")
ADVERSARIAL_SPLITS = ("train_swapped", "train_adv", "dev_adv", "test_adv")


@dataclass
class ArctResult:
    tables: dict[tuple[str, str], CueTable]  # (split, tokenisation) -> cue table
    split_sizes: dict[str, int]
    adversarial: dict[str, AdversarialCheck]
    claim_map: list  # ClaimMapEntry
    runs: dict  # experiment -> SeedRuns
    ngrams: tuple[int, ...] = (1, 2)

    def table(self, split: str, variant: str) -> CueTable:
        if (split, variant) not in self.tables:
            raise NotApplicable(f"no cue table for split {split!r} and tokenisation {variant!r} (splits: "
                                f"{', '.join(sorted({s for s, _ in self.tables}))}; tokenisations: "
                                f"{', '.join(TOKENIZATIONS)})")
        return self.tables[split, variant]

    def run(self, experiment: str):
        if experiment not in self.runs:
            raise NotApplicable(f"no shipped results for experiment {experiment!r} (have {', '.join(sorted(self.runs))})")
        return self.runs[experiment]


def compute_arct(data_dir: Path) -> tuple[ArctResult, int]:
    from ...base.settings import data_file
    from ...data.arct_corpus import CLAIM_MAP, load_adversarial, load_original, load_shipped_results, read_claim_map

    original = load_original(data_dir)
    original["all"] = original["train"] + original["dev"] + original["test"]
    adversarial = load_adversarial(data_dir)
    cmap = read_claim_map(data_file(data_dir, CLAIM_MAP))
    splits = {**{s: original[s] for s in ORIGINAL_SPLITS}, **adversarial}
    tables = {(s, v): cue_table(items, tok) for s, items in splits.items() for v, tok in TOKENIZATIONS.items()}
    mapping = {e.original: e.negated for e in cmap}
    checks = {s: check_adversarial(s, adversarial[s], original[s.removesuffix("_adv")], mapping)
              for s in ("train_adv", "dev_adv", "test_adv")}
    result = ArctResult(tables, {s: len(v) for s, v in splits.items()}, checks, cmap, load_shipped_results(data_dir))
    n_rows = sum(len(original[s]) for s in ("train", "dev", "test", "train_swap")) + sum(map(len, adversarial.values()))
    return result, n_rows


@dataclass
class ArctPass:
    """Prepared pass (a ``passes.Pass``); reads the ARCT files only, never runs the model."""

    family: str
    corpus: str
    data: str
    loaded: object
    data_dir: Path
    data_paths: list = field(default_factory=list)
    skipped: Skipped = field(default_factory=Skipped)
    encoded: list = field(default_factory=list)

    def nothing_to_measure(self) -> str | None:
        return None

    def artifacts(self, progress: bool = False) -> None:
        """Nothing to make: the pass reads the ARCT files only."""

    def run(self, progress: bool = False):
        from ...engine.passes import PassResult

        start = time.perf_counter()
        result, n_rows = compute_arct(self.data_dir)
        return PassResult(self.family, self.corpus, self.data, self.loaded.info, result, n_rows, self.skipped,
                          time.perf_counter() - start)


@family("arct", corpora=("all",), default_corpus="all")
def prepare_arct(loaded, data_dir: Path, corpus: str = "all", limit: int | None = None,
                 batch_size: int = 32) -> ArctPass:
    """Niven & Kao 2019, model-free: every ARCT file (original, adversarial, claim_map, the authors' accs.csv).
    ``limit`` is ignored (the whole files take about a second) and the model is not used."""
    from ...data.arct_corpus import data_paths

    data = ("arct_original (train/dev/test, train-w-swap) + arct_adversarial (train-swapped, train/dev/test-adv-negated, "
            "claim_map, results_from_paper/*/accs.csv); model-free: the model under test is not used")
    return ArctPass("arct", corpus, data, loaded, Path(data_dir), data_paths(Path(data_dir)))
