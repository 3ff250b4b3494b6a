"""Issue 62: the one header of the GLUE passes' results (training/glue_result.py: ``GlueResult``, ``HeadsResult``,
which ``finetune``, ``disable``, ``prune`` and ``gates`` inherit) and the one JSON-lines reader (data/json_lines.py,
which BLiMP and FrameNet read through). Known answers: the header read from a planted pass, the seed sd by hand, the
per-seed field lists as they stood before the header was shared, each seed's view of a planted two-seed result."""
import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest

from bertattn_bench.base.errors import DataError
from bertattn_bench.claims.checks import one_seed
from bertattn_bench.data import glue
from bertattn_bench.data.json_lines import json_objects
from bertattn_bench.families.disable.run import DisableResult
from bertattn_bench.families.finetune.run import FinetuneResult
from bertattn_bench.families.gates.run import GatesResult
from bertattn_bench.families.prune.run import PruneResult
from bertattn_bench.training.glue_result import GlueResult, HeadsResult

# the per-seed fields each result named before the header was shared (issue 62): a seed's view must not change
BEFORE = {
    DisableResult: ("base", "head_delta", "layer_delta", "head_p", "layer_p", "head_flips", "layer_flips",
                    "head_with_base", "layer_with_base", "sweep_seconds", "plain_seconds", "train_meta"),
    PruneResult: ("importance_raw", "importance", "base", "head_delta", "head_p", "head_flips", "curve", "curve_p",
                  "one_head", "one_head_kept", "curve_exact", "curve_delta_order", "curve_random", "abo_delta",
                  "abo_p", "one_head_best", "one_head_flips", "train_meta"),
    GatesResult: ("base", "n_kept", "scores", "flips", "kept", "gate", "penalty", "task_loss", "cached",
                  "michel_curve"),
    FinetuneResult: ("finetuned", "untuned", "train_meta"),
}
HEADER = ("task", "metric", "n_dev", "seeds", "tier")


@pytest.mark.parametrize("cls", list(BEFORE), ids=lambda c: c.__name__)
def test_the_per_seed_fields_are_those_named_before(cls):
    assert len(cls.PER_SEED) == len(set(cls.PER_SEED)) and set(cls.PER_SEED) == set(BEFORE[cls])
    names = [f.name for f in dataclasses.fields(cls)]
    assert names[:len(HEADER)] == list(HEADER) and set(cls.PER_SEED) <= set(names)
    assert all(f.kw_only for f in dataclasses.fields(cls))  # built by name only
    with pytest.raises(TypeError):
        cls("mrpc", "acc", 64, (0,), "quick")


def planted_pass(task: str = "mrpc", n_dev: int = 64, seeds=(3, 4), layers: int = 2, heads: int = 3):
    info = SimpleNamespace(n_layers=layers, n_heads=heads)
    return SimpleNamespace(task=glue.task(task), dev=SimpleNamespace(examples=[None] * n_dev), seeds=seeds,
                           tier="regression", loaded=SimpleNamespace(info=info))


def test_the_header_is_read_from_the_pass():
    p = planted_pass()
    assert GlueResult.header(p) == {"task": "mrpc", "metric": glue.task("mrpc").metric, "n_dev": 64,
                                    "seeds": (3, 4), "tier": "regression"}
    h = HeadsResult.header(p)
    assert (h["n_layers"], h["n_heads"], h["step"]) == (2, 3, 100.0 / 64)  # ModelInfo's shape; one pair of 64
    assert {k: h[k] for k in HEADER} == GlueResult.header(p)
    assert math.isnan(HeadsResult.header(planted_pass("sts-b", 1500))["step"])  # regression: no step
    assert HeadsResult.header(planted_pass(seeds=[0]))["seeds"] == (0,)


def disable_result(p, base) -> DisableResult:
    S, L, H = len(base), p.loaded.info.n_layers, p.loaded.info.n_heads
    ramp = np.arange(S * L * H, dtype=float).reshape(S, L, H)
    return DisableResult.of(
        p, base=np.array(base, dtype=float), head_delta=ramp, layer_delta=ramp.sum(2), head_p=ramp / ramp.max(),
        layer_p=np.ones((S, L)), head_flips=np.stack([ramp, -ramp], -1), layer_flips=np.zeros((S, L, 2)),
        sweep_seconds=[1.0 + s for s in range(S)], plain_seconds=[0.5] * S,
        train_meta={seed: {"seed": seed} for seed in p.seeds}, n_configs=1 + L * (H + 1))


def test_seed_sd_is_the_population_sd_of_base():
    p = planted_pass()
    r = disable_result(p, [80.0, 83.0])
    assert r.seed_sd == pytest.approx(1.5)  # |80 - 83| / 2: the population sd of two values
    assert r.step == pytest.approx(100.0 / 64) and (r.n_layers, r.n_heads) == (2, 3)
    assert math.isnan(disable_result(planted_pass(seeds=(0,)), [80.0]).seed_sd)


def test_each_seed_view_holds_that_seed_only():
    p = planted_pass()
    r = disable_result(p, [80.0, 83.0])
    v = one_seed(r, 1)
    assert v.seeds == (4,) and v.base.tolist() == [83.0] and v.train_meta == {4: {"seed": 4}}
    assert np.array_equal(v.head_delta, r.head_delta[1:]) and v.sweep_seconds == [2.0]
    assert (v.task, v.n_dev, v.step, v.n_configs) == (r.task, r.n_dev, r.step, r.n_configs)  # the header is kept


def test_json_objects_names_file_and_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n  \n{"a": 2}\n', encoding="utf-8")
    assert list(json_objects(path)) == [(f"{path}:1", {"a": 1}), (f"{path}:4", {"a": 2})]  # blank lines skipped
    for line, message in (("{not json", "not valid JSON (Expecting property name enclosed in double quotes, "
                                        "column 2)"), ("[1, 2]", "expected a JSON object, got list")):
        path.write_text('{"a": 1}\n\n' + line + "\n", encoding="utf-8")
        with pytest.raises(DataError) as exc:
            list(json_objects(path))
        assert str(exc.value) == f"{path}:3: {message}"
