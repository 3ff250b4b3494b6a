"""Outputs with a contract (issue 37): claims.json, run.json, baselines and matrix.json are versioned documents valid
against the schemas shipped in the package, strict JSON (a NaN is null with a reason); claims.csv has each number in
its own column; the report folder is replaced atomically (stale figures gone) and can be marked incomplete; the
readers still read the older formats (a bare list of records, an unversioned run.json or baseline)."""
import csv
import io
import json
import math
from pathlib import Path

import pytest

from bertattn_bench.base import documents
from bertattn_bench.claims.baselines import merge_baseline_fragments, read_baseline, write_merged_baselines
from bertattn_bench.claims.catalog import REFERENCE_DIR, ClaimOutcome
from bertattn_bench.report.claims_report import read_run, write_report
from bertattn_bench.report.matrix import read_records


def outcome(claim_id="t.a", measured=0.5, **kw) -> ClaimOutcome:
    base = dict(claim_id=claim_id, paper="P", section="§1", statement="s", model="m", model_slug="m", data="d",
                corpus="c", measured=measured, unit="", n=10, n_unit="examples", reference="r", comparison="> 0",
                holds=True, head="3-7", detail="", attn_implementation="eager", passed=True, interval=[0.4, 0.6],
                baseline=0.45, delta=0.05)
    return ClaimOutcome(**(base | kw))


PROVENANCE = {"format": "bertattn-bench run", "version": 1, "code": "c0de", "references": "ref", "limit": None,
              "tier": None, "data": {"fam/c": "x sha256:00 (1 file(s))"}, "models": ["m"], "commit": "abc",
              "command": "pytest", "date": "2026-01-01T00:00:00+00:00", "torch": "2", "transformers": "5",
              "devices": ["cpu"]}


def assert_valid(path: Path, kind: str):
    text = path.read_text(encoding="utf-8")
    assert ": NaN" not in text and "Infinity," not in text
    doc = documents.loads(text)  # refuses NaN / Infinity
    assert doc["schema"] == f"bertattn-bench/{kind}" and doc["version"] == 1
    assert documents.validate(doc, kind) == [], path
    return doc


def test_every_report_file_is_a_valid_strict_document(tmp_path):
    outs = [outcome(), outcome("t.nan", float("nan"), interval=[float("-inf"), 1.0], holds=False, passed=False),
            outcome("t.skip", None, skipped="needs 12 layers", holds=None, passed=None, interval=None, head=None),
            # a claim checked by its verdict (michel.prune_speedup: checked = "verdict") has no tolerance: null
            outcome("t.speed", 12.5, tolerance=None, interval=None)]
    write_report(outs, tmp_path / "rep", provenance=PROVENANCE)
    claims = assert_valid(tmp_path / "rep" / "claims.json", "claims")
    assert claims["complete"] is True and claims["missing"] == []
    nan = next(r for r in claims["records"] if r["claim_id"] == "t.nan")
    assert nan["measured"] is None and nan["null_reasons"] == {"measured": "NaN (not a number)",
                                                              "interval[0]": "-Infinity"}
    assert_valid(tmp_path / "rep" / "run.json", "run")
    m = assert_valid(tmp_path / "rep" / "matrix.json", "matrix")
    assert m["rows"][0]["cells"]["m"]["value"] == 0.5 and m["rows"][0]["cells"]["m"]["ci_low"] == 0.4
    assert len(read_records(tmp_path / "rep")) == 4 and read_run(tmp_path / "rep")["code"] == "c0de"


def test_the_validator_rejects_what_the_schema_forbids():
    doc = documents.envelope("claims", {"complete": True, "missing": [], "records": [{"claim_id": "x"}]})
    errors = documents.validate(doc, "claims")
    assert any("missing 'model'" in e or "'model' is a required property" in e for e in errors)
    assert documents.validate({**doc, "records": [], "version": 2}, "claims")
    with pytest.raises(ValueError):
        documents.loads('{"a": NaN}')
    with pytest.raises(documents.SchemaError, match="does not match the baseline schema"):
        documents.write_json(Path("/nonexistent/never-written.json"), {"schema": "bertattn-bench/baseline",
                                                                        "version": 1, "results": {}})


def test_claims_csv_has_numbers_in_their_own_columns(tmp_path):
    write_report([outcome(), outcome("t.b", 1.25, interval=None, baseline=None, delta=None)], tmp_path)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "claims.csv").read_text(encoding="utf-8"))))
    a, b = rows
    assert (a["value"], a["ci_low"], a["ci_high"], a["n"], a["baseline"], a["delta"]) == ("0.5", "0.4", "0.6", "10",
                                                                                          "0.45", "0.05")
    assert (b["value"], b["ci_low"], b["baseline"], b["holds"]) == ("1.25", "", "", "true")
    assert all(float(x) == float(x) for x in (a["value"], a["ci_low"], a["delta"]))
    assert "[" not in a["ci_low"] and "{" not in a["n"]


def test_report_folder_replaced_atomically_stale_figures_gone_other_entries_kept(tmp_path):
    rep = tmp_path / "rep"
    (rep / "figures").mkdir(parents=True)
    (rep / "figures" / "old-run.png").write_bytes(b"stale")
    (rep / "figures" / "this-run.png").write_bytes(b"new")
    (rep / "baselines").mkdir()
    (rep / "baselines" / "m.json").write_text("{}")
    paths = write_report([outcome()], rep, figures=[rep / "figures" / "this-run.png"])
    assert sorted(p.name for p in (rep / "figures").iterdir()) == ["this-run.png"]
    assert (rep / "baselines" / "m.json").read_text() == "{}"
    assert all(p.is_file() for p in paths) and "figures/this-run.png" in (rep / "claims.md").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".rep")]  # no temporary folder left


def test_interrupted_write_leaves_the_previous_report(tmp_path, monkeypatch):
    rep = tmp_path / "rep"
    write_report([outcome(), outcome("t.b")], rep)
    before = (rep / "claims.json").read_text()

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("bertattn_bench.report.claims_report.markdown_page", boom)
    with pytest.raises(KeyboardInterrupt):
        write_report([outcome()], rep)
    assert (rep / "claims.json").read_text() == before


def test_incomplete_report_is_marked(tmp_path):
    write_report([outcome()], tmp_path / "rep", provenance=PROVENANCE, missing=["t.b", "t.c"])
    claims = assert_valid(tmp_path / "rep" / "claims.json", "claims")
    run = assert_valid(tmp_path / "rep" / "run.json", "run")
    assert (claims["complete"], claims["missing"], run["complete"], run["missing"]) == (False, ["t.b", "t.c"],
                                                                                        False, ["t.b", "t.c"])
    assert (tmp_path / "rep" / "claims.md").read_text().startswith("> **INCOMPLETE REPORT**: ")


def test_readers_accept_the_older_formats(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    record = outcome().record() | {"verdict": "holds"}
    (old / "claims.json").write_text(json.dumps([record]))  # before issue 37: a bare list
    (old / "run.json").write_text(json.dumps(PROVENANCE))  # no schema key
    assert read_records(old)[0]["claim_id"] == "t.a" and read_run(old)["code"] == "c0de"
    for path in sorted((REFERENCE_DIR / "baselines").glob("*.json"))[:3]:  # the recorded files, as they are
        assert isinstance(read_baseline(str(path))["results"], dict)


def test_baselines_written_are_versioned_and_merge_reads_old_fragments(tmp_path):
    frag = tmp_path / "in" / "m.json"
    frag.parent.mkdir()
    frag.write_text(json.dumps({"provenance": {"model": "m", "date": "d", "commit": "c", "limit": None},
                                "results": {"t.a@c": {"measured": 0.5, "n": 10, "holds": True}}}))
    (path,) = write_merged_baselines([frag], tmp_path / "out")
    doc = assert_valid(path, "baseline")
    assert doc["results"]["t.a@c"]["measured"] == 0.5
    assert merge_baseline_fragments([path])["m"]["results"] == doc["results"]  # a versioned one reads back


def test_nan_written_as_null_with_a_reason():
    text = documents.dumps({"measured": math.inf, "nested": {"x": [1.0, math.nan]}})
    doc = json.loads(text)
    assert doc == {"measured": None, "nested": {"x": [1.0, None], "null_reasons": {"x[1]": "NaN (not a number)"}},
                   "null_reasons": {"measured": "+Infinity"}}
