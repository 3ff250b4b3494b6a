"""The disabling and fine-tuning claim metrics on hand-made results: a regression task's constant predictor counts as
correlation 0; the disabling sweep's layer-pass counts."""
from types import SimpleNamespace

import numpy as np
import pytest

from bertattn_bench.families.finetune import FinetuneResult, TaskScores, ft_margin_over_majority

# the best-gain claims (issue 36 items 2, 6, 7a): tests/test_audit_disable.py (the seed-spread bar is gone)


def test_regression_majority_is_chance_correlation():
    nan = float("nan")
    r = FinetuneResult(task="sts-b", metric="pearson", n_dev=1500, n_dev_truncated=0, seeds=(0,), tier="full",
                       finetuned={0: TaskScores(84.9, {"pearson": 84.9, "spearman": 85.5}, 0)}, untuned={},
                       constant={}, majority=("mean", nan), random_ft=None, random_note="", cosine_layer=None,
                       cosine_head=None, n_cosine=0)
    m = ft_margin_over_majority(SimpleNamespace(result=r))
    assert m.value == pytest.approx(84.9) and "chance 0" in m.detail


def test_last_layers_must_actually_change():
    """Fig. 5's claim counts a last layer only when it is among the most changed and its cosine fell by min_change:
    a model whose attention barely moves (the random-init twin: 0.996-0.999) gets 0, not 2."""
    from bertattn_bench.families.finetune import ft_change_last_layers

    def res(cos):
        return SimpleNamespace(result=FinetuneResult(
            task="mrpc", metric="accuracy", n_dev=408, n_dev_truncated=0, seeds=(0,), tier="full", finetuned={},
            untuned={}, constant={}, majority=("1", 68.4), random_ft=None, random_note="",
            cosine_layer=np.array(cos), cosine_head=None, n_cosine=408))

    assert ft_change_last_layers(res([0.999, 0.972, 0.971, 0.896, 0.756, 0.527]), min_change=0.05).value == 2
    assert ft_change_last_layers(res([0.998, 0.999, 0.998, 0.998, 0.997, 0.996]), min_change=0.05).value == 0
    assert ft_change_last_layers(res([0.998, 0.999, 0.998, 0.998, 0.997, 0.996])).value == 2  # the old reading


def test_disabling_sweep_layer_passes_by_hand():
    """Issue 27's counts: a 6 x 12 model's 79 configurations cost 6 + 12 x (6+5+4+3+2+1) + (6+...+1) = 279 layer
    passes per example with the prefix shared, against 79 x 6 = 474; a 12 x 12 model 1,026 against 1,884."""
    from bertattn_bench.families.disable import configurations
    from bertattn_bench.training import sweeps

    assert sweeps.sweep_layer_passes(configurations(6, 12)[0], 6) == 279
    assert sweeps.sweep_layer_passes(configurations(6, 12)[0], 6, share_prefix=False) == 474
    assert sweeps.sweep_layer_passes(configurations(12, 12)[0], 12) == 12 + 13 * 78
    assert sweeps.sweep_layer_passes(configurations(12, 12)[0], 12, share_prefix=False) == 157 * 12


def test_the_disable_pass_pairs_a_regression_task_by_its_predictions(tiny, tmp_path, monkeypatch):
    """The real ``disable`` pass on a tiny STS-B fine-tune: for a regression task it keeps each configuration's
    Pearson r with the undisabled model's dev predictions (what pairs the gain), shaped as the deltas, each in
    [-1, 1], and the gain claims read it (judged, not skipped); the score it pairs is the sweep's own."""
    from dataclasses import replace

    from toy_glue import STSB_HEADER, toy_pairs

    from bertattn_bench.claims.registry import families
    from bertattn_bench.families.disable import DisableResult, disable_best_gain
    from bertattn_bench.training import glue_pass

    d = tmp_path / "glue" / "STS-B"
    d.mkdir(parents=True)
    for split, n, seed in (("train", 48, 0), ("dev", 24, 1)):
        rows = [f"{i}\tx\t{a}\t{b}\t{4.6 if y else 1.2 + (i % 5) * 0.5:.1f}\n" for i, (y, a, b) in enumerate(toy_pairs(n, seed))]
        (d / f"{split}.tsv").write_text(STSB_HEADER + "".join(rows), encoding="utf-8")
    real = glue_pass.recipe_for
    monkeypatch.setattr(glue_pass, "recipe_for",
                        lambda task, tier="regression": replace(real(task, tier), epochs=2, batch_size=8, lr=1e-3))
    pretrained = replace(tiny, info=replace(tiny.info, random_init_seed=None))
    p = families()["disable"].prepare(pretrained, tmp_path, "sts-b", None, 32,
                                      {"tier": "quick", "cache_dir": tmp_path / "cache"})
    p.artifacts()
    r = p.run().result
    assert isinstance(r, DisableResult) and r.task == "sts-b"
    L, H = r.n_layers, r.n_heads
    assert r.head_with_base.shape == (1, L, H) and r.layer_with_base.shape == (1, L)
    assert np.all(np.abs(r.head_with_base) <= 1 + 1e-9) and np.all(np.abs(r.layer_with_base) <= 1 + 1e-9)
    assert np.isnan(r.head_p).all() and not np.isnan(r.head_with_base).any()
    m = disable_best_gain(SimpleNamespace(result=r))
    assert "overlapping correlations" in m.detail and m.values["configurations"] == L * H
