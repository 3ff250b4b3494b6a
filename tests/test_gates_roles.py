"""The gates' comparisons with head roles and across seeds (families/gates): role heads read from a planted roles
result (positional, syntactic by Voita's 10-point rule, first-layer rare-word), the share of them the gates keep by
hand, one λ sweep per seed (the PER_SEED views the judge reads), Michel's counts, the per-seed training guard."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bertattn_bench.claims.checks import per_seed_values
from bertattn_bench.families.common.dependency_stats import RELATIONS, DependencyResult, OffsetBaseline
from bertattn_bench.families.gates.metrics import gates_keep_positional, gates_keep_roles, gates_pruned_share
from bertattn_bench.families.gates.roles_read import role_heads
from bertattn_bench.families.gates.run import GatesResult, michel_counts, trained_check

L, H = 2, 4


def _roles_pass():
    """2 x 4 heads. Positional: 0-1 (+1 at 95%), 1-3 (-1 at 91%); 1-0 at 89.9% is not. Syntactic: nsubj baseline
    30%, 1-2 dependent→head at 41% (+11), 0-3 head→dependent at 39.9% (+9.9: not); dobj baseline 50%, 1-1 at 60%
    (+10 exactly: yes). Rare: chance 20%, 0-2 at 31% (+11), 0-0 at 29% (+9: not), 1-0 at 90% (not the first layer)."""
    offset = torch.zeros(3, L, H)
    offset[0, 0, 1], offset[1, 1, 3], offset[1, 1, 0] = 95.0, 91.0, 89.9
    n_rel = len(RELATIONS)
    n_arcs = torch.full((n_rel,), 1000.0)
    correct = torch.zeros(L, 2, n_rel, H)
    ns, do = RELATIONS.index("nsubj"), RELATIONS.index("dobj")
    correct[1, 0, ns, 2], correct[0, 1, ns, 3], correct[1, 1, do, 1] = 410.0, 399.0, 600.0
    baselines = {r: OffsetBaseline(100.0, 1, 1000, 0.0) for r in RELATIONS}  # nothing beats 100%
    baselines["nsubj"], baselines["dobj"] = OffsetBaseline(30.0, 1, 1000, 0.0), OffsetBaseline(50.0, -1, 1000, 0.0)
    dep = DependencyResult(tuple(RELATIONS), correct, n_arcs, baselines, 100, 1000, 0)
    rare = torch.zeros(L, H)
    rare[0, 2], rare[0, 0], rare[1, 0] = 31.0, 29.0, 90.0
    res = SimpleNamespace(offset_share=offset, dependency=dep, rare_hits=rare, rare_chance=20.0, n_sentences=100,
                          n_queries=5000)
    return SimpleNamespace(result=res, corpus="ewt_dev")


def _gates(kept_sets: list[list[int]], lambdas=(0.1, 1.0), flips=None, base=(80.0,)) -> GatesResult:
    """One seed per entry of ``kept_sets``: its largest-λ run keeps those flat heads, its smallest keeps all."""
    s_n, k_n = len(kept_sets), len(lambdas)
    kept = np.ones((s_n, k_n, L, H), bool)
    for s, heads in enumerate(kept_sets):
        kept[s, -1] = False
        kept[s, -1].reshape(-1)[heads] = True
    n_kept = kept.reshape(s_n, k_n, -1).sum(-1)
    flips = np.zeros((s_n, k_n, 2), np.int64) if flips is None else np.asarray(flips)
    return GatesResult(task="mrpc", metric="acc", n_dev=400, n_layers=L, n_heads=H, seeds=tuple(range(s_n)),
                       tier="regression", step=0.25, base=np.array(base * s_n)[:s_n], lambdas=list(lambdas),
                       n_kept=n_kept, scores=np.full((s_n, k_n), 80.0), flips=flips, kept=kept,
                       gate=kept.astype(float), penalty=[[[8.0, 4.0]] * k_n] * s_n,
                       task_loss=[[[0.5, 0.5]] * k_n] * s_n, n_train=32, steps=10)


def test_role_heads_are_read_by_voita_rules_from_a_planted_roles_pass():
    masks, where = role_heads([_roles_pass()])
    flat = {k: sorted(np.flatnonzero(v.reshape(-1)).tolist()) for k, v in masks.items()}
    assert flat == {"positional": [1, 7], "syntactic": [5, 6], "rare": [2]}
    assert "ewt_dev" in where and "100 sentences" in where


def test_the_share_of_role_heads_kept_is_counted_by_hand_over_seeds():
    """Role heads {1, 2, 5, 6, 7}. Seed 0 keeps {1, 5, 3}: 2 of 5; seed 1 keeps {1, 2, 5, 6, 0}: 4 of 5. Pooled:
    6 of 10 = 0.6; positional {1, 7}: 1 + 1 of 4 = 0.5; syntactic {5, 6}: 1 + 2 of 4; rare {2}: 0 + 1 of 2."""
    r = _gates([[1, 5, 3], [1, 2, 5, 6, 0]])
    m = gates_keep_roles(SimpleNamespace(result=r), passes=[_roles_pass()])
    assert m.value == pytest.approx(0.6) and m.n == 10
    assert m.values["positional_kept_share"] == pytest.approx(0.5)
    assert m.values["syntactic_kept_share"] == pytest.approx(0.75)
    assert m.values["rare_kept_share"] == pytest.approx(0.5)
    assert m.values["all_heads_kept_share"] == pytest.approx((3 / 8 + 5 / 8) / 2)
    lo, hi = m.bounds
    assert lo < 0.6 < hi
    pos = gates_keep_positional(SimpleNamespace(result=r), passes=[_roles_pass()])
    assert pos.value == pytest.approx(0.5) and pos.n == 4


def test_pruned_share_is_the_mean_over_seeds_and_each_seed_is_its_own_view():
    """Two seeds, λ 0.1 keeps all 8 (share 0), λ 1.0 keeps 2 (share 0.75). Seed 0 loses nothing at λ 1.0 (share
    0.75); seed 1 loses 40 of 400 (-10 points, beyond 1): its share is 0. Mean 0.375; the seeds' views give each."""
    flips = [[[0, 0], [0, 0]], [[0, 0], [40, 0]]]
    r = _gates([[0, 1], [0, 1]], flips=flips)
    m = gates_pruned_share(SimpleNamespace(result=r))
    assert m.value == pytest.approx(0.375)

    @dataclasses.dataclass
    class Pass:
        result: object

    claim = SimpleNamespace(metric="gates_pruned_share", params={"max_drop": 1.0, "alpha": 0.05})
    assert per_seed_values(claim, Pass(r)) == pytest.approx([0.75, 0.0])


def test_the_training_guard_fails_when_one_seed_did_not_train():
    r = _gates([[0, 1], [0, 1]])
    assert trained_check(r, "gates").learned
    r.penalty[1] = [[8.0, 4.0], [8.0, 8.5]]  # seed 1: the penalty rose at the largest λ
    check = trained_check(r, "gates")
    assert not check.learned and "seed 1" in check.text and check.p == pytest.approx(0.5)


def test_michel_counts_are_every_tenth_and_the_gates_counts():
    assert michel_counts(72, [72, 14, 66]) == [0, 6, 7, 14, 21, 28, 36, 43, 50, 57, 58, 64]


def test_the_figure_draws_both_curves_per_seed(tmp_path):
    from bertattn_bench.families.gates.figures import gates_figures

    r = _gates([[0, 1], [0, 1, 2]])
    r.michel_counts, r.michel_curve = [0, 4, 6], np.array([[80.0, 75.0, 60.0], [80.0, 70.0, 55.0]])
    pr = SimpleNamespace(result=r, model=SimpleNamespace(name="tiny", slug="tiny"))
    paths = gates_figures([pr], tmp_path)
    assert [p.name for p in paths] == ["gates-tiny-mrpc.png"] and paths[0].stat().st_size > 1000
