"""Issue 47: the fine-tune's "auto" precision read from a measured table (device class x model size), with the
source of the row in the reason the checkpoint's meta records (``precision_why``)."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from bertattn_bench.training import glue_finetune as finetune
from bertattn_bench.training import precision


def test_shipped_rows_have_a_precision_and_a_source():
    rows = json.loads(precision.PRECISION_TABLE.read_text())["rows"]
    assert rows and all(r["precision"] in ("bf16", "fp32") and r["source"].strip() for r in rows)
    data = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "precision_table.json" in data["tool"]["setuptools"]["package-data"]["bertattn_bench.training"]


def test_h200_small_model_is_fp32_and_says_why():
    chosen, source = precision.measured_precision("cuda:NVIDIA H200", 6)
    assert chosen == "fp32" and "H200" in source and "9.1 s" in source
    assert precision.measured_precision("cuda:NVIDIA H200", 6) == (chosen, source)  # same class, same answer
    assert precision.measured_precision("cuda:NVIDIA H200", 12) is None  # bert-base size: not measured there
    assert precision.measured_precision("cuda:Some Other GPU", 6) is None


def test_cpu_rows_keep_the_recorded_precision():
    assert precision.measured_precision("cpu:avx512_bf16", 6)[0] == "bf16"  # the recorded baselines' precision
    assert precision.measured_precision("cpu:none", 6)[0] == "fp32"
    assert precision.measured_precision("cpu:avx512_bf16", 12) is None


def test_first_covering_row_wins(tmp_path):
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"rows": [
        {"device": "cuda:X", "max_layers": 6, "precision": "fp32", "source": "small"},
        {"device": "cuda:X", "max_layers": 24, "precision": "bf16", "source": "large"}]}))
    assert precision.measured_precision("cuda:X", 6, table) == ("fp32", "small")
    assert precision.measured_precision("cuda:X", 7, table) == ("bf16", "large")
    assert precision.measured_precision("cuda:X", 25, table) is None


def test_auto_takes_the_table_and_records_the_source(monkeypatch):
    r = finetune.Recipe()
    monkeypatch.setattr(precision, "device_class", lambda device: "cuda:NVIDIA H200")
    recipe, why = precision.with_precision(r, "cpu", "auto", n_layers=6)
    assert recipe.bf16_autocast is False and "measured on cuda:NVIDIA H200" in why and "10.9 s" in why
    # no row for this size: the hardware rule, and the reason says no measurement covered it
    monkeypatch.setattr(precision, "bf16_pays", lambda device: (True, "rule"))
    recipe, why = precision.with_precision(r, "cpu", "auto", n_layers=12)
    assert recipe.bf16_autocast is True and "no measured row" in why
    # an explicit choice is never overridden by the table
    assert precision.with_precision(r, "cpu", "bf16", n_layers=6)[0].bf16_autocast is True


@pytest.mark.parametrize("flags, expected", [({"avx512_bf16"}, "cpu:avx512_bf16"),
                                             ({"amx_bf16", "avx512_bf16"}, "cpu:amx_bf16"), (set(), "cpu:none")])
def test_device_class_of_a_cpu(monkeypatch, flags, expected):
    monkeypatch.setattr(precision, "_cpu_flags", lambda: flags)
    assert precision.device_class("cpu") == expected


def test_step_graphs_come_from_a_measured_cuda_row_only(tmp_path):
    """The step as CUDA graphs is chosen like the precision: from a measured row (its pad multiple and source), on a
    CUDA device class only; the shipped table has no such row until a GPU check measured one (scripts/gpu_check.sh)."""
    table = tmp_path / "t.json"
    graphs = {"pad_to_multiple": 16, "source": "a GPU check"}
    table.write_text(json.dumps({"rows": [
        {"device": "cuda:X", "max_layers": 6, "precision": "fp32", "source": "s", "step_graphs": graphs},
        {"device": "cuda:X", "max_layers": 24, "precision": "fp32", "source": "s"},
        {"device": "cpu:none", "max_layers": 24, "precision": "fp32", "source": "s", "step_graphs": graphs}]}))
    r = finetune.Recipe()
    recipe, why = precision.with_step_graphs(r, "cuda:X", 6, table)
    assert recipe.step_graphs and recipe.pad_to_multiple == 16 and "a GPU check" in why and "cuda:X" in why
    assert recipe.key() != r.key()  # another way of training, another checkpoint
    assert precision.with_step_graphs(r, "cuda:X", 12, table) == (r, "")  # the covering row has none
    assert precision.with_step_graphs(r, "cuda:Y", 6, table) == (r, "")
    assert precision.with_step_graphs(r, "cpu:none", 6, table) == (r, "")  # never on a CPU
    shipped = [row for row in json.loads(precision.PRECISION_TABLE.read_text())["rows"] if row.get("step_graphs")]
    assert all(row["device"].startswith("cuda:") and row["step_graphs"]["source"] for row in shipped)
