"""The dependency family's claims over several relations (Clark §4.2's directions, the abstract's four relations over
75%) are counts: their bounds say how many relations are *shown* either way, so a tie or a gap a few arcs could
reverse (a --limit sample, an untrained model) makes the count inconclusive instead of a verdict."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from bertattn_bench.claims import stats
from bertattn_bench.claims.catalog import evaluate, load_claims
from bertattn_bench.families.common.dependency_stats import TABLE1, DependencyResult, OffsetBaseline
from bertattn_bench.families.dependency import count_relations_over, direction_agreement, max_relations_per_head

RELATIONS = tuple(TABLE1[1:])  # the 14 relations of Clark's Table 1 (All apart)


def result(d2h: dict, h2d: dict, n: dict) -> DependencyResult:
    """A result with one layer and one head per direction: ``d2h[r]`` / ``h2d[r]`` arcs of relation r right of
    ``n[r]``; every other head 0 right."""
    rels = RELATIONS
    correct = torch.zeros(1, 2, len(rels), 2)
    for i, r in enumerate(rels):
        correct[0, 0, i, 0] = d2h[r]
        correct[0, 1, i, 1] = h2d[r]
    n_arcs = torch.tensor([float(n[r]) for r in rels])
    return DependencyResult(relations=rels, correct=correct, n_arcs=n_arcs,
                            baselines={r: OffsetBaseline(10.0, 1, n[r], 10.0) for r in rels},
                            n_sentences=10, n_words=100, n_split_words=0)


def as_pass(res: DependencyResult):
    return SimpleNamespace(result=res)


def expected_wins(n: int, win: int, lose: int) -> tuple[dict, dict, dict]:
    """Every relation with ``n`` arcs, the expected direction ``win`` right, the other ``lose``."""
    d2h = {r: (lose if r == "pobj" else win) for r in RELATIONS}
    h2d = {r: (win if r == "pobj" else lose) for r in RELATIONS}
    return d2h, h2d, {r: n for r in RELATIONS}


def claim(cid: str):
    return next(c for c in load_claims() if c.id == cid)


def test_wilson_and_agresti_caffo_by_hand():
    # Wilson, 8 of 10, z = 1.96: centre (0.8 + 0.19208) / 1.38416 = 0.71676, half 1.96 sqrt(0.016 + 0.009604) / 1.38416
    lo, hi = stats.wilson_bounds(8, 10)
    assert lo == pytest.approx(100 * (0.71676 - 0.22657), abs=0.01) and hi == pytest.approx(100 * (0.71676 + 0.22657),
                                                                                            abs=0.01)
    assert stats.wilson_bounds(0, 5)[0] == 0.0 and stats.wilson_bounds(0, 5)[1] > 30  # a real interval at 0 of n
    assert stats.wilson_bounds(5, 5)[1] == 100.0 and stats.wilson_bounds(5, 5)[0] < 70
    # Agresti-Caffo, 9 of 10 vs 5 of 10: (10/12 - 6/12) ± 1.96 sqrt((10/12)(2/12)/12 + (6/12)(6/12)/12)
    se = ((10 / 12) * (2 / 12) / 12 + 0.25 / 12) ** 0.5
    lo, hi = stats.proportion_difference_bounds(9, 10, 5, 10)
    assert lo == pytest.approx(100 * (4 / 12 - 1.96 * se)) and hi == pytest.approx(100 * (4 / 12 + 1.96 * se))
    lo, hi = stats.proportion_difference_bounds(2, 2, 2, 2)  # a tie of two perfect scores: around 0, not [0, 0]
    assert lo < 0 < hi and lo == pytest.approx(-hi)
    import numpy as np  # elementwise over arrays, the same numbers
    lo, hi = stats.proportion_difference_bounds(np.array([9, 2]), np.array([10, 2]), np.array([5, 2]), 10)
    assert lo[0] == pytest.approx(100 * (4 / 12 - 1.96 * se)) and hi[0] == pytest.approx(100 * (4 / 12 + 1.96 * se))


def test_clear_directions_hold_and_ties_do_not_count_either_way():
    m = direction_agreement(as_pass(result(*expected_wins(1000, 600, 300))))
    assert m.value == 14 and m.bounds == (14.0, 14.0) and ")(?)" not in m.detail and "h(?)" not in m.detail
    out = evaluate(claim("clark.dep_direction"), _pass_result(result(*expected_wins(1000, 600, 300))))
    assert out.verdict == "holds" and not out.inconclusive

    # every relation tied on two arcs (what a best-of-heads search finds on a tiny sample): the point count is 13
    # (a d→h tie counts for d→h; pobj needs h→d strictly better), but no relation is shown either way
    m = direction_agreement(as_pass(result(*expected_wins(2, 2, 2))))
    assert m.value == 13 and m.bounds == (0.0, 14.0) and m.detail.count("(?)") == 14
    out = evaluate(claim("clark.dep_direction"), _pass_result(result(*expected_wins(2, 2, 2))))
    assert out.inconclusive and out.holds  # the point count reaches 13; the bounds say it is not a verdict


def test_one_relation_shown_the_wrong_way_and_one_undecided():
    d2h, h2d, n = expected_wins(1000, 600, 300)
    d2h["nn"], h2d["nn"] = 300, 600  # shown the other way
    d2h["prep"], h2d["prep"] = 500, 490  # within noise
    m = direction_agreement(as_pass(result(d2h, h2d, n)))
    assert m.value == 13 and m.bounds == (12.0, 13.0)
    assert "nn:h→d(!)" in m.detail and "prep:d→h(?)" in m.detail and "shown worse for 1" in m.detail
    out = evaluate(claim("clark.dep_direction"), _pass_result(result(d2h, h2d, n)))
    assert out.inconclusive  # >= 13: 12 shown, 13 possible
    d2h["prep"] = 600  # now shown: 13 shown, 13 possible -> holds, exactly at the threshold (>= 13)
    out = evaluate(claim("clark.dep_direction"), _pass_result(result(d2h, h2d, n)))
    assert out.verdict == "holds" and not out.inconclusive and out.interval == [13.0, 13.0]
    d2h["aux"], h2d["aux"] = 300, 600  # two shown the wrong way: at most 12 -> does not hold
    out = evaluate(claim("clark.dep_direction"), _pass_result(result(d2h, h2d, n)))
    assert out.verdict == "does not hold" and not out.inconclusive


def test_four_over_75_bounds_by_wilson():
    d2h, h2d, n = expected_wins(400, 320, 0)  # 80% on 400 arcs: Wilson 75.8 .. 83.7, shown above 75
    m = count_relations_over(as_pass(result(d2h, h2d, n)), relations=("dobj", "det", "pobj", "poss"), threshold=75.0)
    assert m.value == 4 and m.bounds == (4.0, 4.0)
    d2h["poss"] = 304  # 76% on 400: above 75, not shown (Wilson 71.6 .. 80.0)
    m = count_relations_over(as_pass(result(d2h, h2d, n)), relations=("dobj", "det", "pobj", "poss"), threshold=75.0)
    assert m.value == 4 and m.bounds == (3.0, 4.0)
    out = evaluate(claim("clark.dep_four_over_75"), _pass_result(result(d2h, h2d, n)))
    assert out.holds and out.inconclusive
    d2h["dobj"] = 200  # 50%: shown at or below 75 -> at most 3 of 4: does not hold
    out = evaluate(claim("clark.dep_four_over_75"), _pass_result(result(d2h, h2d, n)))
    assert out.verdict == "does not hold" and not out.inconclusive


def test_no_head_many_relations_is_an_absence_judged_by_its_bounds():
    five = RELATIONS[:5]
    d2h = {r: (600 if r in five else 100) for r in RELATIONS}  # head 0: 60% on five relations, 10% (= offset) else
    h2d = {r: 0 for r in RELATIONS}
    big = {r: 1000 for r in RELATIONS}
    m = max_relations_per_head(as_pass(result(d2h, h2d, big)), margin=15.0)
    assert m.value == 5 and m.bounds == (5.0, 5.0) and m.head == "1-1"
    out = evaluate(claim("clark.no_head_many_relations"), _pass_result(result(d2h, h2d, big)))
    assert out.verdict == "does not hold" and not out.inconclusive
    # the same shares on four arcs each: 3 of 4 right is 75% against an offset of 10% (0 of 4 counted), a 65-point
    # gap no interval of four arcs can show; the absence (<= 3) is not shown either: inconclusive
    d2h = {r: (3 if r in five else 0) for r in RELATIONS}
    m = max_relations_per_head(as_pass(result(d2h, h2d, {r: 4 for r in RELATIONS})), margin=15.0)
    assert m.value == 5 and m.bounds == (0.0, 14.0)
    out = evaluate(claim("clark.no_head_many_relations"), _pass_result(result(d2h, h2d, {r: 4 for r in RELATIONS})))
    assert out.inconclusive
    # no head near the margin on many arcs: the absence holds
    d2h = {r: (600 if r in five[:2] else 100) for r in RELATIONS}
    out = evaluate(claim("clark.no_head_many_relations"), _pass_result(result(d2h, h2d, big)))
    assert out.verdict == "holds" and not out.inconclusive and out.interval == [2.0, 2.0]


@pytest.mark.parametrize("comparison, threshold, interval, inside", [
    (">=", 13, [13.0, 14.0], False), (">=", 13, [12.0, 13.0], True), (">=", 13, [11.0, 12.0], False),
    (">", 13, [13.0, 14.0], True), (">", 13, [14.0, 15.0], False), (">", 13, [12.0, 13.0], False),
    ("<=", 2, [2.0, 3.0], True), ("<=", 2, [1.0, 2.0], False), ("<", 2, [1.0, 2.0], True), ("<", 2, [2.0, 3.0], False),
    ("between", [2, 5], [2.0, 5.0], False), ("between", [2, 5], [1.0, 2.0], True), ("between", [2, 5], [5.0, 6.0], True),
    ("between", [2, 5], [0.0, 1.9], False), (">=", 13, [13.0, 13.0], False),
])
def test_the_threshold_is_inside_exactly_where_the_bounds_hold_both_sides(comparison, threshold, interval, inside):
    c = dataclasses.replace(claim("clark.dep_direction"), comparison=comparison, threshold=threshold)
    assert c.threshold_inside(interval) is inside


def _pass_result(res: DependencyResult):
    from test_claims_registry import FakePass

    fp = FakePass(0.0)
    fp.result = res
    return fp
