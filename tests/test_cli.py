"""The command-line wrappers build the pytest command lines the README documents."""
import pytest

from bertattn_bench.faces.cli import pytest_args


def test_record_adds_the_record_option():
    args = pytest_args(["record", "--model", "embedded"])
    assert args[-1] == "--record-baseline" and "--model" in args and args[0].endswith("benchmarks")


def test_compare_names_model_a():
    args = pytest_args(["compare", "--model", "random:embedded", "--against", "embedded"])
    assert args[args.index("--compare-to") + 1] == "embedded"


def test_compare_without_model_a_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        pytest_args(["compare", "--model", "random:embedded"])
    assert exc.value.code == 4
    assert capsys.readouterr().err == "ERROR: bertattn-bench: compare needs --against MODEL_A (see --help)\n"


def test_unknown_command_is_one_line_exit_4(capsys):
    with pytest.raises(SystemExit) as exc:
        pytest_args(["recrod"])
    err = capsys.readouterr().err
    assert exc.value.code == 4 and err.count("\n") == 1 and "invalid choice: 'recrod'" in err


def test_diff_lists_moved_values_and_flipped_verdicts(tmp_path, capsys):
    """`diff OLD NEW`: unchanged entries are left out; a moved value, a changed n, a flipped verdict (inconclusive
    counts as its own verdict) and a key on one side only are listed; a bad file is one clear line."""
    import json

    from bertattn_bench.claims.baselines import baseline_diff
    from bertattn_bench.faces.cli import main

    def entry(v, n=10, holds=True, **kw):
        return {"measured": v, "n": n, "holds": holds, **kw}

    old = {"results": {"a@x": entry(1.0), "b@x": entry(2.0), "c@x": entry(3.0), "d@x": entry(4.0, holds=False),
                       "e@x": entry(5.0), "z.f@x": entry(1.0)}}
    new = {"results": {"a@x": entry(1.0), "b@x": entry(2.5), "c@x": entry(3.0, n=11),
                       "d@x": entry(4.0, holds=False, inconclusive=True,
                                    detail="[1.96 SE interval 3.5 .. 4.5 (SE 0.25): inside]"),
                       "g@x": entry(7.0), "z.f@x": entry(2.0)}}
    rows = {r["key"]: r for r in baseline_diff(old, new, prefix="")}
    assert set(rows) == {"b@x", "c@x", "d@x", "e@x", "g@x", "z.f@x"}
    assert not rows["b@x"]["flipped"] and rows["d@x"]["flipped"] and rows["d@x"]["interval_after"] == "3.5 .. 4.5"
    assert rows["e@x"]["verdict_after"] == "—" and rows["g@x"]["verdict_before"] == "—"
    assert {r["key"] for r in baseline_diff(old, new, prefix="z.")} == {"z.f@x"}
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    assert main(["diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--prefix", "z."]) == 0
    out = capsys.readouterr().out
    assert "| z.f@x | 1 (10) | 2 (10) |" in out and "1 moved, 0 verdict(s) changed" in out
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["diff", str(tmp_path / "bad.json"), str(tmp_path / "new.json")]) == 4  # input error: 4, not 1
    assert "bad.json: not JSON" in capsys.readouterr().err


def _baseline(**results):
    return {"results": {k: {"measured": v, "n": 10, "holds": h} for k, (v, h) in results.items()}}


@pytest.mark.parametrize("new, fail_on, status", [
    ({"kov.sst2_sep_highest@x": (0.5, True)}, "flips+values", 0),  # unchanged
    ({"kov.sst2_sep_highest@x": (0.5, False)}, "flips+values", 1),  # verdict flipped
    ({"kov.sst2_sep_highest@x": (0.5, False)}, "values", 0),
    ({"kov.sst2_sep_highest@x": (0.5, False)}, "never", 0),
    ({"kov.sst2_sep_highest@x": (99.0, True)}, "flips+values", 1),  # value outside the catalog tolerance
    ({"kov.sst2_sep_highest@x": (99.0, True)}, "flips", 0),
    ({"kov.sst2_sep_highest@x": (0.5, True), "new.claim@x": (1.0, True)}, "flips+values", 0),  # added: not a flip
    ({"kov.sst2_sep_highest@x": (0.5, True), "new.claim@x": (1.0, True)}, "any", 1),
])
def test_diff_exit_status_follows_fail_on(tmp_path, capsys, new, fail_on, status):
    import json

    from bertattn_bench.faces.cli import main

    (tmp_path / "old.json").write_text(json.dumps(_baseline(**{"kov.sst2_sep_highest@x": (0.5, True)})))
    (tmp_path / "new.json").write_text(json.dumps(_baseline(**new)))
    assert main(["diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--fail-on", fail_on]) == status
    out = capsys.readouterr().out
    assert ("FAILED" in out and "kov.sst2_sep_highest@x" in out.split("FAILED")[1]) or status == 0 or fail_on == "any"


def test_diff_usage_errors_exit_4(tmp_path, capsys):
    from bertattn_bench.faces.cli import main

    assert main(["diff", str(tmp_path / "missing.json"), str(tmp_path / "missing.json")]) == 4
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["diff", "a", "b", "--fail-on", "sometimes"])
    assert exc.value.code == 4


def test_plugin_is_registered_as_a_pytest11_entry_point_named_as_its_module():
    """pyproject's pytest11 entry point loads the plugin wherever the package is installed; its name is the module's,
    so conftest.py's ``pytest_plugins`` (for checkouts run without installing) cannot register it a second time."""
    import importlib
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    eps = project["entry-points"]["pytest11"]
    assert eps == {"bertattn_bench.faces.pytest_plugin": "bertattn_bench.faces.pytest_plugin"}
    assert hasattr(importlib.import_module("bertattn_bench.faces.pytest_plugin"), "pytest_addoption")


def test_diff_does_not_judge_other_limits_samples():
    """A baseline recorded with --limit 50 against the full one: values and verdicts with another n are other
    samples', listed but not failed (except under --fail-on any); with the same limit they are judged."""
    from bertattn_bench.claims.baselines import baseline_diff, diff_failures

    old = {"provenance": {"limit": None}, "results": {"k@x": {"measured": 1.0, "n": 5211, "holds": True}}}
    new = {"provenance": {"limit": 50}, "results": {"k@x": {"measured": 9.0, "n": 122, "holds": False}}}
    rows = baseline_diff(old, new)
    assert not rows[0]["comparable"] and diff_failures(rows, tolerances={"k": 0.5}) == []
    assert diff_failures(rows, "any", tolerances={"k": 0.5})
    new["provenance"]["limit"] = None
    assert diff_failures(baseline_diff(old, new), tolerances={"k": 0.5}) == ["k@x: verdict holds -> does not hold"]
