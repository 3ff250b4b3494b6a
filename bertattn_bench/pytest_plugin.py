"""pytest plugin: options, session-wide passes shared by every claim of a family, and the claim table.

Loaded from the repository's ``conftest.py``. A benchmark module sets ``FAMILY = "surface"`` (etc.) and defines

* ``test_attention_core(benchmark, bench, target)`` — times the attention core once per (model, corpus) and
  keeps the pass result for the claims;
* ``test_claim(bench, claim, target)`` — one test per (claim, model, corpus); it reads the shared result.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from .claims import ClaimOutcome, evaluate, load_baseline, load_claims
from .errors import BenchError
from .model import EMBEDDED, RANDOM_PREFIX, load_model
from .report import _num
from .passes import PassResult
from .registry import families
from .settings import DATA_DIR_ENV, DEVICE_ENV, MODEL_ENV, resolve_data_dir


def pytest_addoption(parser):
    g = parser.getgroup("bertattn", "bertattn-bench claim benchmarks")
    g.addoption("--model", action="append", default=None,
                help=f"model to test: 'embedded' (default), a local folder, a Hugging Face name, or "
                     f"'random:<model>[@seed]' (random-init twin). Repeatable. Env: {MODEL_ENV} (comma-separated)")
    g.addoption("--data-dir", default=None, help=f"folder with the data sets (env: {DATA_DIR_ENV})")
    g.addoption("--device", default=None, help=f"auto (default: CUDA when present), cpu, cuda, cuda:N (env: {DEVICE_ENV})")
    g.addoption("--corpus", action="append", default=[],
                help="family=corpus[,corpus] e.g. dependency=ewt_dev,gum_dev (defaults: "
                     + ", ".join(f"{f.name}={f.default_corpus}" for f in families().values()) + ")")
    g.addoption("--limit", type=int, default=None, help="at most N examples per corpus (quick runs; n is reported)")
    g.addoption("--batch-size", type=int, default=32, help="examples per forward pass (default 32)")
    g.addoption("--claims-report", default=None, metavar="DIR", help="write claims.md, claims.csv, claims.json to DIR")
    g.addoption("--record-baseline", default=None, metavar="DIR", nargs="?", const="reference_numbers/baselines",
                help="record every measured claim value as the model's baseline (default DIR reference_numbers/baselines)")


@dataclass(frozen=True)
class Target:
    model: str
    corpus: str
    family: str

    @property
    def id(self) -> str:
        return f"{model_id(self.model)}-{self.corpus}"


def model_id(name: str) -> str:
    if name in (EMBEDDED, "", None):
        return "minilm"
    if name.startswith(RANDOM_PREFIX):
        return "random-" + model_id(name[len(RANDOM_PREFIX):].split("@")[0] or EMBEDDED)
    return Path(name).name or name


def requested_models(config) -> list[str]:
    names = config.getoption("--model") or [m for m in os.environ.get(MODEL_ENV, "").split(",") if m] or [EMBEDDED]
    return list(dict.fromkeys(names))


def requested_corpora(config, family: str) -> list[str]:
    fams = families()
    for entry in config.getoption("--corpus"):
        fam, _, names = entry.partition("=")
        if fam not in fams:
            raise pytest.UsageError(f"--corpus {entry}: unknown family {fam!r}; known: {', '.join(fams)}")
        if fam == family:
            corpora = [c for c in names.split(",") if c]
            unknown = [c for c in corpora if c not in fams[family].corpora]
            if unknown:
                raise pytest.UsageError(f"--corpus {entry}: unknown {family} corpus {unknown}; "
                                        f"known: {', '.join(fams[family].corpora)}")
            return corpora
    return [fams[family].default_corpus]


class BenchSession:
    """Everything computed in this pytest session, shared by the tests: models, passes, outcomes."""

    def __init__(self, config):
        self.config = config
        self.models: dict[str, object] = {}
        self.results: dict[Target, PassResult] = {}
        self.outcomes: list[ClaimOutcome] = []
        self._data_dir = None

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            self._data_dir = resolve_data_dir(self.config.getoption("--data-dir"))
        return self._data_dir

    def model(self, name: str):
        """Load once per session; a load error is kept and reported (cleanly, once per test) without retrying."""
        if name not in self.models:
            device = self.config.getoption("--device") or os.environ.get(DEVICE_ENV)
            try:
                self.models[name] = load_model(name, device=device)
            except BenchError as exc:
                self.models[name] = exc
        loaded = self.models[name]
        if isinstance(loaded, BenchError):
            pytest.fail(f"--model {name}: {loaded}", pytrace=False)
        return loaded

    def prepare(self, target: Target):
        loaded = self.model(target.model)
        try:
            return families()[target.family].prepare(loaded, self.data_dir, target.corpus, limit=self.config.getoption("--limit"),
                                          batch_size=self.config.getoption("--batch-size"))
        except BenchError as exc:
            pytest.fail(f"{target.family} / {target.corpus}: {exc}", pytrace=False)

    def result(self, target: Target) -> PassResult:
        if target not in self.results:
            self.results[target] = self.prepare(target).run(progress=not os.environ.get("CI"))
        return self.results[target]

    def outcome(self, claim, target: Target, negative_control: bool = False) -> ClaimOutcome:
        pr = self.result(target)
        recording = self.config.getoption("--record-baseline")
        out = evaluate(claim, pr, None if (recording or negative_control) else load_baseline(pr.model.slug))
        if negative_control and out.skipped is None:
            out.passed = out.holds is False  # a learned-structure claim must fail on random weights
            out.comparison = f"NOT {out.comparison} (negative control)"
        elif recording and out.skipped is None:
            out.passed = True  # recording: the value becomes the baseline; the verdict is still reported
        self.outcomes.append(out)
        return out


def _bench(config) -> BenchSession:
    if not hasattr(config, "_bertattn_session"):
        config._bertattn_session = BenchSession(config)
    return config._bertattn_session


@pytest.fixture(scope="session")
def bench(request) -> BenchSession:
    return _bench(request.config)


def pytest_generate_tests(metafunc):
    family = getattr(metafunc.module, "FAMILY", None)
    if family is None:
        return
    if "target" in metafunc.fixturenames:
        targets = [Target(m, c, family) for m in requested_models(metafunc.config)
                   for c in requested_corpora(metafunc.config, family)]
        metafunc.parametrize("target", targets, ids=[t.id for t in targets])
    if "claim" in metafunc.fixturenames:
        claims = load_claims(family=family)
        metafunc.parametrize("claim", claims, ids=[c.id for c in claims])


def failure_message(o: ClaimOutcome) -> str:
    if o.baseline_ok is not None:
        return (f"{o.claim_id} on {o.model} / {o.corpus}: measured {o.measured:.4g} (n={o.n} {o.n_unit}, "
                f"{o.verdict}) but the recorded baseline is {_num(o.baseline)} "
                f"({'holds' if o.baseline_holds else 'does not hold'}), tolerance {o.tolerance}: {o.detail}")
    return (f"{o.claim_id} on {o.model} / {o.corpus}: {o.statement} — measured {o.measured:.4g} {o.unit} "
            f"(n={o.n} {o.n_unit}), needs {o.comparison}: {o.detail}")


def check_claim(bench: BenchSession, claim, target: Target) -> ClaimOutcome:
    """What a claim test does: evaluate, skip with the reason, or fail with the numbers."""
    out = bench.outcome(claim, target)
    if out.skipped:
        pytest.skip(f"{claim.id}: {out.skipped}")
    assert out.passed, failure_message(out)
    return out


def time_core(benchmark, bench: BenchSession, target: Target) -> PassResult:
    """Time one attention pass with pytest-benchmark and keep its result for the claims."""
    prepared = bench.prepare(target)
    result = benchmark.pedantic(prepared.run, rounds=1, iterations=1, warmup_rounds=0)
    bench.results[target] = result
    benchmark.extra_info.update({
        "model": result.model.name, "corpus": target.corpus, "data": result.data, "n_examples": result.n_examples,
        "examples_per_second": round(result.examples_per_second, 2), "device": result.model.device,
        "attn_implementation": result.model.attn_implementation, "skipped": result.skipped.describe(),
    })
    return result


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    session = getattr(config, "_bertattn_session", None)
    if session is None or not session.outcomes:
        return
    from .report import terminal_table, write_report

    terminalreporter.write_sep("=", "bertattn-bench: claims vs measured")
    terminalreporter.write_line(terminal_table(session.outcomes))
    timings = [r for r in session.results.values()]
    if timings:
        terminalreporter.write_line("")
        for r in timings:
            terminalreporter.write_line(
                f"attention core: {r.model.name} / {r.corpus}: {r.n_examples} examples in {r.seconds:.2f}s = "
                f"{r.examples_per_second:.1f}/s on {r.model.device} ({r.model.attn_implementation})"
                + (f"; {r.skipped.describe()}" if r.skipped.n else ""))
    report_dir = config.getoption("--claims-report")
    if report_dir:
        from .registry import FIGURES

        paths = write_report(session.outcomes, Path(report_dir))
        by_family: dict[str, list[PassResult]] = {}
        for r in session.results.values():
            by_family.setdefault(r.family, []).append(r)
        for fam, results in sorted(by_family.items()):
            if fam in FIGURES:
                paths += FIGURES[fam](results, Path(report_dir) / "figures")
        terminalreporter.write_line("claims report: " + ", ".join(str(p) for p in paths))
    record_dir = config.getoption("--record-baseline")
    if record_dir:
        from .baselines import record_baselines

        for path in record_baselines(session, Path(record_dir)):
            terminalreporter.write_line(f"recorded baseline: {path}")


def pytest_collection_modifyitems(config, items):
    # Fail fast on a bad data directory (a clear message naming the option) before any model is loaded.
    if any(getattr(item.module, "FAMILY", None) for item in items if hasattr(item, "module")):
        try:
            _bench(config).data_dir
        except BenchError as exc:
            raise pytest.UsageError(str(exc)) from exc
