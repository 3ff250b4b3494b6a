"""Runs that fail safe (issue 37): a malformed data file stops the run with one message naming file and line and the
usage/input exit status; an interrupted run writes its report marked incomplete, naming the claims it did not run."""
import json
import subprocess
import sys
from pathlib import Path

from architecture_matrix import toy_data_dir

ROOT = Path(__file__).resolve().parent.parent


def test_an_undecodable_data_file_is_one_message_and_exit_4(tmp_path):
    data = toy_data_dir(tmp_path / "data")
    ewt = data / "ud_english_ewt" / "en_ewt-ud-dev.conllu"
    lines = ewt.read_bytes().split(b"\n")
    lines[4] = lines[4].replace(b"cat", b"c\xfft")  # line 5: a byte that is not UTF-8
    ewt.write_bytes(b"\n".join(lines))
    out = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "benchmarks" / "test_claims.py"), "-q",
                          "-k", "dependency and minilm", "--data-dir", str(data), "--no-cache", "-p", "no:randomly"],
                         capture_output=True, text=True, cwd=ROOT, env={**__import__("os").environ, "CI": "1"})
    text = out.stdout + out.stderr
    assert out.returncode == 4, text[-3000:]
    named = [ln for ln in text.splitlines() if "en_ewt-ud-dev.conllu:5" in ln]
    assert len(named) == 1, text[-3000:]  # once, not once per test
    assert "not UTF-8" in named[0] and "Traceback" not in text


BENCH = """
from bertattn_bench.faces.pytest_session import check_claim

FAMILY = "dependency"
RAN = []


def test_claim(bench, claim, target):
    RAN.append(claim.id)
    if len(RAN) == 3:
        raise KeyboardInterrupt  # Ctrl-C during the third claim
    check_claim(bench, claim, target)
"""


def test_an_interrupted_run_writes_a_report_marked_incomplete(pytester, tmp_path):
    data = toy_data_dir(tmp_path / "data")
    pytester.makeconftest('pytest_plugins = ["bertattn_bench.faces.pytest_plugin", "bertattn_bench.faces.short_options"]')
    pytester.makepyfile(test_bench=BENCH)
    report = tmp_path / "report"
    result = pytester.runpytest_subprocess(f"--data-dir={data}", "--no-cache", f"--claims-report={report}",
                                           "-p", "no:cacheprovider")
    assert result.ret == 2  # pytest's "interrupted"
    doc = json.loads((report / "claims.json").read_text())
    assert doc["complete"] is False
    assert len(doc["records"]) == 2  # the two claims judged before the interrupt
    n_claims = len([c for c in __import__("bertattn_bench.claims.catalog", fromlist=["x"]).load_claims(family="dependency")])
    assert len(doc["missing"]) == n_claims - 2 and all(" on minilm / ewt_dev" in m for m in doc["missing"])
    assert "INCOMPLETE" in (report / "claims.md").read_text()
    result.stdout.fnmatch_lines(["INCOMPLETE: * selected test(s) did not run*"])


def test_junit_properties_are_readable_json(tmp_path):
    """--junitxml shows each claim's outcome as a JSON object (not a Python repr), one per test."""
    import xml.etree.ElementTree as ET

    data = toy_data_dir(tmp_path / "data")
    xml = tmp_path / "junit.xml"
    out = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "benchmarks" / "test_claims.py"), "-q",
                          "-k", "dependency and minilm and not random and dep_dobj", f"--data-dir={data}",
                          "--no-cache", f"--junitxml={xml}"], capture_output=True, text=True, cwd=ROOT)
    props = [p.get("value") for p in ET.parse(xml).iter("property") if p.get("name") == "bertattn_outcome"]
    assert len(props) == 1, out.stdout[-2000:]
    record = json.loads(props[0])
    assert record["claim_id"] == "clark.dep_dobj" and record["corpus"] == "ewt_dev"


def test_compare_policy_decides_what_fails(tmp_path):
    """--compare-fail-on: lost (a claim that held on A does not hold here), flips (either way), never."""
    from types import SimpleNamespace

    from bertattn_bench.claims.catalog import Claim, baseline_key, evaluate
    from bertattn_bench.claims.registry import Measurement, metric

    name = "test_fail_safe_constant_metric"

    from bertattn_bench.claims import registry

    if name not in registry.METRICS:
        metric(name)(lambda pr, **kw: Measurement(value=pr.result, n=10, n_unit="things"))
    claim = Claim(id="t.c", paper="P", section="§0", statement="s", family="fam", metric=name, comparison=">",
                  threshold=1.0, reference="r", source="S", rationale="why", tolerance=0.1, tolerance_rationale="t")
    info = SimpleNamespace(name="B", slug="b", attn_implementation="eager", n_layers=1, n_heads=1, extra={})
    from bertattn_bench.engine.batching import Skipped

    def pr(value):
        return SimpleNamespace(model=info, data="d", corpus="c", tier=None, result=value, n_examples=10,
                               skipped=Skipped(), family="fam")

    def base(holds):
        return {"results": {baseline_key("t.c", "c"): {"measured": 2.0 if holds else 0.0, "holds": holds, "n": 10}},
                "provenance": {"model": "A"}}

    def passed(a_holds, value, policy):
        return evaluate(claim, pr(value), base(a_holds), mode="compare", compare_fail_on=policy).passed

    assert passed(True, 0.0, "lost") is False and passed(False, 2.0, "lost") is True
    assert passed(True, 0.0, "flips") is False and passed(False, 2.0, "flips") is False
    assert passed(True, 2.0, "flips") is True and passed(True, 0.0, "never") is True


def test_a_read_only_cache_trains_in_memory_and_stores_nothing(tmp_path, monkeypatch):
    """A read-only cache folder: passes are read from it, and a family that trains gets no checkpoint folder (its
    fine-tune is made in memory) instead of failing to write one."""
    from bertattn_bench.claims import registry
    from bertattn_bench.claims.registry import Family
    from bertattn_bench.runner.cache import PassCache
    from bertattn_bench.runner.options import RunOptions
    from bertattn_bench.runner.plan import Target
    from bertattn_bench.runner.session import Runner

    seen = []

    def prepare(loaded, data_dir, corpus, limit=None, batch_size=32, options=None):
        seen.append(options["cache_dir"])

    fams = {"fam": Family("fam", prepare, ("c",), "c", trains=True)}
    monkeypatch.setattr(registry, "families", lambda: fams)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x").write_text("x")
    for read_only in (False, True):
        runner = Runner(RunOptions(models=["m"], data_dir=tmp_path / "data", cache_dir=tmp_path / "cache"),
                        loaded={"m": object()})
        runner.cache = PassCache(tmp_path / "cache", read_only=read_only)
        runner.prepare(Target("m", "c", "fam"))
    assert seen == [tmp_path / "cache", None]
