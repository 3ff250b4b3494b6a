"""Every file the suite reads back is checked against its shipped schema (issue 45): a malformed baseline, a
--compare-to file, a --record-baseline target, a claims report for merge/matrix stop with exit 4 naming the file and
the entry; a finished run's values are never lost at the end."""
import json
import warnings

import pytest
from test_baselines import _session, rec

from bertattn_bench.base.documents import checked, envelope
from bertattn_bench.base.errors import BenchError
from bertattn_bench.claims.baselines import BaselineWarning, check_record_target, load_baseline_file
from bertattn_bench.runner.options import RunOptions

BAD = {"results": {"clark.x@y": 5}}  # an entry that is not an object (was an AttributeError traceback, exit 1)
GOOD_ENTRY = {"measured": 1.0, "n": 3, "holds": True}


def test_diff_of_a_wrong_shape_baseline_is_exit_4_naming_file_and_entry(tmp_path, capsys):
    from bertattn_bench.faces.cli import main

    (tmp_path / "bad.json").write_text(json.dumps(BAD))
    (tmp_path / "good.json").write_text(json.dumps({"results": {"clark.x@y": GOOD_ENTRY}}))
    assert main(["diff", str(tmp_path / "good.json"), str(tmp_path / "bad.json")]) == 4
    err = capsys.readouterr().err
    assert str(tmp_path / "bad.json") in err and "clark.x@y" in err and "Traceback" not in err


@pytest.mark.parametrize("doc, entry", [
    (BAD, "clark.x@y"),
    ({"results": {"a@b": {"measured": "high", "n": 3, "holds": True}}}, "a@b"),  # a value of the wrong type
    ({"results": {"a@b": {"measured": 1.0, "holds": True}}}, "a@b"),  # n missing
    (envelope("baseline", {"provenance": {"model": "m", "date": "d"}, "results": {"a@b": []}}), "a@b"),
    (envelope("baseline", {"provenance": {"model": 3, "date": "d"}, "results": {}}), "model"),
])
def test_a_malformed_baseline_names_its_entry(tmp_path, doc, entry):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BenchError) as exc:
        load_baseline_file(path)
    assert str(path) in str(exc.value) and entry in str(exc.value)


def test_compare_to_a_malformed_file_stops_at_start_up(tmp_path):
    (tmp_path / "other.json").write_text(json.dumps(BAD))
    with pytest.raises(BenchError, match="clark.x@y"):
        RunOptions(compare_to=str(tmp_path / "other.json")).check()


def test_a_malformed_record_target_is_found_at_start_up(tmp_path):
    from bertattn_bench.engine.model import EMBEDDED_NAME

    (tmp_path / f"{EMBEDDED_NAME}.json").write_text("{not json")
    (tmp_path / "unrelated.json").write_text("{not json")  # not a target of this run: left alone
    with pytest.raises(BenchError, match=f"--record-baseline .*{EMBEDDED_NAME}.json.*not JSON"):
        RunOptions(models=["embedded"], record_baseline=tmp_path).check()
    RunOptions(models=["random:embedded@0"], record_baseline=tmp_path).check()  # a twin records nothing
    (tmp_path / f"{EMBEDDED_NAME}.json").unlink()
    RunOptions(models=["embedded"], record_baseline=tmp_path).check()
    (tmp_path / "m.json").mkdir()
    with pytest.raises(BenchError, match="not a file"):
        check_record_target(tmp_path, ["m"])


def test_an_unmergeable_baseline_keeps_the_run_values_beside_it(tmp_path):
    out = tmp_path / "baselines"
    out.mkdir()
    (out / "m.json").write_text(json.dumps(BAD))  # broke after start-up (or the start-up check was skipped)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paths = rec(_session(tmp_path, "c.one", "a", 1.0, []), out, date="2026-01-01T00:00:00+00:00")
    assert paths == [out / "m.unmerged-20260101T000000.json"]
    assert json.loads(paths[0].read_text())["results"]["c.one@a"]["measured"] == 1.0
    assert json.loads((out / "m.json").read_text()) == BAD  # the old file untouched
    assert any(issubclass(w.category, BaselineWarning) and "m.unmerged-" in str(w.message) for w in caught)


def test_a_claims_report_with_a_malformed_record_is_named(tmp_path):
    from bertattn_bench.report.matrix import read_records

    record = {"claim_id": "c", "model": "m", "corpus": "x", "paper": "P", "section": "§1", "measured": "much"}
    (tmp_path / "claims.json").write_text(json.dumps(envelope("claims", {"complete": True, "missing": [],
                                                                          "records": [record]})))
    with pytest.raises(BenchError, match="claims.json: malformed.*records"):
        read_records(tmp_path)


def test_an_older_unversioned_document_is_checked_where_it_is_indexed():
    assert checked({"results": {"a@b": GOOD_ENTRY}}, "baseline", "f") == {"results": {"a@b": GOOD_ENTRY}}
    with pytest.raises(BenchError, match="a run document, not a baseline"):
        checked(envelope("run", {}), "baseline", "f")
