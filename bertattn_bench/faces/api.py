"""The Python face: run claims on a model you name or hold, get the results back as data.

    >>> import bertattn_bench as bb
    >>> res = bb.run("embedded", select="dependency", data_dir="../shared/data")
    >>> res = bb.run(model, tokenizer=tok, select="kovaleva and patterns", data_dir=...)   # an object in memory
    >>> res.to_frame()          # one row per claim: verdict, value, interval, n, baseline check
    >>> print(res.table())      # the terminal table the pytest run prints
    >>> res.write_report("out/")  # claims.md/.csv/.json, run.json, matrix, figures

``select`` is a pytest ``-k`` expression over the same ids the pytest face gives its tests
(``paper-family-model-corpus-claim``): ``"dependency"``, ``"kovaleva and not framenet"``, ``"clark.dep_dobj"``.
Every step is the runner's (:mod:`bertattn_bench.runner.session`): the values are those ``pytest benchmarks`` measures.
Nothing raises for a claim: a pass that cannot be made (bad data) is kept in ``Results.errors`` with its message, and
its claims are absent; bad arguments raise :class:`BenchError` at once, as the command stops at start-up: a model
that cannot be loaded :class:`ModelLoadError` naming it, a selection that matches nothing :class:`NothingSelected`
(the command's exit status 5), an object that is not a model :class:`ModelLoadError` saying so.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import BenchError
from ..runner.options import RunOptions
from ..runner.session import Runner

DEFAULT_CACHE = Path(".bertattn_cache")


@dataclass
class Results:
    """What a run measured: claim outcomes (verdicts, values, intervals, n, baseline checks), pass summaries,
    errors, provenance."""

    outcomes: list = field(default_factory=list)
    passes: list = field(default_factory=list)
    errors: dict = field(default_factory=dict)  # pass id -> message
    runner: Runner | None = None

    def __iter__(self):
        return iter(self.outcomes)

    def __len__(self) -> int:
        return len(self.outcomes)

    def get(self, claim_id: str, model: str | None = None):
        """The outcomes of one claim (of one model, by its full name)."""
        return [o for o in self.outcomes if o.claim_id == claim_id and (model is None or o.model == model)]

    @property
    def ok(self) -> bool:
        """No pass failed and every judged claim passed its check (the pytest face's pass/fail)."""
        return not self.errors and all(o.passed is not False for o in self.outcomes if not o.skipped)

    def records(self) -> list[dict]:
        """One dict per outcome (the rows of ``claims.json``)."""
        return [o.record() for o in self.outcomes]

    def to_frame(self):
        """A pandas DataFrame, one row per outcome (claim, model, corpus, verdict, measured, interval, n, ...)."""
        import pandas as pd

        rows = []
        for o in self.outcomes:
            r = o.record()
            r["verdict"] = o.verdict
            r["ci_low"], r["ci_high"] = (o.interval or (None, None))
            rows.append(r)
        first = ["claim_id", "model", "corpus", "verdict", "measured", "unit", "ci_low", "ci_high", "n", "n_unit",
                 "head", "holds", "inconclusive", "passed", "baseline", "delta", "skipped"]
        frame = pd.DataFrame(rows)
        return frame[[c for c in first if c in frame] + [c for c in frame if c not in first]] if rows else frame

    def table(self, width: int = 120) -> str:
        """The claims-vs-measured table (as the pytest face prints it)."""
        from ..report.claims_report import terminal_table

        return terminal_table(self.outcomes, width=width)

    def write_report(self, directory, self_contained: bool = False) -> list[Path]:
        """claims.md/.csv/.json, run.json, matrix.* and the figures, into ``directory`` (``self_contained``: the
        figures embedded in matrix.html)."""
        return self.runner.write_report(directory, self_contained=self_contained)

    def record_baseline(self, directory) -> list[Path]:
        """The measured values as each model's baseline file in ``directory``."""
        return self.runner.record_baselines(directory)


def _models(model, tokenizer, name, device, task=None) -> tuple[list[str], dict, list[str]]:
    """Model names for the run, the objects the caller handed in (wrapped) under their names, and notes (a
    classifier object with no task: measured through its encoder)."""
    from ..engine.model import LoadedModel, is_classifier_object, wrap_model
    from ..training.given import resolve_task

    items = model if isinstance(model, (list, tuple)) else [model]
    names, loaded, notes = [], {}, []
    for item in items:
        if isinstance(item, (str, Path)):
            names.append(str(item))
        elif isinstance(item, LoadedModel):
            names.append(item.info.name)
            loaded[item.info.name] = item
        else:
            given, note = resolve_task(task, getattr(item, "config", None), classifier=is_classifier_object(item))
            if note:
                notes.append(f"note: {note}")
            w = wrap_model(item, tokenizer, name=name if len(items) == 1 else None, device=device, task=given)
            names.append(w.info.name)
            loaded[w.info.name] = w
    return list(dict.fromkeys(names)), loaded, notes


def _eval_sources(eval_data, task: str | None) -> list:
    """``eval_data=`` as the run's list of evaluation sources: a dict by task, a list, or one source for ``task``."""
    from ..data.eval_sets import of

    if eval_data is None:
        return []
    if isinstance(eval_data, dict):
        return [of(v, k) for k, v in eval_data.items()]
    if isinstance(eval_data, (list, tuple)):
        return [of(v) for v in eval_data]
    if task is None and not (isinstance(eval_data, str) and "=" in eval_data):
        raise BenchError("eval_data=: say which task it is for: eval_data={'mrpc': ...}, or task='mrpc'")
    return [of(eval_data, task)]


def run(model="embedded", tokenizer=None, *, select=None, data_dir=None, tier: str | None = None,
        corpora: dict | None = None, limit: int | None = None, device: str | None = None, batch_size: int = 32,
        cache_dir=DEFAULT_CACHE, negative_control: bool = False, compare_to: str | None = None,
        compare_fail_on: str = "lost",
        baseline: bool = True, name: str | None = None, progress: bool = False, seed: int | None = None,
        seeds: int | None = None,
        precision: str | None = None, prune_exact: bool | None = None, assume_shape: str | None = None,
        allow_download: bool | None = None, offline: bool | None = None, task: str | None = None,
        eval_data=None) -> Results:
    """Run the selected claims on ``model`` and return the results.

    ``model``: ``"embedded"``, a folder, a hub name, ``"random:<model>[@seed]"``, a transformers model object (with
    ``tokenizer``), a :class:`~bertattn_bench.engine.model.LoadedModel`, or a list of these (one column each).
    ``data_dir``: the data folder (else ``$BERTATTN_DATA_DIR``). ``tier``: quick (default), regression, full.
    ``corpora``: ``{family: [corpus, ...]}``. ``cache_dir``: finished passes and fine-tunes (None: no cache).
    ``negative_control``: also judge each family's learned claims on the first model's random-init twin.
    ``compare_to``: judge against another model's recorded baseline; ``compare_fail_on``: what fails a check then
    (``lost``: a claim that held there does not hold here; ``flips``: any verdict change; ``never``).
    ``baseline``: check values against the model's recorded baseline where there is one.
    ``seed``: the training seed (probes; a fine-tune the tier trains once); ``seeds``: how many seeds from ``seed``
    on each seed-dependent family trains (default the tier's: quick 1, regression 5 for MRPC, 3 for the probes and
    ARCT; a check's shared checkpoints and sweeps are reused); ``precision``: the fine-tunes' (auto,
    bf16, fp32, recipe); ``prune_exact``: importance recomputed before every pruning step; ``assume_shape``: judge
    claims naming a paper model's heads on a model of another shape; ``allow_download``: let transformers download
    a hub model; ``offline``: never download data (else, without ``data_dir``, the default data folder is filled
    with what the selection reads). ``task``: ``model`` is a sequence-classification model fine-tuned on this task
    (``"mrpc"``, ...), judged as given by the fine-tuning families (default: its config's ``finetuning_task``; a
    classifier with neither is measured through its encoder). ``eval_data``: a task's evaluation data instead of
    the shipped TSV: ``{"mrpc": source}`` or, with ``task``, one source; a source is a datasets ``Dataset`` /
    ``DatasetDict``, a ``save_to_disk`` folder, a Parquet/CSV/JSON(L) file or ``"hub:NAME[:CONFIG]"`` in the local
    datasets cache, or an :class:`~bertattn_bench.data.eval_sets.EvalSource` (column and split names). Each left out is the environment's (``BERTATTN_SEED``, ...), else the default;
    all are in the run's provenance.
    """
    from ..base.settings import data_hosts, from_environment
    from ..engine.model import RANDOM_PREFIX
    from .cli_parsing import validate_from_environment

    envs = from_environment()
    validate_from_environment()
    given = {"seed": seed, "n_seeds": seeds, "precision": precision, "prune_exact": prune_exact, "assume_shape": assume_shape,
             "allow_download": allow_download, "offline": offline, "tier": tier, "device": device}
    settings = {k: v if v is not None else envs.get(k) for k, v in given.items()}
    settings = {k: v for k, v in settings.items() if v is not None}
    names, loaded, notes = _models(model, tokenizer, name, settings.get("device"), task)
    named = ({"data_dir": data_dir, "data_dir_source": "data_dir="} if data_dir not in (None, "") else
             {k: envs[k] for k in ("data_dir", "data_dir_source") if k in envs})  # the variable's, else the default
    options = RunOptions(**settings, **named, data_home=envs.get("data_home"), task_model=task,
                         eval_data=_eval_sources(eval_data, task), hub_offline=envs.get("hub_offline", False),
                         models=names,
                         corpus_options=[f"{f}={','.join(c)}" for f, c in (corpora or {}).items()], limit=limit,
                         batch_size=batch_size, cache_dir=None if cache_dir is None else Path(cache_dir),
                         compare_to=compare_to, compare_fail_on=compare_fail_on, check_baseline=baseline,
                         command=f"bertattn_bench.run(select={select!r})", progress=progress,
                         data_hosts=data_hosts())
    options.check()
    runner = Runner(options, loaded=loaded)
    runner.notes += notes
    for m in names:  # a model that cannot be loaded raises here, naming it and how to provide it (the command: 4)
        if m not in loaded and not m.startswith(RANDOM_PREFIX):
            runner.model(m)
    results = Results(runner=runner)
    rows = runner.plan(select, negative_control=negative_control)  # a bad select: a BenchError now
    if not any(row.claims for row in rows):  # nothing to run: said at the call, as the command's exit status 5
        from ..base.errors import NothingSelected

        raise NothingSelected(f"select={select!r}: matches no claim of {', '.join(names)} (ids read "
                              f"paper-family-model-corpus-claim: e.g. 'dependency', 'clark.dep_dobj', 'kovaleva')")
    runner.ensure_data([(row.target.family, row.target.corpus) for row in rows])  # now, not once per pass
    for row in rows:
        try:
            runner.judge(row)
        except BenchError as exc:
            results.errors[f"{row.target.family}-{row.target.id}"] = str(exc)
    results.outcomes, results.passes = runner.outcomes, runner.passes
    return results
