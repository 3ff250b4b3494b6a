"""What a run is asked for (:class:`RunOptions`): plain values that a face fills from its options and the
environment (read once by :mod:`~bertattn_bench.base.settings`), checked before any model or data is touched."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import BenchError
from ..claims import tiers

COMPARE_POLICIES = ("lost", "flips", "never")  # what fails a --compare-to run


def resolve_tier(tier: str | None) -> str:
    """The tier asked for (the option, or ``$BERTATTN_TIER`` as the face read it; else the default), checked."""
    return tiers.check(tier, "--tier") if tier else tiers.DEFAULT


@dataclass
class RunOptions:
    """What a run is asked for: plain values (a face fills them from its options; :func:`api.run` from its
    arguments). Environment variables are read by the callers through :mod:`settings`."""

    models: list[str] = field(default_factory=lambda: ["embedded"])
    data_dir: str | Path | None = None  # read as given, never written; None: data_home, filled with what a run lacks
    data_dir_source: str = "--data-dir"  # what named data_dir, for messages ("BERTATTN_DATA_DIR", "data_dir=")
    data_home: str | Path | None = None  # the default data folder (a face reads $BERTATTN_DATA_HOME; None: built-in)
    device: str | None = None
    corpus_options: list[str] = field(default_factory=list)  # ["family=a,b", ...] as --corpus gives them
    limit: int | None = None
    batch_size: int = 32
    tier: str | None = None
    cache_dir: Path | None = None  # None: no cache
    time_cores: bool = False
    record_baseline: Path | None = None
    compare_to: str | None = None
    compare_fail_on: str = "lost"  # what fails a --compare-to run: lost (clearly held on A, not holding or inconclusive here: verdicts.lost), flips, never
    claims_report: Path | None = None
    check_baseline: bool = True  # False: values reported, never checked against the model's recorded baseline
    command: str = ""
    progress: bool = False
    # settings that change values (each in the run's provenance, "settings"; the faces fill them from their options
    # and the environment, read once by base.settings.from_environment)
    seed: int | None = None  # training seed of the probes and of a fine-tune the tier trains with one seed (None: 0)
    n_seeds: int | None = None  # training seeds (from ``seed`` on) of every seed-dependent family (None: the tier's)
    precision: str | None = None  # fine-tuning precision: auto (None), bf16, fp32, recipe
    prune_exact: bool = False  # recompute head importance before every pruning step (always in the full tier)
    assume_shape: str | None = None  # judge claims naming this paper model's heads on a model of another shape
    allow_download: bool = False  # let transformers download a hub model
    hub_offline: bool = False  # the hub is offline (HF_HUB_OFFLINE): load errors say so
    offline: bool = False  # never download data (else the default data folder is filled with what a run lacks)
    data_hosts: tuple = (None, None)  # (raw-file host, archive host) base URLs; None: the real ones
    data_mirror: str | None = None  # a mirror holding the data folder's layout (data fetch --mirror)
    self_contained: bool = False  # the report's matrix.html embeds its figures (else links them by relative path)
    task_model: str | None = None  # judge a sequence-classification model as given on this task (--task-model)
    eval_data: list = field(default_factory=list)  # TASK=SOURCE texts (--eval-data) or eval_sets.EvalSource objects

    def __post_init__(self):
        self.tier = resolve_tier(self.tier)

    def settings(self) -> dict:
        """The settings that can change a value, as the provenance records them."""
        return {"tier": self.tier, "seed": self.seed, "n_seeds": self.n_seeds, "precision": self.precision or "auto",
                "prune_exact": self.prune_exact, "assume_shape": self.assume_shape, "limit": self.limit,
                "device": self.device, "allow_download": self.allow_download, "hub_offline": self.hub_offline,
                "offline": self.offline, "task_model": self.task_model,
                "eval_data": {k: v.describe() for k, v in self.eval_sources().items()} or None}

    def eval_sources(self) -> dict:
        """task -> its evaluation source (``eval_data``), each parsed and checked once; one per task."""
        from ..data.eval_sets import of

        out: dict = {}
        for item in self.eval_data:
            src = of(item)
            if src.task in out:
                raise BenchError(f"--eval-data: two sources for {src.task}")
            out[src.task] = src
        return out

    def training(self) -> dict:
        """What a family that trains receives (``options=``) beside its tier and checkpoint cache."""
        return {"seed": self.seed, "n_seeds": self.n_seeds, "precision": self.precision, "prune_exact": self.prune_exact,
                "eval_data": self.eval_sources()}

    def check(self) -> None:
        """Every option that can be judged without a model or data: a BenchError naming the option."""
        from ..base.settings import output_dir, parse_random_model, positive_int
        from ..engine.model import RANDOM_PREFIX, choose_device
        from ..training.precision import PRECISIONS

        positive_int("--batch-size", self.batch_size)
        if self.precision is not None and self.precision not in PRECISIONS:
            raise BenchError(f"precision {self.precision!r}: expected one of {', '.join(PRECISIONS)}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise BenchError(f"seed {self.seed!r}: a training seed is a whole number >= 0")
        if self.n_seeds is not None and (isinstance(self.n_seeds, bool) or not isinstance(self.n_seeds, int)
                                         or self.n_seeds < 1):
            raise BenchError(f"seeds {self.n_seeds!r}: how many training seeds, a whole number >= 1")
        positive_int("--limit", self.limit)
        if self.task_model is not None:
            from ..training.given import resolve_task

            resolve_task(self.task_model, None)  # a name that is no task: said now
        self.eval_sources()  # a malformed --eval-data, a missing file: said now
        choose_device(self.device)
        for name in self.models:
            if isinstance(name, str):
                parse_random_model(name, RANDOM_PREFIX)
        self.chosen_corpora()
        output_dir("--claims-report", None if self.claims_report is None else str(self.claims_report))
        output_dir("--record-baseline", None if self.record_baseline is None else str(self.record_baseline))
        if self.record_baseline is not None:  # a target that cannot be merged into: found now, before any pass
            from ..claims.baselines import check_record_target
            from ..engine.model import baseline_slugs

            check_record_target(Path(self.record_baseline), baseline_slugs(self.models))
        if self.compare_fail_on not in COMPARE_POLICIES:
            raise BenchError(f"--compare-fail-on {self.compare_fail_on}: expected one of {', '.join(COMPARE_POLICIES)}")
        if self.compare_to is not None:
            from ..claims.baselines import load_baseline_file

            load_baseline_file(compare_to_path(self.compare_to))
        from .cache import check_cache_dir

        check_cache_dir(self.cache_dir)  # a folder that cannot be used at all: named now (read-only: used read-only)

    def chosen_corpora(self) -> dict[str, list[str]]:
        from ..base.settings import parse_corpus_options
        from ..claims.registry import families

        return parse_corpus_options(self.corpus_options, {f.name: tuple(f.corpora) for f in families().values()})

    def corpora(self, family: str) -> list[str]:
        from ..claims.registry import families

        fam = families()[family]
        chosen = self.chosen_corpora().get(family)
        if chosen:
            return chosen
        if self.task_model is not None and fam.trains and fam.tier_corpora:  # a classifier judged on its own task
            from ..data.glue import task_of

            task = task_of(self.task_model)
            if task is not None and task.name in fam.corpora:
                return [task.name]
        return fam.default_corpora(self.tier)

    def family_limit(self, family: str) -> tuple[int | None, str | None]:
        """(example limit, tier that set it) of a family's pass: --limit, else the quick tier's cap, else none."""
        from ..claims.registry import families

        return families()[family].tier_limit(self.tier, self.limit)


def compare_to_path(name: str) -> Path:
    """The baseline file --compare-to names (a JSON path, a model slug or name); a BenchError when there is none."""
    from ..claims.baselines import baseline_path

    candidates = [Path(name), baseline_path(name), baseline_path(Path(name).name)]
    if name in ("embedded", ""):
        from ..engine.model import EMBEDDED_NAME

        candidates.insert(0, baseline_path(EMBEDDED_NAME))
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        known = ", ".join(sorted(p.stem for p in baseline_path("x").parent.glob("*.json"))) or "none"
        raise BenchError(f"--compare-to {name}: no recorded baseline by that name or path (recorded: {known}; "
                         f"record one with --record-baseline)")
    return path
