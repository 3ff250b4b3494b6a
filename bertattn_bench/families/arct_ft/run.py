"""The arct_ft family's pass (``-k arct_ft``): the recipe per tier, the result, the pass (the ARCT fine-tunes and
their scores) and the prepare (what the cache key follows)."""
from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from ...base.errors import DataError
from ...claims import learned
from ...claims.registry import family
from ...data import arct_corpus as arct
from ...engine.batching import Skipped
from ...engine.passes import NothingToMeasure, PassResult
from ...training import arct_finetune as arct_ft
from ...training import glue_pass
from ..common.arct_runs import run_values
from .constants import AUTHORS, SETTING_NAMES, TIERS, TWIN_SHORT_REASON


def tier_seeds(tier: str, twin: bool = False, seed: int | None = None, n_seeds: int | None = None) -> tuple[int, ...]:
    """The ARCT seeds of ``tier``: the twin's fixed ones; ``n_seeds`` given (the run's ``$BERTATTN_SEEDS``), that
    many consecutive seeds from the run's ``seed``; else a tier that lists its seeds (full: 0-4) keeps them, and any
    other trains its ``n_seeds`` from ``seed`` (its option, ``$BERTATTN_SEED`` as the face read it; 0)."""
    t = TIERS[tier]
    if twin:
        return tuple(t["twin_seeds"])
    first = 0 if seed is None else int(seed)
    if n_seeds is not None:
        return tuple(range(first, first + n_seeds))
    if t["seeds"] is not None:
        return tuple(t["seeds"])
    return tuple(range(first, first + t["n_seeds"]))


def options_of(options: dict | None) -> tuple[str, Path | None, bool]:
    return glue_pass.options_of(options, TIERS)


def recipe_of(tier: str):
    """The tier's fine-tuning recipe: ``arct_ft.RECIPE`` (5 epochs), the regression tier's with ``SHORT_EPOCHS``."""
    epochs = TIERS[tier]["epochs"]
    return arct_ft.RECIPE if epochs is None else dataclasses.replace(arct_ft.RECIPE, epochs=epochs)


def epochs_text(epochs) -> str:
    """How the data column, the detail and the figure name a recipe's length: 1 epoch, 5 epochs."""
    return f"{epochs} epoch{'' if epochs == 1 else 's'}"


@dataclass
class ArctFtResult:
    """Every seed's run of one ARCT setting. ``PER_SEED``: the judge reads a statistic of the runs on each seed's
    view (``claims.checks.one_seed``) and adds their spread, except where the metric's interval already holds the
    seeds (``values["seeds"]``: the degenerate share's Wilson bounds over runs, the max's noise with the seed sd)."""

    PER_SEED: ClassVar[tuple[str, ...]] = ("runs",)

    setting: str
    tier: str
    runs: list  # arct_ft.Run per seed
    n_train: int
    n_dev: int
    n_test: int
    test_labels: np.ndarray
    test_negated: np.ndarray  # bool per test row: the claim-negated copy (adv setting), else all False
    authors: dict  # experiment -> per-seed values of the comparable column (test, or pooled adversarial)
    recipe: dict
    n_truncated: dict = field(default_factory=dict)

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.runs]

    def accs(self, nondegenerate: bool = False) -> np.ndarray:
        return np.array([r.test_acc for r in self.runs if not (nondegenerate and r.degenerate)], dtype=float)

    def half_accs(self, negated: bool) -> np.ndarray:
        rows = self.test_negated == negated
        if not rows.any():
            return np.full(len(self.runs), np.nan)
        return np.array([float((np.asarray(r.test_pred)[rows] == self.test_labels[rows]).mean()) for r in self.runs])

    def degenerate(self) -> list:
        return [r for r in self.runs if r.degenerate]


@dataclass
class ArctFtPass:
    """A pass of the ``arct_ft`` family: one setting, every seed of the tier (a ``passes.Pass``)."""

    family: str
    corpus: str
    data: str
    loaded: object
    setting: str
    seeds: tuple
    tier: str
    limit: int | None
    data_dir: Path
    cache_dir: Path | None
    data_paths: list
    reason: str | None = None
    recipe: object = arct_ft.RECIPE

    @property
    def encoded(self):
        return []

    def nothing_to_measure(self) -> str | None:
        return self.reason

    @functools.cached_property
    def _data(self) -> tuple[dict, dict]:
        """The setting's items and their encodings, read and encoded once per pass (the runs trained before the
        timer and the measurement share them)."""
        setting = arct_ft.SETTINGS[self.setting]
        items = arct_ft.load_setting(self.data_dir, setting, self.limit)
        data = {role: arct_ft.encode_items(self.loaded.tokenizer, rows, setting.mode,
                                           min(arct_ft.MAX_TOKENS[setting.mode], self.loaded.info.max_positions))
                for role, rows in items.items()}
        return items, data

    def artifacts(self, progress: bool = False) -> None:
        """Train (or find in the checkpoint cache) every seed's run before ``run`` is timed; without a cache the
        training runs inside ``run``."""
        if self.reason or self.cache_dir is None:
            return
        _, data = self._data
        for seed in self.seeds:
            arct_ft.finetuned_run(self.loaded, arct_ft.SETTINGS[self.setting], seed, data, self.cache_dir,
                                  self.recipe, progress)

    def run(self, progress: bool = False) -> PassResult:
        info = self.loaded.info
        if self.reason:
            return PassResult(self.family, self.corpus, self.data, info, NothingToMeasure(self.reason), 0, Skipped())
        start = time.perf_counter()
        setting = arct_ft.SETTINGS[self.setting]
        items, data = self._data
        runs = [arct_ft.finetuned_run(self.loaded, setting, seed, data, self.cache_dir, self.recipe, progress)
                for seed in self.seeds]
        shipped = arct.load_shipped_results(self.data_dir)
        column = "adv_pooled" if setting.adversarial else "test"
        authors = {e: run_values(shipped[e], column) for e in AUTHORS[self.setting] if e in shipped}
        authors.update({f"{e}:train": shipped[e].array("train") for e in AUTHORS[self.setting] if e in shipped})
        negated = np.array([bool(it.flag) if setting.adversarial else False for it in items["test"]])
        result = ArctFtResult(self.setting, self.tier, runs, len(items["train"]), len(items["dev"]), len(items["test"]),
                              data["test"].labels.astype(int), negated, authors, self.recipe.key(),
                              {k: v.n_truncated for k, v in data.items()})
        seconds = time.perf_counter() - start
        labels = data["test"].labels.astype(int)
        learning = (learned.best_of(f"{info.name} fine-tuned on ARCT {self.setting} ({len(runs)} run(s))",
                                    [learned.classifier(f"seed {r.seed}", r.test_pred, labels, "test")
                                     for r in runs]),) if runs else ()
        return PassResult(self.family, self.corpus, self.data, info, result, len(items["test"]), Skipped(),
                          seconds, learning=learning)


@family("arct_ft", corpora=SETTING_NAMES, default_corpus="full",
        tier_corpora={k: v["corpora"] for k, v in TIERS.items()}, trains=True)
def prepare_arct_ft(loaded, data_dir: Path, corpus: str = "full", limit: int | None = None, batch_size: int = 32,
                    options: dict | None = None) -> ArctFtPass:
    """Niven & Kao's model on ARCT, one setting (``corpus``): fine-tuned with every seed of the tier."""
    tier, cache_dir, _ = options_of(options)
    limit = TIERS[tier].get("limit") if limit is None else limit
    if corpus not in arct_ft.SETTINGS:
        raise DataError(f"arct_ft corpus {corpus!r}: expected one of {', '.join(SETTING_NAMES)}")
    setting = arct_ft.SETTINGS[corpus]
    twin = loaded.info.random_init_seed is not None
    seeds = tier_seeds(tier, twin, (options or {}).get("seed"), (options or {}).get("n_seeds"))
    reason = TWIN_SHORT_REASON if not seeds else None
    paths = [Path(data_dir) / rel for rel in
             ((arct.ADVERSARIAL_FILES["train_swapped"], arct.ADVERSARIAL_FILES["dev_adv"], arct.ADVERSARIAL_FILES["test_adv"])
              if setting.adversarial else (arct.ORIGINAL_FILES["train"], arct.ORIGINAL_FILES["dev"],
                                           arct.ORIGINAL_FILES["test"]))]
    r = recipe_of(tier)
    short = (f"{epochs_text(r.epochs)}, a smoke run: under-trained, not the paper's setting (--tier full)"
             if TIERS[tier]["epochs"] else f"{epochs_text(r.epochs)}, best dev epoch kept")
    desc = (f"ARCT {setting.name}: input {setting.mode}, train {setting.train} / dev {setting.dev} / test {setting.test}"
            f"{', first %d of each' % limit if limit else ''}; seeds {list(seeds)} ({tier} tier, {short}); lr {r.lr}, "
            f"batch {r.batch_size}; <= {arct_ft.MAX_TOKENS[setting.mode]} pieces")
    return ArctFtPass("arct_ft", corpus, desc, loaded, corpus, seeds, tier, limit, Path(data_dir), cache_dir, paths,
                      reason, r)
