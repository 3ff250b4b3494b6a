"""Hard Concrete head gates (training/head_gates.py): the closed-form L0 penalty by hand, the deterministic gate at
its limits, the sampler against the closed form, and a convergence check on the tiny model."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bertattn_bench.data import glue
from bertattn_bench.training import glue_finetune as finetune
from bertattn_bench.training import head_gates as hg


def test_p_open_matches_hand_computation():
    g = hg.HardConcreteGates(1, 3, temperature=2 / 3)
    with torch.no_grad():
        g.log_alpha.copy_(torch.tensor([[0.0, 1.0, -2.0]]))
    # P(open) = sigmoid(log_alpha - beta log(-l / r)), l = -0.1, r = 1.1: beta log(1/11) = -(2/3) 2.397895 = -1.598597
    hand = [1 / (1 + math.exp(-(a + 1.598597))) for a in (0.0, 1.0, -2.0)]
    assert np.allclose(g.p_open().detach().numpy()[0], hand, atol=1e-5)
    assert math.isclose(float(g.l0_penalty().detach()), sum(hand), rel_tol=1e-5)  # one layer: the sum over its heads


def test_l0_penalty_is_the_mean_over_layers_of_the_sum_over_heads():
    g = hg.HardConcreteGates(2, 2)
    with torch.no_grad():
        g.log_alpha.copy_(torch.tensor([[20.0, 20.0], [-20.0, -20.0]]))
    assert math.isclose(float(g.l0_penalty().detach()), 1.0, rel_tol=1e-4)  # (2 + 0) / 2


def test_sampled_gates_open_as_often_as_the_closed_form_says():
    g = hg.HardConcreteGates(1, 3)
    with torch.no_grad():
        g.log_alpha.copy_(torch.tensor([[0.0, 1.0, -2.0]]))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        draws = torch.stack([g.sample(gen) for _ in range(20000)])
    assert float(draws.min()) >= 0.0 and float(draws.max()) <= 1.0
    assert (draws == 0).any() and (draws == 1).any()  # the stretch puts mass on both ends
    assert np.allclose((draws > 0).float().mean(0).numpy(), g.p_open().detach().numpy(), atol=0.015)


def test_deterministic_gate_is_one_or_zero_at_large_log_alpha():
    g = hg.HardConcreteGates(1, 3)
    with torch.no_grad():
        g.log_alpha.copy_(torch.tensor([[10.0, -10.0, 0.0]]))
    d = g.deterministic().detach().numpy()[0]
    assert d[0] == 1.0 and d[1] == 0.0 and math.isclose(d[2], 0.5 * 1.2 - 0.1, rel_tol=1e-6)
    assert g.kept().tolist() == [[True, False, True]]


def _tiny_task(tiny):
    t = glue.task("mrpc")
    rows = [glue.Example(a, b, float(i % 2), "test") for i, (a, b) in enumerate(
        [("The cat sat on the mat.", "A cat was sitting on a mat."), ("It rained all day.", "The sun shone."),
         ("He bought a car.", "He purchased a vehicle."), ("Dogs bark.", "Fish swim in the sea."),
         ("She reads books.", "Books are read by her."), ("The sky is blue.", "Grass grows slowly.")] * 2)]
    data = finetune.encode_split(tiny.tokenizer, rows, 32)
    model = finetune.task_model(tiny, t, 0)
    return t, data, model


def test_gates_close_under_a_large_penalty_and_stay_without_one(tiny, tmp_path):
    t, data, model = _tiny_task(tiny)
    before = [p.detach().clone() for p in model.parameters()]
    recipe = hg.GateRecipe(steps=100, batch_size=4, lr=0.05, log_every=20)  # log_alpha moves <= 5 from 3
    closed, kept = hg.gate_sweep(model, t, data, tiny.tokenizer, [5.0, 0.0], seed=0, recipe=recipe,
                                 cache_dir=tmp_path, slug="tiny", checkpoint="tiny-ckpt")
    n = tiny.info.n_layers * tiny.info.n_heads
    assert closed.n_kept == 0 and closed.penalty[-1] < 0.15 * closed.penalty[0]  # 4 x sigmoid(-3.75 + 1.6) = 0.42 of 3.96
    assert kept.n_kept == n
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # only the gates trained
    assert all(p.requires_grad for p in model.parameters())
    again = hg.gate_sweep(model, t, data, tiny.tokenizer, [5.0], seed=0, recipe=recipe, cache_dir=tmp_path,
                          slug="tiny", checkpoint="tiny-ckpt")[0]
    assert again.cached and again.n_kept == 0 and np.allclose(again.log_alpha, closed.log_alpha)
    # kept through the fine-tunes' one skeleton (checkpoints.trained): each λ's folder holds its meta, no weights
    from bertattn_bench.training import checkpoints

    folders = sorted(f for f in (tmp_path / "head_gates" / "tiny").iterdir() if f.is_dir())  # beside their locks
    assert len(folders) == 2 and all((f / checkpoints.META).is_file() and not (f / checkpoints.WEIGHTS).exists()
                                     for f in folders)


def test_same_seed_same_gates(tiny):
    t, data, model = _tiny_task(tiny)
    recipe = hg.GateRecipe(steps=8, batch_size=4, lr=0.2)
    a = hg.train_gates(model, t, data, tiny.tokenizer, 0.5, 3, recipe)
    b = hg.train_gates(model, t, data, tiny.tokenizer, 0.5, 3, recipe)
    assert np.array_equal(a.log_alpha, b.log_alpha)


def test_stretch_limits_must_straddle_zero_and_one():
    with pytest.raises(ValueError):
        hg.HardConcreteGates(1, 1, limits=(0.0, 1.0))


def test_the_jaccard_of_gates_and_importance_has_wilson_bounds_by_hand():
    """2 layers x 4 heads; the gates keep 4 heads, 2 of them among the 4 most important: Jaccard 2 / 6 = 1/3. Its
    bounds (issue 61): Wilson's 95% bounds on the shared share 2 of 4 ([0.150, 0.850] by hand), through s / (2 - s):
    [0.081, 0.739]."""
    from types import SimpleNamespace

    import numpy as np

    from bertattn_bench.families.gates.metrics import gates_importance_jaccard
    from bertattn_bench.families.gates.run import GatesResult

    kept = np.zeros((1, 1, 2, 4), bool)
    kept[0, 0, 0, :2] = kept[0, 0, 1, 2:] = True  # heads 0, 1, 6, 7
    r = GatesResult(task="mrpc", metric="acc", n_dev=64, n_layers=2, n_heads=4, seeds=(0,), tier="quick", step=1.56,
                    base=np.array([80.0]), lambdas=[0.5], n_kept=np.array([[4]]), scores=np.array([[75.0]]),
                    flips=np.array([[[5, 2]]]), kept=kept, gate=kept.astype(float), penalty=[[[8.0, 4.0]]],
                    task_loss=[[[0.5, 0.6]]], n_train=32, steps=10)
    imp = np.array([[[0.9, 0.8, 0.1, 0.2], [0.7, 0.6, 0.3, 0.05]]])  # top 4: heads 0, 1, 4, 5
    prune = SimpleNamespace(importance=imp, counts=[0, 4, 8], curve=np.array([[80.0, 76.0, 50.0]]))
    m = gates_importance_jaccard(SimpleNamespace(result=r), passes=[SimpleNamespace(result=prune)])
    assert m.value == pytest.approx(1 / 3) and m.values["overlap"] == 2
    assert m.bounds == pytest.approx((0.150 / 1.850, 0.850 / 1.150), abs=2e-3)


def test_michel_curve_is_kept_with_the_checkpoint(tiny, tmp_path, monkeypatch):
    """The gates' Michel curve is a cached sweep in the checkpoint's folder: found again, not computed again (a
    stopped regression run keeps the seeds' curves it finished)."""
    from bertattn_bench.families.gates import run as gates_run
    from bertattn_bench.training import sweeps

    t, data, model = _tiny_task(tiny)
    counts = [0, 2, 4]
    first = gates_run.michel_curve(model, t, data, data, tiny.tokenizer, counts, str(tmp_path), str(tmp_path))
    assert len(list((tmp_path / "sweeps").glob("*.npz"))) == 1

    def no_sweep(*a, **k):
        raise AssertionError("computed again")

    monkeypatch.setattr(sweeps, "sweep", no_sweep)
    again = gates_run.michel_curve(model, t, data, data, tiny.tokenizer, counts, str(tmp_path), str(tmp_path))
    assert np.array_equal(first, again) and len(first) == len(counts)
