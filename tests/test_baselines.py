"""Recording baselines: values with n, provenance of every run that measured a kept value, data checksums."""
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from bertattn_bench.claims.baselines import describe_data, record_baselines


def _session(tmp_path: Path, claim: str, corpus: str, value: float, args: list[str]):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / f"{corpus}.txt").write_text(f"text of {corpus}\n")
    outcome = SimpleNamespace(skipped=None, model_slug="m", claim_id=claim, corpus=corpus, measured=value, n=7,
                              n_unit="arcs", holds=True, head="1-2", detail="", negative_control=False)
    p = {"slug": "m", "model": "embedded:m", "source": "/x", "attn_implementation": "bertattn_eager", "device": "cpu",
         "family": "fam", "corpus": corpus, "data_files": describe_data([data / f"{corpus}.txt"], data)}
    config = SimpleNamespace(invocation_params=SimpleNamespace(args=args), getoption=lambda name: None)
    return SimpleNamespace(outcomes=[outcome], passes=[p], config=config, data_dir=data)


def rec(session, directory, date=None):
    """record_baselines over a run's plain values, as the runner calls it."""
    return record_baselines(session.outcomes, session.passes, directory,
                            command="pytest " + " ".join(session.config.invocation_params.args), date=date)


def test_record_merges_runs_and_keeps_their_provenance(tmp_path):
    out = tmp_path / "baselines"
    rec(_session(tmp_path, "c.one", "a", 1.0, ["-k", "one"]), out, date="2026-01-01T00:00:00+00:00")
    rec(_session(tmp_path, "c.two", "b", 2.0, ["-k", "two"]), out, date="2026-01-02T00:00:00+00:00")
    doc = json.loads((out / "m.json").read_text())
    assert doc["results"]["c.one@a"]["measured"] == 1.0 and doc["results"]["c.one@a"]["n"] == 7
    assert doc["results"]["c.one@a"]["recorded"] == "2026-01-01T00:00:00+00:00"
    assert doc["results"]["c.two@b"]["recorded"] == "2026-01-02T00:00:00+00:00"
    assert doc["provenance"]["command"] == "pytest -k two"
    assert doc["provenance"]["data"] == {"fam/b": describe_data([tmp_path / "data" / "b.txt"], tmp_path / "data")}
    assert doc["provenance"]["data"]["fam/b"].startswith("b.txt sha256:")
    assert [r["command"] for r in doc["provenance"]["earlier_runs"]] == ["pytest -k one"]
    # re-measuring c.one replaces it, and the run that no longer owns any value leaves the history
    rec(_session(tmp_path, "c.one", "a", 1.5, ["-k", "one again"]), out, date="2026-01-03T00:00:00+00:00")
    doc = json.loads((out / "m.json").read_text())
    assert doc["results"]["c.one@a"]["measured"] == 1.5
    assert [r["command"] for r in doc["provenance"]["earlier_runs"]] == ["pytest -k two"]


def test_describe_data_changes_with_content(tmp_path):
    f = tmp_path / "x.conllu"
    f.write_text("1\ta\n")
    before = describe_data([f], tmp_path)
    f.write_text("1\tb\n")
    assert describe_data([f], tmp_path) != before
    assert describe_data([tmp_path], tmp_path).endswith("(1 file(s))")



def test_negative_control_outcomes_are_not_recorded(tmp_path):
    session = _session(tmp_path, "c.one", "a", 1.0, [])
    twin = SimpleNamespace(**{**vars(session.outcomes[0]), "model_slug": "random-m", "negative_control": True})
    session.outcomes.append(twin)
    written = rec(session, tmp_path / "baselines", date="2026-01-01T00:00:00+00:00")
    assert [p.name for p in written] == ["m.json"]


def test_xdist_workers_write_no_report_or_baseline(tmp_path):
    """Under pytest-xdist only the controller writes the claims report and the baseline; a worker (a config with
    ``workerinput``) writes nothing, the controller (same session, no ``workerinput``) writes both."""
    from bertattn_bench.claims.catalog import ClaimOutcome
    from bertattn_bench.faces import pytest_plugin as plugin

    outcome = ClaimOutcome(claim_id="c.one", paper="p", section="§1", statement="s", model="m", model_slug="m",
                           data="d", corpus="a", measured=1.0, unit="", n=7, n_unit="arcs", reference="r",
                           comparison=">= 0", holds=True, head=None, detail="", attn_implementation="eager")
    from bertattn_bench.runner.options import RunOptions
    from bertattn_bench.runner.session import Runner

    session = Runner(RunOptions(claims_report=tmp_path / "report", record_baseline=tmp_path / "baselines"))
    session.outcomes = [outcome]
    session.passes = _session(tmp_path, "c.one", "a", 1.0, []).passes
    session.passes[0].update(cached=False, n_examples=0, seconds=0.0, skipped="", cache_path=None)
    lines = []
    terminal = SimpleNamespace(write_sep=lambda *a, **k: None, write_line=lines.append, isatty=False)

    def config(**extra):
        c = SimpleNamespace(invocation_params=SimpleNamespace(args=[]), getoption=lambda dest: None, **extra)
        c._bertattn_session = session
        return c

    plugin.pytest_terminal_summary(terminal, 0, config(workerinput={"workerid": "gw0"}))
    assert not (tmp_path / "report").exists() and not (tmp_path / "baselines").exists() and lines == []
    plugin.pytest_terminal_summary(terminal, 0, config())
    assert (tmp_path / "report" / "claims.json").is_file() and (tmp_path / "baselines" / "m.json").is_file()


def test_provenance_points_at_the_measured_spread(tmp_path):
    out = tmp_path / "baselines"
    (out / "spread").mkdir(parents=True)
    (out / "spread" / "m-probes.json").write_text("{}")
    (out / "spread" / "other-probes.json").write_text("{}")
    rec(_session(tmp_path, "c.one", "a", 1.0, []), out, date="2026-01-01T00:00:00+00:00")
    doc = json.loads((out / "m.json").read_text())
    assert doc["provenance"]["tolerance_spread"] == ["spread/m-probes.json"]


def test_spread_summary_known_answer():
    """scripts/spread.py: spread = max - min over runs, tolerance = max(safety x spread, 100/n) rounded up
    to 0.1; the structural layer per run is read from the outcome's named values, not the detail's wording."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("spread", Path(__file__).parent.parent / "scripts" / "spread.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def run(v, layer, seed=0, threads=2):
        record = {"claim_id": "c", "corpus": "x", "measured": v, "n": 1000, "n_unit": "arcs", "holds": True,
                  "detail": "at layer 9 (wording a script must not parse)", "values": {"structural_layer": layer}}
        skipped = {**record, "claim_id": "s", "skipped": "no pass"}
        return {"seed": seed, "omp_num_threads": threads,
                "values": mod.values_of([record, skipped, {**record, "claim_id": "n", "negative_control": True}])}

    # three seeds: sd 0.3512 (16.9, 17.3, 16.6); another seed's value differs from a recorded one by sd x sqrt(2),
    # estimated with 2 degrees of freedom: t(2) = 4.3027 -> 4.3027 x 1.4142 x 0.3512 = 2.137, above 2 x spread (1.4)
    s = mod.summarise([run(16.9, 2, 0), run(17.3, 3, 1), run(16.6, 0, 2)], safety=2.0)["c@x"]
    assert s["spread"] == pytest.approx(0.7) and s["max_abs_delta_from_first"] == pytest.approx(0.4)
    assert s["seed_sd"] == pytest.approx(0.35119, abs=1e-4) and s["seeds"] == [0, 1, 2]
    assert s["proposed_tolerance"] == 2.2 and s["structural_layer"] == [2, 3, 0] and s["n"] == 1000
    # the same values, the third a thread count's run (another machine, not a seed): two seeds, sd 0.2828, and
    # t(1) = 12.706 x sqrt(2) x 0.2828 = 5.08 -> 5.1
    t = mod.summarise([run(16.9, 2, 0), run(17.3, 3, 1), run(16.6, 0, 0, threads=1)], safety=2.0)["c@x"]
    assert t["seeds"] == [0, 1] and t["seed_values"] == [16.9, 17.3] and t["proposed_tolerance"] == 5.1
    assert set(run(1.0, 1)["values"]) == {"c@x"}  # skipped and negative-control records left out
    tiny = mod.summarise([run(5.0, 1, 0), run(5.0, 1, 1)], safety=2.0)["c@x"]
    assert tiny["proposed_tolerance"] == 0.1  # the one-arc step (100/1000 = 0.1) is the floor
    with pytest.raises(SystemExit, match="SEED:THREADS"):
        mod.parse_runs("0:2,x")
    # patterns (fine-tuned checkpoints of seeds 0-2): shares have no one-item floor; precision 0.001
    share = lambda v, seed: {"seed": seed, "omp_num_threads": 2,  # noqa: E731
                             "values": {"s@mrpc": {"measured": v, "n": 21600, "n_unit": "maps", "holds": True,
                                                   "layer": None}}}
    # sd 0.007065 -> 4.3027 x 1.4142 x 0.007065 = 0.04299 -> 0.043 (2 x spread = 0.0282)
    p = mod.summarise([share(0.5934, 0), share(0.6012, 1), share(0.5871, 2)], safety=2.0, family="patterns")["s@mrpc"]
    assert p["spread"] == pytest.approx(0.0141) and p["proposed_tolerance"] == pytest.approx(0.043)
    assert mod.summarise([share(0.2, 0), share(0.2, 1)], safety=2.0,
                         family="patterns")["s@mrpc"]["proposed_tolerance"] == 0.001


def test_an_entry_carries_the_tolerance_its_measured_spread_asks_for(tmp_path):
    """A tier whose values move more than the claim's tolerance (the quick tier's 64 dev pairs) records the spread's
    tolerance in the entry (scripts/spread.py's proposed_tolerance); the check and ``diff`` use it, never narrower
    than the claim's."""
    import json

    from test_claims_registry import FakePass, claim

    from bertattn_bench.claims.baselines import baseline_diff, diff_failures, record_baselines, spread_tolerances
    from bertattn_bench.claims.catalog import evaluate

    (tmp_path / "spread").mkdir()
    (tmp_path / "spread" / "m-glue.json").write_text(json.dumps({"claims": {
        "t.claim@fake_corpus": {"proposed_tolerance": 4.0}, "t.other@x": {"proposed_tolerance": 0.1}}}))
    assert spread_tolerances(tmp_path, "m") == {"t.claim@fake_corpus": (4.0, "spread/m-glue.json"),
                                                "t.other@x": (0.1, "spread/m-glue.json")}
    c = claim(">=", 0.0, tolerance=0.5)
    out = evaluate(c, FakePass(10.0))
    out.model_slug = "m"
    record_baselines([out], [{"slug": "m", "model": "m", "source": "s", "attn_implementation": "eager",
                              "device": "cpu", "family": "fam", "corpus": "fake_corpus", "data_files": ""}], tmp_path)
    doc = json.loads((tmp_path / "m.json").read_text())
    entry = doc["results"]["t.claim@fake_corpus"]
    assert entry["tolerance"] == 4.0 and entry["tolerance_spread"] == "spread/m-glue.json"
    moved = evaluate(c, FakePass(13.0), doc)  # 3 off: outside the claim's 0.5, inside the entry's 4
    assert moved.passed and moved.tolerance == 4.0
    assert not evaluate(c, FakePass(14.5), doc).passed
    new = {"results": {"t.claim@fake_corpus": dict(entry, measured=13.0)}}
    rows = baseline_diff(doc, new)
    assert diff_failures(rows, tolerances={"t.claim": 0.5}) == []
    assert diff_failures(baseline_diff(doc, {"results": {"t.claim@fake_corpus": dict(entry, measured=15.0)}}),
                         tolerances={"t.claim": 0.5})
