"""Claims catalogue, comparisons, depth bands and the baseline-vs-claim judgement of ``evaluate``."""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field, replace

import pytest

from bertattn_bench.base.errors import BenchError
from bertattn_bench.claims import registry
from bertattn_bench.claims.baselines import load_baseline
from bertattn_bench.claims.catalog import COMPARISONS, REFERENCE_DIR, Claim, baseline_key, evaluate, load_claims
from bertattn_bench.claims.registry import DEPTH_BANDS, Measurement, NotApplicable, in_band, relative_depth
from bertattn_bench.engine.batching import Skipped
from bertattn_bench.engine.model import ModelInfo

# ---- the catalogue ------------------------------------------------------------------------------------------


def test_every_reference_file_loads_with_known_metrics_and_unique_ids():
    files = sorted(REFERENCE_DIR.glob("*.toml"))
    assert files, "no reference_numbers/*.toml"
    claims = load_claims()
    metrics = registry.load_all_metrics()
    ids = [c.id for c in claims]
    assert len(ids) == len(set(ids))
    assert len(claims) >= len(files)
    for c in claims:
        assert c.metric in metrics, c.id

        assert c.comparison in COMPARISONS, c.id
        assert c.paper and c.family and c.source and c.statement and c.reference, c.id
        assert c.tolerance >= 0, c.id
        # the params fit the metric's signature (first argument: the pass result)
        inspect.signature(metrics[c.metric]).bind(None, **c.params, **({"passes": []} if c.inputs else {}))
        if c.comparison == "between":
            lo, hi = c.threshold
            assert lo <= hi, c.id
        elif c.comparison == "in_band":
            assert c.threshold in DEPTH_BANDS, c.id
        else:
            assert isinstance(c.threshold, (int, float)) and not isinstance(c.threshold, bool), c.id


def test_every_registered_metric_is_named_by_a_claim():
    """No dead registrations: a metric no claim names is either a missing claim or code to delete."""
    used = {c.metric for c in load_claims()}
    unused = sorted(name for name, fn in registry.load_all_metrics().items()
                    if fn.__module__.startswith("bertattn_bench.") and name not in used)  # not the tests' own
    assert not unused, f"registered metrics no claim names: {unused}"


def test_each_file_contributes_its_family():
    for path in sorted(REFERENCE_DIR.glob("*.toml")):
        family = path.stem.split("_", 1)[1]
        claims = load_claims(family=family)
        assert claims and all(c.family == family for c in claims), path


def test_family_filter_partitions_the_catalogue():
    all_claims = load_claims()
    families = {c.family for c in all_claims}
    assert sum(len(load_claims(family=f)) for f in families) == len(all_claims)
    assert load_claims(family="no_such_family") == []


# ---- bad catalogues -----------------------------------------------------------------------------------------

GOOD_ENTRY = """
[meta]
paper = "P"
family = "fam"
source = "S"

[[claim]]
id = "{id}"
section = "§1"
statement = "s"
reference = "r"
metric = "{metric}"
comparison = "{comparison}"
threshold = 1
rationale = "why"
tolerance = 0.5
tolerance_rationale = "why"
"""


def entry(id="x.one", metric="best_head_gap", comparison=">"):
    return GOOD_ENTRY.format(id=id, metric=metric, comparison=comparison)


def test_good_tmp_catalogue_loads(tmp_path):
    (tmp_path / "p_fam.toml").write_text(entry(), encoding="utf-8")
    (c,) = load_claims(tmp_path)
    assert (c.id, c.paper, c.family, c.source, c.threshold) == ("x.one", "P", "fam", "S", 1)
    assert c.params == {} and c.requires == {} and c.learned is True and c.reference_value is None


def test_invalid_toml_names_the_file(tmp_path):
    (tmp_path / "a_ok.toml").write_text(entry(), encoding="utf-8")
    bad = tmp_path / "b_bad.toml"
    bad.write_text('[meta]\npaper = "unterminated\n', encoding="utf-8")
    with pytest.raises(BenchError) as err:
        load_claims(tmp_path)
    assert str(bad) in str(err.value)
    assert "TOML" in str(err.value)


def test_unknown_field_names_the_file_and_claim(tmp_path):
    bad = tmp_path / "p_fam.toml"
    bad.write_text(entry() + 'colour = "red"\n', encoding="utf-8")
    with pytest.raises(BenchError) as err:
        load_claims(tmp_path)
    assert str(bad) in str(err.value) and "x.one" in str(err.value) and "colour" in str(err.value)


def test_missing_field_names_the_file(tmp_path):
    bad = tmp_path / "p_fam.toml"
    bad.write_text(entry().replace('tolerance = 0.5\n', ''), encoding="utf-8")
    with pytest.raises(BenchError) as err:
        load_claims(tmp_path)
    assert str(bad) in str(err.value) and "tolerance" in str(err.value)


def test_unknown_comparison_names_the_file(tmp_path):
    bad = tmp_path / "p_fam.toml"
    bad.write_text(entry(comparison="=="), encoding="utf-8")
    with pytest.raises(BenchError) as err:
        load_claims(tmp_path)
    assert str(bad) in str(err.value) and "==" in str(err.value)


def test_unknown_metric_is_an_error(tmp_path):
    (tmp_path / "p_fam.toml").write_text(entry(metric="no_such_metric_abc"), encoding="utf-8")
    with pytest.raises(BenchError, match="no_such_metric_abc"):
        load_claims(tmp_path)


def test_duplicate_ids_across_files(tmp_path):
    (tmp_path / "a_fam.toml").write_text(entry(id="dup"), encoding="utf-8")
    (tmp_path / "b_fam.toml").write_text(entry(id="dup"), encoding="utf-8")
    with pytest.raises(BenchError, match="dup"):
        load_claims(tmp_path)


def test_an_empty_or_missing_catalog_is_an_error_naming_where_it_looked(tmp_path):
    """A wheel installed without its catalog must not load 0 claims silently (issue 34)."""
    with pytest.raises(BenchError, match=f"no claims catalog: {tmp_path} holds no"):
        load_claims(tmp_path)
    with pytest.raises(BenchError, match="no claims catalog"):
        load_claims(tmp_path / "missing")


# ---- comparisons ----------------------------------------------------------------------------------------------

def claim(comparison: str, threshold, **kw) -> Claim:
    base = dict(id="t.claim", paper="P", section="§0", statement="s", family="fam", metric="test_constant_metric_xyz",
                comparison=comparison, threshold=threshold, reference="r", source="S", rationale="why",
                tolerance=0.5, tolerance_rationale="why")
    return Claim(**(base | kw))


@pytest.mark.parametrize("comparison, threshold, true_for, false_for", [
    (">", 1.0, [1.0001, 5], [1.0, 0.5, -3]),
    (">=", 1.0, [1.0, 1.5], [0.9999, -1]),
    ("<", 1.0, [0.9999, -7], [1.0, 2]),
    ("<=", 1.0, [1.0, 0.0], [1.0001, 9]),
    ("between", [0.0, 20.0], [0.0, 10, 20.0], [-0.001, 20.001]),
    (">", 0, [1e-9], [0, -1e-9]),
])
def test_compare(comparison, threshold, true_for, false_for):
    c = claim(comparison, threshold)
    for v in true_for:
        assert c.compare(v) is True, (comparison, threshold, v)
    for v in false_for:
        assert c.compare(v) is False, (comparison, threshold, v)


@pytest.mark.parametrize("layer, n_layers, band", [
    (1, 6, "early"), (2, 6, "early"), (3, 6, "middle"), (4, 6, "middle"), (5, 6, "late"), (6, 6, "late"),
    (1, 12, "early"), (4, 12, "early"), (5, 12, "middle"), (8, 12, "middle"), (9, 12, "late"), (12, 12, "late"),
])
def test_depth_bands_thirds(layer, n_layers, band):
    """Layer k (1-based) of L: thirds as in the registry comment (L1-4/L5-8/L9-12 of 12, L1-2/L3-4/L5-6 of 6)."""
    depth = relative_depth(layer - 1, n_layers)
    assert depth == pytest.approx(layer / n_layers)
    holding = [b for b in ("early", "middle", "late") if in_band(depth, b)]
    assert holding == [band]
    assert claim("in_band", band).compare(depth) is True
    for other in {"early", "middle", "late"} - {band}:
        assert claim("in_band", other).compare(depth) is False


@pytest.mark.parametrize("layer, n_layers, first_half", [(3, 6, True), (4, 6, False), (6, 12, True), (7, 12, False)])
def test_first_half_band(layer, n_layers, first_half):
    assert in_band(relative_depth(layer - 1, n_layers), "first_half") is first_half


def test_last_band_is_only_the_last_layer():
    assert in_band(relative_depth(5, 6), "last") and in_band(relative_depth(11, 12), "last")
    assert not in_band(relative_depth(4, 6), "last") and not in_band(relative_depth(10, 12), "last")


def test_zero_depth_means_no_peak_and_is_in_no_band():
    assert not any(in_band(0.0, b) for b in DEPTH_BANDS)


@pytest.mark.parametrize("comparison, threshold", [
    (">", 0), (">=", 0), ("<", 0), ("<=", 0), ("between", [-1e9, 1e9]), ("in_band", "early"), ("in_band", "last"),
    (">", float("-inf")), ("<", float("inf")),
])
def test_nan_never_holds(comparison, threshold):
    assert claim(comparison, threshold).compare(float("nan")) is False


def test_describe_comparison():
    assert claim("between", [0.0, 20.0]).describe_comparison() == "in [0.0, 20.0]"
    assert claim(">=", 10).describe_comparison() == ">= 10"
    assert claim("in_band", "early").describe_comparison() == "early (0.00, 0.33] of depth"


# ---- evaluate ---------------------------------------------------------------------------------------------

METRIC = "test_constant_metric_xyz"
NA_METRIC = "test_not_applicable_metric_xyz"


def _constant(pr, scale: float = 1.0) -> Measurement:
    """Reads the fake pass result: ``result`` is the value, ``n_examples`` the n."""
    return Measurement(pr.result * scale, n=pr.n_examples, n_unit="things", detail="constant", head="2-3", unit="u",
                       values={"layer": 4, "scale": scale})


def _not_applicable(pr) -> Measurement:
    raise NotApplicable("nothing to measure here")


for _name, _fn in ((METRIC, _constant), (NA_METRIC, _not_applicable)):
    if _name not in registry.METRICS:
        registry.metric(_name)(_fn)


def info(**kw) -> ModelInfo:
    base = dict(name="fake-model", slug="fake-model", n_layers=6, n_heads=12, max_positions=512, has_mlm_head=False,
                attn_implementation="bertattn_eager", device="cpu", cls_token_id=101, sep_token_id=102,
                pad_token_id=0)
    return ModelInfo(**(base | kw))


@dataclass
class FakePass:
    result: float
    n_examples: int = 100
    model: ModelInfo = field(default_factory=info)
    data: str = "fake data"
    corpus: str = "fake_corpus"
    family: str = "fam"
    skipped: Skipped = field(default_factory=Skipped)


def baseline(measured, holds, n=100, claim_id="t.claim", corpus="fake_corpus") -> dict:
    return {"results": {baseline_key(claim_id, corpus): {"measured": measured, "holds": holds, "n": n}}}


def test_registered_test_metrics():
    metrics = registry.load_all_metrics()
    assert metrics[METRIC] is _constant or metrics[METRIC].__name__ == "_constant"
    with pytest.raises(ValueError, match="registered twice"):
        registry.metric(METRIC)(lambda pass_result: None)  # another function under a taken name
    # the same function again (its module imported a second time, as after pytest's in-process runs): replaces it
    assert registry.metric(METRIC)(metrics[METRIC]) is metrics[METRIC]


def test_no_baseline_passed_follows_holds():
    c = claim(">", 1.0)
    out = evaluate(c, FakePass(2.0))
    assert (out.measured, out.holds, out.passed, out.baseline, out.baseline_ok) == (2.0, True, True, None, None)
    assert (out.n, out.n_unit, out.unit, out.head) == (100, "things", "u", "2-3")
    assert out.verdict == "holds"
    assert out.comparison == "> 1.0" and out.model == "fake-model" and out.corpus == "fake_corpus"
    out = evaluate(c, FakePass(0.5))
    assert (out.holds, out.passed, out.verdict) == (False, False, "does not hold")
    out = evaluate(c, FakePass(2.0), baseline={})
    assert out.passed is True and out.baseline_ok is None


def test_params_are_passed_to_the_metric():
    out = evaluate(claim(">", 1.0, params={"scale": 3.0}), FakePass(0.5))
    assert out.measured == 1.5 and out.holds is True


def test_named_values_reach_the_report_record():
    """A script reads a metric's named values from claims.json (scripts/spread.py: the structural probe's layer),
    never by parsing the detail's wording."""
    out = evaluate(claim(">", 1.0, params={"scale": 3.0}), FakePass(0.5))
    assert out.values == {"layer": 4, "scale": 3.0} and out.record()["values"] == {"layer": 4, "scale": 3.0}


def test_baseline_within_tolerance_passes_even_when_the_claim_does_not_hold():
    c = claim(">", 1.0, tolerance=0.5)
    out = evaluate(c, FakePass(0.5), baseline(0.8, holds=False))
    assert out.holds is False
    assert out.baseline == 0.8 and out.baseline_holds is False
    assert out.baseline_ok is True and out.passed is True


def test_baseline_at_exactly_the_tolerance_passes():
    c = claim(">", 10.0, tolerance=0.5)
    out = evaluate(c, FakePass(2.0), baseline(2.5, holds=False))
    assert out.baseline_ok is True and out.passed is True


def test_baseline_outside_tolerance_fails_even_when_the_claim_holds():
    c = claim(">", 1.0, tolerance=0.5)
    out = evaluate(c, FakePass(3.0), baseline(2.4, holds=True))
    assert out.holds is True
    assert out.baseline_ok is False and out.passed is False


def test_baseline_with_a_different_verdict_fails():
    # the recorded verdict differs although the value is the same (e.g. a baseline edited by hand): fails, and says so
    c = claim(">", 1.0, tolerance=0.05)
    out = evaluate(c, FakePass(1.2), baseline(1.2, holds=False))
    assert out.holds is True
    assert out.baseline_ok is False and out.passed is False
    assert "verdict" in out.check_failure and "value" not in out.check_failure


def test_verdict_inside_the_tolerance_band_is_reported_not_pinned():
    # a trained value whose tolerance band holds the threshold may land on either side on another machine: within
    # tolerance it passes, and the detail says the verdict is within noise; outside the tolerance it still fails
    c = claim(">", 1.0, tolerance=0.5)
    out = evaluate(c, FakePass(1.1), baseline(0.9, holds=False))
    assert out.holds is True and out.baseline_ok is True and "within noise" in out.detail
    out = evaluate(c, FakePass(1.5), baseline(0.9, holds=False))
    assert out.baseline_ok is False and out.check_failure.startswith("value off by +0.6")
    assert claim(">", 1.0, tolerance=0.05).verdict_pinned(0.9) and not c.verdict_pinned(0.9)


def test_baseline_with_a_different_n_fails():
    c = claim(">", 1.0, tolerance=0.5)
    out = evaluate(c, FakePass(2.0, n_examples=100), baseline(2.0, holds=True, n=99))
    assert out.baseline_ok is False and out.passed is False
    out = evaluate(c, FakePass(2.0, n_examples=100), baseline(2.0, holds=True, n=100))
    assert out.baseline_ok is True and out.passed is True


def test_baseline_without_n_fails():
    c = claim(">", 1.0)
    b = {"results": {baseline_key("t.claim", "fake_corpus"): {"measured": 2.0, "holds": True}}}
    assert evaluate(c, FakePass(2.0), b).baseline_ok is False


def test_baseline_with_no_measured_value_fails():
    c = claim(">", 1.0)
    out = evaluate(c, FakePass(2.0), baseline(None, holds=True))
    assert out.baseline_ok is False and out.passed is False


def test_baseline_of_another_corpus_or_claim_is_ignored():
    c = claim(">", 1.0)
    out = evaluate(c, FakePass(0.0), baseline(0.0, holds=False, corpus="other_corpus"))
    assert out.baseline_ok is None and out.passed is False  # follows holds
    out = evaluate(c, FakePass(2.0), baseline(0.0, holds=False, claim_id="other.claim"))
    assert out.baseline_ok is None and out.passed is True


def test_nan_measurement_never_passes():
    c = claim(">", 1.0)
    out = evaluate(c, FakePass(float("nan")))
    assert out.holds is False and out.passed is False
    out = evaluate(c, FakePass(float("nan")), baseline(float("nan"), holds=False))
    assert out.baseline_ok is False and out.passed is False


def test_skipped_examples_are_reported_in_the_detail():
    pr = FakePass(2.0, skipped=Skipped(n=3, max_tokens=128, indices=[1, 2, 3]))
    out = evaluate(claim(">", 1.0), pr)
    assert out.detail == "constant [3 example(s) over 128 word pieces skipped]"
    assert evaluate(claim(">", 1.0), FakePass(2.0)).detail == "constant"


def test_unmet_requirements_skip_the_claim():
    c = claim(">", 1.0, requires={"min_layers": 12})
    out = evaluate(c, FakePass(2.0, model=info(n_layers=6)), baseline(2.0, holds=True))
    assert out.skipped and "12 layers" in out.skipped and "fake-model" in out.skipped
    assert (out.measured, out.holds, out.passed, out.baseline_ok) == (None, None, None, None)
    assert out.verdict == "skipped" and out.n == 100 and out.n_unit == "examples"
    out = evaluate(c, FakePass(2.0, model=info(n_layers=12)))
    assert out.skipped is None and out.passed is True
    c = claim(">", 1.0, requires={"mlm_head": True})
    assert "masked-LM" in evaluate(c, FakePass(2.0)).skipped
    assert evaluate(c, FakePass(2.0, model=info(has_mlm_head=True))).skipped is None


def test_not_applicable_metric_skips_with_its_reason():
    out = evaluate(claim(">", 1.0, metric=NA_METRIC), FakePass(2.0))
    assert out.skipped == "nothing to measure here"
    assert out.passed is None and out.holds is None


def test_record_round_trip_keys():
    out = evaluate(claim("between", [0, 5]), FakePass(2.0))
    rec = out.record()
    assert rec["claim_id"] == "t.claim" and rec["measured"] == 2.0 and rec["holds"] is True
    assert rec["comparison"] == "in [0, 5]"


def test_load_baseline_missing_and_invalid(tmp_path):
    assert load_baseline("no-such-model", tmp_path) == {}
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(BenchError) as err:
        load_baseline("broken", tmp_path)
    assert str(tmp_path / "broken.json") in str(err.value)


def test_recorded_baselines_name_known_claims():
    """Every key of every committed baseline file is <known claim id>@<corpus> with the fields evaluate reads."""
    ids = {c.id for c in load_claims()}
    for path in sorted((REFERENCE_DIR / "baselines").glob("*.json")):
        doc = load_baseline(path.stem)
        for key, rec in doc.get("results", {}).items():
            claim_id, _, corpus = key.rpartition("@")
            assert claim_id in ids, (path, key)
            assert corpus, (path, key)
            assert {"measured", "holds", "n"} <= set(rec), (path, key)
            assert isinstance(rec["measured"], (int, float)) and not math.isnan(rec["measured"]), (path, key)


# ---- report (the claim table consumes ClaimOutcome) -------------------------------------------------------------

def test_report_check_column():
    from bertattn_bench.report.claims_report import rows

    ok = evaluate(claim(">", 1.0), FakePass(0.5), baseline(0.5, holds=False))
    bad = evaluate(replace(claim(">", 1.0), id="t.other"), FakePass(3.0))
    skipped = evaluate(claim(">", 1.0, metric=NA_METRIC, id="t.z"), FakePass(1.0))
    table = {r["claim"]: r for r in rows([skipped, bad, ok])}
    assert table["t.claim"]["check"] == "PASS (baseline 0.5)"
    assert table["t.claim"]["verdict"] == "does not hold"
    assert table["t.other"]["check"] == "PASS" and table["t.other"]["verdict"] == "holds"
    assert table["t.z"]["check"] == "skip" and table["t.z"]["verdict"].startswith("skipped: ")
    assert table["t.other"]["measured"] == "3 u [2-3]"


def test_report_with_a_recorded_baseline_without_value():
    """evaluate() accepts a recorded ``"measured": null`` (baseline_ok False, baseline None); the table must not crash."""
    from bertattn_bench.report.claims_report import rows, terminal_table

    out = evaluate(claim(">", 1.0), FakePass(2.0), baseline(None, holds=True))
    assert out.baseline is None and out.baseline_ok is False
    (row,) = rows([out])
    assert row["check"].startswith("FAIL")
    assert "FAIL" in terminal_table([out])


def test_write_report_files(tmp_path):
    import json

    from bertattn_bench.report.claims_report import write_report

    outs = [evaluate(claim(">", 1.0), FakePass(2.0)),
            evaluate(claim(">", 1.0, metric=NA_METRIC, id="t.z"), FakePass(1.0))]
    paths = write_report(outs, tmp_path / "rep")
    assert [p.name for p in paths] == ["claims.md", "claims.csv", "claims.json", "matrix.md", "matrix.csv", "matrix.html",
                                      "matrix.json"]
    records = json.loads((tmp_path / "rep" / "claims.json").read_text(encoding="utf-8"))["records"]
    assert [(r["claim_id"], r["verdict"], r["passed"]) for r in records] == [("t.claim", "holds", True),
                                                                             ("t.z", "skipped", None)]
    assert "t.claim" in (tmp_path / "rep" / "claims.md").read_text(encoding="utf-8")
    assert (tmp_path / "rep" / "claims.csv").read_text(encoding="utf-8").count("\n") == 3


def test_report_files_do_not_depend_on_the_order_outcomes_arrived_in(tmp_path):
    """pytest-xdist workers finish in any order: the files must be the same as a serial run's."""
    from bertattn_bench.report.claims_report import write_report

    outs = [evaluate(claim(">", 1.0, id=f"t.{k}"), FakePass(v, corpus=c)) for k, v, c in
            [("b", 2.0, "x"), ("a", 0.5, "y"), ("a", 3.0, "x")]]
    twin = evaluate(claim(">", 1.0, id="t.a"), FakePass(0.2, corpus="x"))
    twin.negative_control = True
    outs.append(twin)
    write_report(outs, tmp_path / "one")
    write_report(outs[::-1], tmp_path / "two")
    for name in ("claims.md", "claims.csv", "claims.json"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name


def _difference(pr, passes):
    return Measurement(pr.result - passes[0].result, 10, "x", detail=f"{pr.result} - {passes[0].result}")


def test_claim_over_two_passes_reads_the_other_and_names_it():
    if "test_difference_metric_xyz" not in registry.METRICS:
        registry.metric("test_difference_metric_xyz")(_difference)
    c = claim(">", 0.0, metric="test_difference_metric_xyz", inputs=[{"corpus": "other_corpus"}])
    other = FakePass(1.5, corpus="other_corpus", data="other data")
    out = evaluate(c, FakePass(2.0), None, others=lambda cl: [other])
    assert out.measured == pytest.approx(0.5) and out.holds is True
    assert "other_corpus" in out.data and "other data" in out.data
    # without a resolver (e.g. a caller that cannot fetch passes) the claim is skipped with the reason, not crashed
    out = evaluate(c, FakePass(2.0), None)
    assert out.skipped and "more pass" in out.skipped

    def missing(cl):
        raise registry.NotApplicable("needs the fam pass on other_corpus, which this run does not include")
    assert "does not include" in evaluate(c, FakePass(2.0), None, others=missing).skipped
    # judged once, on the named corpus's pass
    c2 = claim(">", 0.0, metric="test_difference_metric_xyz", inputs=[{"corpus": "x"}], judged_on="sts-b")
    assert "judged once" in evaluate(c2, FakePass(2.0), None, others=lambda cl: [other]).skipped


def test_bert_base_claims_gate_on_shape_not_name(monkeypatch):
    c = claim(">", 0.0, requires={"min_layers": 12, "model_type": "bert-base"})
    folder = replace(info(), name="/models/my-finetune", n_layers=12, n_heads=12, extra={"hidden_size": 768})
    assert c.unmet_requirement(folder) is None  # a real bert-base in a folder with another name
    named = replace(info(), name="camembert-base-but-small", n_layers=12, n_heads=12, extra={"hidden_size": 256})
    assert "needs its shape" in c.unmet_requirement(named)  # the name alone does not make it bert-base
    monkeypatch.setenv("BERTATTN_ASSUME_SHAPE", "bert-base")
    from bertattn_bench.base.settings import from_environment  # the faces' one reader (issue 44)

    assert c.unmet_requirement(named, assume_shape=from_environment()["assume_shape"]) is None


def test_tolerance_rationales_point_at_sections_that_exist():
    """A rationale that sends its measurements to docs/tolerances.md#anchor names a section that page has (a
    renamed claim or a dropped section fails here, not in a reader's browser)."""
    import re

    page = REFERENCE_DIR.parent / "docs" / "tolerances.md"
    anchors = {h[3:].strip().replace(".", "") for h in page.read_text().splitlines() if h.startswith("## ")}
    pointers = [(c.id, m) for c in load_claims() for m in re.findall(r"docs/tolerances\.md#(\S+)", c.tolerance_rationale)]
    assert pointers, "no rationale points at docs/tolerances.md"
    assert [(cid, a) for cid, a in pointers if a not in anchors] == []
    assert all(a == cid.replace(".", "") for cid, a in pointers), pointers


def test_a_figure_writer_with_a_result_type_is_given_only_those_passes():
    """Issue 62: the "is this my result?" step of every figure writer done once, by the registry: a writer registered
    with ``result=`` receives only the passes whose result is one (not a pass that measured nothing, not another
    family's), called directly or through FIGURES; without ``result=`` it receives every pass."""
    from types import SimpleNamespace

    class Mine:
        pass

    seen = []

    def draw(pass_results, directory):
        seen.append([p.name for p in pass_results])
        return []

    name = "test_family_figure_filter_xyz"
    try:
        writer = registry.figure(name, result=Mine)(draw)
        passes = [SimpleNamespace(name="a", result=Mine()), SimpleNamespace(name="b", result=registry.NothingToMeasure("x")),
                  SimpleNamespace(name="c", result=3.0), SimpleNamespace(name="d", result=Mine())]
        writer(passes, None)
        registry.FIGURES[name](passes, None)
        assert seen == [["a", "d"], ["a", "d"]] and writer.__name__ == "draw"
        registry.FIGURES.pop(name)
        registry.figure(name)(draw)(passes, None)
        assert seen[-1] == ["a", "b", "c", "d"]
    finally:
        registry.FIGURES.pop(name, None)


def test_a_figure_writer_of_one_pass_is_called_once_per_pass_of_its_type():
    """Issue 62: the loop over the passes (and the pyplot import) done once, by the registry: a writer registered
    with ``each=True`` draws one pass, ``fn(pr, plt, directory)``; the registered writer takes the list, calls it
    for each pass of its result type in order with the Agg pyplot, and returns their paths concatenated."""
    from types import SimpleNamespace

    from bertattn_bench.base.plotting import pyplot

    class Mine:
        pass

    calls = []

    def draw(pr, plt, directory):
        calls.append((pr.name, plt, directory))
        return [f"{directory}/{pr.name}-{k}.png" for k in range(2 if pr.name == "a" else 1)]

    name = "test_family_figure_each_xyz"
    try:
        writer = registry.figure(name, result=Mine, each=True)(draw)
        passes = [SimpleNamespace(name="a", result=Mine()), SimpleNamespace(name="b", result=3.0),
                  SimpleNamespace(name="c", result=Mine())]
        assert writer(passes, "D") == ["D/a-0.png", "D/a-1.png", "D/c-0.png"]
        assert [c[0] for c in calls] == ["a", "c"] and all(c[1] is pyplot() and c[2] == "D" for c in calls)
        assert registry.FIGURES[name] is writer and writer.__name__ == "draw" and writer([], "D") == []
    finally:
        registry.FIGURES.pop(name, None)
