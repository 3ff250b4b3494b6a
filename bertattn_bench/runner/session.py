"""The run, as a library: models and selections resolved, passes prepared, made and cached, claims evaluated,
baselines compared and recorded, the report written from the results. No face here.

Three faces call it and re-implement no step: the pytest plugin (``pytest_plugin`` / ``pytest_bench``: one test per
claim, pytest-benchmark's timings), the Python API (:func:`bertattn_bench.faces.api.run`: a model object in, results as
data out) and the command line (``bertattn-bench``). ``scripts/architectures.py`` runs its tiny models through
:func:`evaluate_family`.

Everything here raises :class:`BenchError` with a message naming what to fix; a face decides how to show it (a
pytest usage error, a failed test, a non-zero exit status).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..base.errors import BenchError
from ..claims import tiers

EVERY_FAMILY = "*"
COMPARE_POLICIES = ("lost", "flips", "never")  # a benchmark module's FAMILY that stands for every registered family


@dataclass(frozen=True)
class Target:
    """One pass: a model, a corpus, a family."""

    model: str
    corpus: str
    family: str

    @property
    def id(self) -> str:
        return f"{model_id(self.model)}-{self.corpus}"


def model_id(name: str) -> str:
    """A model as a word of test ids: ``minilm`` for the embedded model, a folder's name, a hub name's last part;
    a random-init twin is ``random<seed>`` (``random0``), a word that holds no other model's id, so ``-k minilm``
    selects the model and not its twin, and ``-k random`` the twins."""
    from ..engine.model import EMBEDDED, RANDOM_PREFIX

    if name in (EMBEDDED, "", None):
        return "minilm"
    if name.startswith(RANDOM_PREFIX):
        seed = name[len(RANDOM_PREFIX):].partition("@")[2].strip() or "0"
        return f"random{seed}"
    return Path(name).name or name


def paper_key(paper: str | None) -> str:
    """A claim's paper as a word for test ids and selections: "Kovaleva et al. 2019" -> "kovaleva"."""
    return (paper or "other").split()[0].lower()


def plan_id(paper: str | None, family: str, target: Target | None = None, claim_id: str | None = None) -> str:
    """The one id of a test (every face selects by it: pytest's ``-k``, the API's ``select``, ``list -k``):
    ``paper-family-model-corpus`` for a pass, ``...-claim`` for a claim, ``paper-family-claim`` without a target."""
    return "-".join([paper_key(paper), family] + ([target.id] if target else []) + ([claim_id] if claim_id else []))


def random_twin_name(model: str) -> str:
    """The random-init twin a model's negative control runs on (a twin is its own twin)."""
    from ..engine.model import RANDOM_PREFIX

    return model if model.startswith(RANDOM_PREFIX) else f"{RANDOM_PREFIX}{model}"


def selection(select) -> Callable[[str], bool]:
    """A predicate over test ids from a ``-k`` expression (None or "": everything; a callable: itself)."""
    if select is None or select == "":
        return lambda _id: True
    if callable(select):
        return select
    from _pytest.mark.expression import Expression

    try:
        expr = Expression.compile(select)
    except Exception as exc:  # pytest's ParseError: say which argument
        raise BenchError(f"select={select!r}: not a -k expression ({exc})") from None

    def matches(id_: str) -> bool:
        low = id_.lower()
        return expr.evaluate(lambda word, **_: word.lower() in low)

    return matches


@dataclass(frozen=True)
class PlanRow:
    """One pass of a run's plan and the claims judged on it, in the order of tests and tables."""

    target: Target
    claims: tuple
    test_id: str  # the pass's test id (test_attention_core's; the negative control's test)
    negative_control: bool = False

    def claim_test_id(self, claim) -> str:
        return plan_id(claim.paper, self.target.family, self.target, claim.id)


@dataclass
class Finish:
    """What a run leaves: the lines to print, the report files, the job summary, the baselines."""

    lines: list[str] = field(default_factory=list)
    reports: list[Path] = field(default_factory=list)
    summary: Path | None = None
    baselines: list[Path] = field(default_factory=list)


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
    compare_fail_on: str = "lost"  # what fails a --compare-to run: lost (held on A, not here), flips, never
    claims_report: Path | None = None
    check_baseline: bool = True  # False: values reported, never checked against the model's recorded baseline
    command: str = ""
    progress: bool = False
    # settings that change values (each in the run's provenance, "settings"; the faces fill them from their options
    # and the environment, read once by base.settings.from_environment)
    seed: int | None = None  # training seed of the probes and of a fine-tune the tier trains with one seed (None: 0)
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
        return {"tier": self.tier, "seed": self.seed, "precision": self.precision or "auto",
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
        return {"seed": self.seed, "precision": self.precision, "prune_exact": self.prune_exact,
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


def family_order() -> list[str]:
    """Every registered family, ordered by paper (the first claim's) and name: the order of tests and tables."""
    from ..claims.catalog import load_claims
    from ..claims.registry import families

    catalog = load_claims()

    def order(name: str):
        claims = [c for c in catalog if c.family == name]
        return (paper_key(claims[0].paper) if claims else "~", name)

    return sorted(families(), key=order)


class Runner:
    """Everything computed in one run, shared by every claim: models, passes, outcomes.

    ``loaded``: models the caller already holds (``{name: LoadedModel}``), used instead of loading ``name``.
    ``on_pass`` / ``on_outcome``: where a pass summary and an outcome go (default: this runner's ``passes`` and
    ``outcomes``; the pytest face sends them through the test reports, so pytest-xdist workers reach the table).
    ``make``: how a prepared pass is computed (default: its artifacts, then its run; the pytest face times the run).
    """

    def __init__(self, options: RunOptions, loaded: dict | None = None):
        from .cache import PassCache

        self.options = options
        self.models: dict[str, object] = dict(loaded or {})
        self.results: dict[Target, object] = {}
        self.outcomes: list = []
        self.passes: list[dict] = []
        self._data_dir = None
        self._compare = None
        self.cache = PassCache(options.cache_dir)
        self.notes: list[str] = []  # one line each, printed at the finish (e.g. a classifier measured as an encoder)

    # ---- hooks a face may replace --------------------------------------------------------------------------------
    def on_pass(self, summary: dict) -> None:
        self.passes.append(summary)

    def on_outcome(self, outcome) -> None:
        self.outcomes.append(outcome)

    def make(self, prepared, run: Callable | None = None):
        """A pass computed: its artifacts made (fine-tunes; not part of the run's time), then the run."""
        return make_pass(prepared, self.options.progress, run)

    # ---- inputs ----------------------------------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            from ..base.settings import builtin_data_home, check_data_dir

            o = self.options
            self._data_dir = check_data_dir(str(o.data_dir), o.data_dir_source) if o.data_dir not in (None, "") \
                else Path(o.data_home or builtin_data_home()).expanduser().resolve()
        return self._data_dir

    def ensure_data(self, targets) -> None:
        """The corpora the run's (family, corpus) pairs read, present before any pass: the default data folder is
        filled with what it lacks (licences said, one progress bar) unless the run is offline; a folder named with
        --data-dir / $BERTATTN_DATA_DIR is read as given, never written. A DataError of one line otherwise."""
        from ..data.fetch import Options, ensure_data
        from ..data.manifest import Hosts

        named = self.options.data_dir not in (None, "")
        opts = Options(mirror=self.options.data_mirror, hosts=Hosts.of(*self.options.data_hosts),
                       progress=None if self.options.progress else False,
                       home=None if named else self.data_dir)
        ensure_data(self.data_dir, list(dict.fromkeys(targets)), opts, may_fetch=not named and not self.options.offline)

    def model(self, name: str):
        """Load once per run; a load error is kept (and raised again, naming the model) without retrying."""
        from ..base.errors import ModelLoadError
        from ..engine.model import RANDOM_PREFIX, LoadedModel, load_model, random_twin

        base = name[len(RANDOM_PREFIX):] if name.startswith(RANDOM_PREFIX) else None
        if name not in self.models and isinstance(self.models.get(base), LoadedModel):
            self.models[name] = random_twin(self.models[base])  # the twin of a model object the caller handed in
        if name not in self.models:
            try:
                hub = {"allow_download": True} if self.options.allow_download else {}  # default: local files only
                task = None if base is not None else self._task_of(name, hub)
                self.models[name] = load_model(name, device=self.options.device, task=task, **hub)
            except BenchError as exc:
                self.models[name] = exc
        loaded = self.models[name]
        if isinstance(loaded, BenchError):
            raise ModelLoadError(str(loaded) if str(loaded).startswith("--model") else f"--model {name}: {loaded}")
        return loaded

    def _task_of(self, name: str, hub: dict) -> str | None:
        """The task a model is judged as a classifier for (the run's ``task_model``, else its config's own
        ``finetuning_task``); a classifier with neither is measured through its encoder, said in one note."""
        from ..engine.model import load_config
        from ..training.given import resolve_task

        task, note = resolve_task(self.options.task_model, load_config(name, **hub))
        if note and note not in self.notes:
            self.notes.append(f"note: {note}")
        return task

    def prepare(self, target: Target):
        from ..claims.registry import families

        loaded = self.model(target.model)
        fam = families()[target.family]
        kwargs = {}
        if fam.trains:  # families that train: tier, checkpoint cache (none from a read-only cache: trained in memory)
            kwargs["options"] = {"tier": self.options.tier,
                                 "cache_dir": None if self.cache.read_only else self.cache.directory,
                                 "progress": self.options.progress, **self.options.training()}
        try:
            return fam.prepare(loaded, self.data_dir, target.corpus, limit=self.options.family_limit(target.family)[0],
                               batch_size=self.options.batch_size, **kwargs)
        except BenchError as exc:  # the same kind of error (a DataError stays one), naming the pass
            raise type(exc)(f"{target.family} / {target.corpus}: {exc}") from exc

    # ---- passes ----------------------------------------------------------------------------------------------
    def cached(self, target: Target, compute, prepared, force: bool = False):
        """The pass from the disk cache, else ``compute()`` (and cached); its summary published."""
        from ..claims.baselines import describe_data

        info = prepared.loaded.info
        limit, tier = self.options.family_limit(target.family)
        key = self.cache.key(target.family, target.corpus, info, prepared, {"limit": limit, "data": prepared.data})
        path = self.cache.path(info.slug, target.family, target.corpus, key) if self.cache.directory else None
        result, hit = self.cache.get_or_compute(path, compute, force=force)
        result.tier = tier  # a capped quick-tier sample: in the corpus label, so it is never judged as the whole corpus
        self.results[target] = result
        data_files = describe_data(list(getattr(prepared, "data_paths", [])), self.data_dir, self.cache.digests)
        origin = getattr(getattr(prepared, "dev", None), "origin_text", "")  # a task's dev set from --eval-data
        data_files += f"; dev{origin}" if origin else ""
        self.on_pass(pass_summary(result, cached=hit, path=path, data_files=data_files, limit=self.options.limit))
        return result

    def result(self, target: Target):
        """The pass for ``target``: from memory, else from the disk cache, else computed (and cached)."""
        if target not in self.results:
            prepared = self.prepare(target)
            self.cached(target, lambda: self.make(prepared), prepared)
        return self.results[target]

    def pass_results(self) -> list:
        """The pass results of this run: in memory, or (computed by other processes, e.g. pytest-xdist workers)
        loaded from the cache files they wrote; an entry that is not readable is left out with a warning."""
        from .cache import CacheEntryError, CacheWarning, load_result

        out = {(r.model.slug, r.family, r.corpus): r for r in self.results.values()}
        for p in self.passes:
            key = (p["slug"], p["family"], p["corpus"])
            if key not in out and p.get("cache_path") and Path(p["cache_path"]).is_file():
                try:
                    out[key] = load_result(Path(p["cache_path"]))
                except CacheEntryError as exc:
                    warnings.warn(f"{exc}: its figures are left out", CacheWarning)
        return list(out.values())

    # ---- claims ----------------------------------------------------------------------------------------------
    def compare_baseline(self) -> dict:
        """The other model's baseline named by --compare-to (a JSON path, a model slug or name)."""
        if self._compare is None:
            from ..claims.baselines import load_baseline_file

            self._compare = load_baseline_file(compare_to_path(self.options.compare_to))
        return self._compare

    def other_passes(self, claim, target: Target, negative_control: bool = False) -> list:
        """The further passes a claim names (``inputs``), resolved against this run; NotApplicable says why not."""
        from ..claims.registry import NotApplicable

        out = []
        for spec in claim.inputs:
            fam = spec.get("family", target.family)
            corpus = spec.get("corpus", target.corpus)
            if spec.get("model") == "other":
                models = [m for m in self.options.models if m != target.model and not negative_control]
                if not models:
                    raise NotApplicable("compares two models: run with a second --model")
            else:
                models = [spec.get("model", target.model)]
            if corpus not in self.options.corpora(fam):
                raise NotApplicable(f"needs the {fam} pass on {corpus}, which this run does not include "
                                    f"(add --corpus {fam}=...,{corpus} or --tier full)")
            for m in models:
                out.append(self.result(Target(m, corpus, fam)))
        return out

    def outcome(self, claim, target: Target, negative_control: bool = False):
        """One claim judged on ``target``'s pass: against the paper, and against the recorded baseline (this
        model's, or --compare-to's); a negative control passes when a learned claim does not hold."""
        from ..claims.baselines import load_baseline
        from ..claims.catalog import evaluate
        from ..claims.verdicts import HOLDS, verdict_of

        pr = self.result(target)
        others = lambda c: self.other_passes(c, target, negative_control)  # noqa: E731
        recording = self.options.record_baseline is not None
        comparing = self.options.compare_to is not None and not negative_control
        if comparing:
            out = evaluate(claim, pr, self.compare_baseline(), mode="compare", others=others, limit=self.options.limit,
                           compare_fail_on=self.options.compare_fail_on, assume_shape=self.options.assume_shape)
        else:
            own = not (recording or negative_control or not self.options.check_baseline)
            out = evaluate(claim, pr, load_baseline(pr.model.slug) if own else None, others=others,
                           limit=self.options.limit, assume_shape=self.options.assume_shape)
        out.negative_control = negative_control
        if negative_control and out.skipped is None:
            # the twin's check: "this learned-structure claim does not hold here"; it fails only where the claim
            # clearly holds (an inconclusive or not-judged row passes, as it prints; the benchmark fails on this flag)
            out.passed = verdict_of(out) != HOLDS
            out.comparison = f"NOT {out.comparison} (negative control)"
        elif recording and out.skipped is None and not comparing:
            out.passed = True  # recording: the value becomes the baseline; the verdict is still reported
        self.on_outcome(out)
        return out

    # ---- the plan ----------------------------------------------------------------------------------------------
    def plan(self, select=None, families: list[str] | None = None, negative_control: bool = True) -> list[PlanRow]:
        """The run's passes in order (by family: each model and corpus, then the first model's random-init twin on
        the family's first corpus for its learned claims), each with the claims ``select`` (a ``-k`` expression over
        :func:`plan_id`, or a predicate) keeps; a row with no claim left is dropped. ``families``: these (default:
        every registered family)."""
        from ..claims.catalog import load_claims

        matches = selection(select)
        catalog = load_claims()
        rows = []
        for family in families if families is not None else family_order():
            claims = [c for c in catalog if c.family == family]
            if not claims:
                continue
            for m in self.options.models:
                for corpus in self.options.corpora(family):
                    t = Target(m, corpus, family)
                    row = PlanRow(t, (), plan_id(claims[0].paper, family, t))
                    chosen = tuple(c for c in claims if matches(row.claim_test_id(c)))
                    if chosen:
                        rows.append(PlanRow(t, chosen, row.test_id))
            learned = [c for c in claims if c.learned]
            if negative_control and learned and self.options.models:
                t = Target(random_twin_name(self.options.models[0]), self.options.corpora(family)[0], family)
                row = PlanRow(t, (), plan_id(claims[0].paper, family, t), negative_control=True)
                chosen = tuple(c for c in learned if matches(row.claim_test_id(c)))
                if chosen:
                    rows.append(PlanRow(t, chosen, row.test_id, negative_control=True))
        return rows

    def judge(self, row: PlanRow) -> list:
        """Every claim of a plan row judged on its pass (computed or read from the cache first)."""
        self.result(row.target)
        return [self.outcome(c, row.target, negative_control=row.negative_control) for c in row.claims]

    # ---- outputs ---------------------------------------------------------------------------------------------
    def finish(self, missing: list[str] | None = None, width: int = 120, summary_file: str | Path | None = None,
               write: bool = True) -> Finish:
        """The end of a run, from its outcomes and passes: the lines to print (the claims table, version notes, one
        line per pass, the files written), and, when ``write``, the claims report (--claims-report), the job summary
        (appended to ``summary_file``: $GITHUB_STEP_SUMMARY, given by the face) and the baselines (--record-baseline).
        ``missing``: the selected claims that did not run (the report is marked incomplete and names them)."""
        from ..report.claims_report import terminal_table, version_notes
        from ..report.summary import job_summary, write_job_summary

        out = Finish(lines=[terminal_table(self.outcomes, width=width), *version_notes(self.outcomes), *self.notes])
        passes = pass_lines(self.passes)
        out.lines += [""] + passes if passes else []
        if missing:
            out.lines.append(f"INCOMPLETE: {len(missing)} selected test(s) did not run (claims, negative controls, "
                             f"timing rows; interrupted): the report says so and names them")
        if not write:
            return out
        if self.options.claims_report:
            out.reports = self.write_report(self.options.claims_report, missing=missing or None,
                                            self_contained=self.options.self_contained)
            out.lines.append("claims report: " + ", ".join(str(p) for p in out.reports))
        out.summary = write_job_summary(job_summary(self.outcomes, missing=missing or None), summary_file) \
            if summary_file else None
        if out.summary:
            out.lines.append(f"job summary: appended to {out.summary}")
        if self.options.record_baseline:
            out.baselines = self.record_baselines(self.options.record_baseline)
            out.lines += [f"recorded baseline: {p}" for p in out.baselines]
        return out

    def provenance(self) -> dict:
        from ..report.claims_report import run_provenance

        return run_provenance(self.passes, limit=self.options.limit, tier=self.options.tier,
                              command=self.options.command, settings=self.options.settings())

    def write_report(self, directory: Path | str, missing: list[str] | None = None,
                     self_contained: bool = False) -> list[Path]:
        """claims.md/.csv/.json, run.json, the matrix and each family's figures, from this run's results;
        ``missing``: what was selected and not run (the report is marked incomplete and names them)."""
        return write_report_files(self.outcomes, self.pass_results(), Path(directory), self.provenance(), missing,
                                  self_contained)

    def record_baselines(self, directory: Path | str, date: str | None = None) -> list[Path]:
        from ..claims.baselines import record_baselines

        return record_baselines(self.outcomes, self.passes, Path(directory), command=self.options.command,
                                limit=self.options.limit, date=date, settings=self.options.settings())


def make_pass(prepared, progress: bool, run: Callable | None = None):
    """The one way a prepared pass is computed: its artifacts (fine-tunes: never timed), then ``run(measure)`` (a
    timer around the measurement, or nothing: the measurement itself)."""
    prepared.artifacts(progress=progress)
    measure = lambda: prepared.run(progress=progress)  # noqa: E731
    return measure() if run is None else run(measure)


def pass_summary(r, cached: bool, path: Path | None = None, data_files: str = "", limit: int | None = None) -> dict:
    """What a pass reports beside its claims (the table's footer, run.json's data, the baseline's provenance)."""
    return {"family": r.family, "corpus": r.corpus, "data": r.data, "model": r.model.name, "slug": r.model.slug,
            "source": r.model.source, "device": r.model.device, "attn_implementation": r.model.attn_implementation,
            "n_examples": r.n_examples, "seconds": r.seconds, "skipped": r.skipped.describe(), "cached": cached,
            "limit": limit, "cache_path": str(path) if path else None, "data_files": data_files,
            "learning": [c.record() for c in getattr(r, "learning", ()) or ()],
            **({"as_given": {k: r.model.extra[k] for k in ("as_given", "classifier_sha256", "classifier_class")}}
               if (getattr(r.model, "extra", None) or {}).get("as_given") else {})}


def write_report_files(outcomes: list, results: list, directory: Path, provenance: dict,
                       missing: list[str] | None = None, self_contained: bool = False) -> list[Path]:
    """The claims report of ``outcomes`` with the figures of each family's pass ``results`` (``self_contained``:
    embedded in ``matrix.html``)."""
    from ..claims.registry import FIGURES
    from ..report.claims_report import write_report

    by_family: dict[str, list] = {}
    for r in results:
        by_family.setdefault(r.family, []).append(r)
    figures = []
    for fam, rs in sorted(by_family.items()):
        if fam in FIGURES:
            figures += FIGURES[fam](rs, directory / "figures")
    return write_report(outcomes, directory, figures, provenance, missing=missing,
                        self_contained=self_contained) + figures


def pass_lines(passes: list[dict]) -> list[str]:
    """One line per pass of the run: computed (examples per second) or loaded from the cache."""
    lines, seen = [], set()
    for p in passes:
        key = (p["slug"], p["family"], p["corpus"], p["cached"])
        if key in seen or not p["n_examples"]:
            continue
        seen.add(key)
        rate = p["n_examples"] / p["seconds"] if p["seconds"] else float("nan")
        what = "loaded from cache (computed earlier: " if p["cached"] else "attention core: "
        lines.append(f"{what}{p['model']} / {p['family']}:{p['corpus']}: {p['n_examples']} examples in "
                     f"{p['seconds']:.2f}s = {rate:.1f}/s on {p['device']}{')' if p['cached'] else ''}"
                     + (f"; {p['skipped']}" if p["skipped"] else ""))
    from ..report.claims_report import trained_models

    return lines + [f"learned-model guard: {t['subject']}: {'learned' if t['learned'] else 'DID NOT LEARN'}: "
                    f"{t['test']}" for t in trained_models(passes)]

