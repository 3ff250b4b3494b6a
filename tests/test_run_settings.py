"""Every setting that changes a value is an option of the run (issue 44): ``bertattn_bench.run(seed=...,
precision=...)`` reaches the fine-tune's recorded checkpoint (its key and meta) and the run's provenance, with no
environment variable; the environment is read once, by the faces (base.settings.from_environment)."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from test_finetune import glue_dir  # noqa: F401  (the planted MRPC fixture)

import bertattn_bench as bb
from bertattn_bench.base.errors import BenchError
from bertattn_bench.base.settings import from_environment
from bertattn_bench.runner.options import RunOptions


def test_seed_and_precision_reach_the_fine_tunes_key(tiny, glue_dir, tmp_path, monkeypatch):  # noqa: F811
    for name in ("BERTATTN_SEED", "BERTATTN_FT_PRECISION"):
        monkeypatch.delenv(name, raising=False)
    from bertattn_bench.training import glue_pass

    monkeypatch.setattr(glue_pass, "RESTARTS", 0)  # the tiny model never learns: one checkpoint per seed here
    pretrained = replace(tiny, info=replace(tiny.info, random_init_seed=None))  # as a pre-trained model
    cache = tmp_path / "cache"
    # the precision "auto" would not choose here, so the test fails if the option does not reach the fine-tune
    from bertattn_bench.training.precision import bf16_pays

    auto_bf16 = bf16_pays(pretrained.info.device if hasattr(pretrained.info.device, "type") else
                          __import__("torch").device(pretrained.info.device))[0]
    precision, recorded = ("fp32", "fp32") if auto_bf16 else ("bf16", "bf16 autocast")
    res = bb.run(pretrained, select="finetune and mrpc and kov.table1_finetuned", data_dir=glue_dir, tier="quick",
                 cache_dir=cache, seed=1, precision=precision, baseline=False)
    assert not res.errors, res.errors
    metas = sorted(cache.glob("finetune/*/mrpc-seed*/meta.json"))
    assert metas and {m.parent.name.split("-")[1] for m in metas} == {"seed1"}  # the seed is in the checkpoint's key
    for m in metas:
        meta = json.loads(m.read_text())
        assert meta["precision"] == recorded and meta["recipe"]["bf16_autocast"] is (precision == "bf16")
    settings = res.runner.provenance()["settings"]
    assert settings["seed"] == 1 and settings["precision"] == precision and settings["tier"] == "quick"


def test_the_environment_is_read_by_the_face_into_options(monkeypatch):
    monkeypatch.setenv("BERTATTN_SEED", "4")
    monkeypatch.setenv("BERTATTN_FT_PRECISION", "BF16")
    monkeypatch.setenv("BERTATTN_PRUNE_EXACT", "1")
    monkeypatch.delenv("BERTATTN_ASSUME_SHAPE", raising=False)
    envs = from_environment()
    assert (envs["seed"], envs["precision"], envs["prune_exact"]) == (4, "bf16", True) and "assume_shape" not in envs
    options = RunOptions(seed=envs["seed"], precision=envs["precision"], prune_exact=envs["prune_exact"])
    assert options.training() == {"seed": 4, "n_seeds": None, "precision": "bf16", "prune_exact": True,
                                  "eval_data": {}}
    assert options.settings()["precision"] == "bf16" and options.settings()["prune_exact"] is True
    with pytest.raises(BenchError, match="precision 'half'"):
        RunOptions(precision="half").check()
    with pytest.raises(BenchError, match="seed -1"):
        RunOptions(seed=-1).check()


def test_the_number_of_seeds_reaches_every_seed_dependent_family(monkeypatch):
    """``$BERTATTN_SEEDS`` / ``seeds=`` (issue 61): how many consecutive seeds from the run's each seed-dependent
    family trains, at any tier; unset, the tier's (quick 1, regression 3; the full tier's listed seeds)."""
    from bertattn_bench.base.errors import DataError
    from bertattn_bench.families import arct_ft
    from bertattn_bench.training.glue_pass import tier_seeds

    monkeypatch.setenv("BERTATTN_SEEDS", "5")
    assert from_environment()["n_seeds"] == 5
    options = RunOptions(seed=2, n_seeds=5)
    assert options.training()["n_seeds"] == 5 and options.settings()["n_seeds"] == 5
    assert tier_seeds("regression", "mrpc", 2, 5) == (2, 3, 4, 5, 6) and tier_seeds("quick", "mrpc", None, 2) == (0, 1)
    assert tier_seeds("full", "mrpc", None, 5) == (0, 1, 2, 3, 4)  # the listed seeds give way to the count asked
    assert tier_seeds("regression", "mrpc", 1) == (1, 2, 3, 4, 5) and tier_seeds("full", "mrpc") == (0, 1, 2, 3, 4)
    assert tier_seeds("quick", "mrpc", 3) == (3,)
    assert arct_ft.tier_seeds("regression", False, 1, 4) == (1, 2, 3, 4) and arct_ft.tier_seeds("quick") == (0,)
    assert arct_ft.tier_seeds("full", True, 0, 5) == arct_ft.TWIN_SEEDS  # the twin keeps its own
    for bad in ("0", "x", "-2"):
        monkeypatch.setenv("BERTATTN_SEEDS", bad)
        with pytest.raises(DataError, match="BERTATTN_SEEDS"):
            from_environment()
    with pytest.raises(BenchError, match="seeds 0"):
        RunOptions(n_seeds=0).check()
