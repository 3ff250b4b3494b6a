"""The run, as a library: models and selections resolved, passes prepared, made and cached, claims evaluated,
baselines compared and recorded, the report written from the results. No face here.

Three faces call it and re-implement no step: the pytest plugin (``pytest_plugin`` / ``pytest_bench``: one test per
claim, pytest-benchmark's timings), the Python API (:func:`bertattn_bench.faces.api.run`: a model object in, results as
data out) and the command line (``bertattn-bench``). ``scripts/architectures.py`` runs its tiny models through
:func:`evaluate_family`.

What a run is asked for is :mod:`.options`; how its passes and tests are named, :mod:`.plan`.

Everything here raises :class:`BenchError` with a message naming what to fix; a face decides how to show it (a
pytest usage error, a failed test, a non-zero exit status).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..base.errors import BenchError
from .options import RunOptions, compare_to_path
from .plan import PlanRow, Target, family_order, plan_id, random_twin_name, selection


@dataclass
class Finish:
    """What a run leaves: the lines to print, the report files, the job summary, the baselines."""

    lines: list[str] = field(default_factory=list)
    reports: list[Path] = field(default_factory=list)
    summary: Path | None = None
    baselines: list[Path] = field(default_factory=list)


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
        self._spreads: dict[str, dict] = {}  # model slug -> its recorded seed spreads (claims.baselines.seed_spreads)
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
                # default: local files only; "offline" (HF_HUB_OFFLINE as the face read it) is said in a load error
                hub = {"allow_download": self.options.allow_download, "offline": self.options.hub_offline}
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
        from ..claims.baselines import load_baseline, seed_spreads
        from ..claims.checks import CompareTo, NegativeControl, NoBaseline, OwnBaseline, Record, evaluate

        pr = self.result(target)
        others = lambda c: self.other_passes(c, target, negative_control)  # noqa: E731
        # the check this run asks of the claim (claims.checks: the one place that decides ``passed``)
        if negative_control:
            policy = NegativeControl()
        elif self.options.compare_to is not None:
            policy = CompareTo(self.compare_baseline(), self.options.limit, self.options.compare_fail_on)
        elif self.options.record_baseline is not None:
            policy = Record()
        elif self.options.check_baseline:
            policy = OwnBaseline(load_baseline(pr.model.slug), self.options.limit)
        else:
            policy = NoBaseline()
        # this model's recorded seed spreads (scripts/spread.py): a one-seed trained value's interval holds the seed
        if pr.model.slug not in self._spreads:
            self._spreads[pr.model.slug] = seed_spreads(pr.model.slug)
        out = evaluate(claim, pr, others=others, assume_shape=self.options.assume_shape,
                       seed_spread=self._spreads[pr.model.slug], policy=policy)
        out.negative_control = negative_control
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

