"""How a fine-tune trains on this machine (issue 47): bf16 autocast or float32, and the step as CUDA graphs or
eager, chosen from a shipped table of measurements per device class and model size (``precision_table.json``),
else from the hardware; the choice goes into the recipe, so into the checkpoint's key and its meta.

* :func:`with_precision`: the run's precision option (``$BERTATTN_FT_PRECISION``: "auto", the default, takes the
  table's row, else bf16 only where :func:`bf16_pays`);
* :func:`with_step_graphs`: the step replayed as CUDA graphs where a measured CUDA row says it pays;
* :func:`device_class`: the machine class the table is keyed by.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import torch

from ..base.errors import DataError
from ..base.settings import PRECISION_ENV

R = TypeVar("R")  # a fine-tuning recipe (glue_finetune.Recipe): its bf16_autocast, step_graphs, pad_to_multiple


PRECISIONS = ("auto", "recipe", "bf16", "fp32")


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")  # bf16 dot products in hardware: AMX tiles, AVX512-BF16


def bf16_pays(device: torch.device) -> tuple[bool, str]:
    """Whether bf16 autocast trains faster than float32 on ``device``, and why. On a CPU with bf16 dot products in
    hardware (AMX tiles or AVX512-BF16; :data:`BF16_CPU_FLAGS`): on this project's 2-core AMD EPYC (AVX512-BF16, no
    AMX) an MRPC fine-tune took 212 s with bf16 autocast against 330 s in fp32 (3 epochs, same run, docs/speed.md);
    without them autocast emulates bf16 and is slower. On CUDA where the GPU supports bf16."""
    device = torch.device(device)
    if device.type == "cuda":
        ok = torch.cuda.is_bf16_supported()
        return ok, f"CUDA {'with' if ok else 'without'} bf16 support"
    if device.type == "cpu":
        have = [f for f in BF16_CPU_FLAGS if f in _cpu_flags()]
        return (True, f"CPU with {' and '.join(have)}") if have else (
            False, "CPU without AMX or AVX512-BF16 (bf16 autocast would be emulated, slower than fp32)")
    return False, f"{device.type}: bf16 autocast not known to pay"


PRECISION_TABLE = Path(__file__).with_name("precision_table.json")


def device_class(device) -> str:
    """The machine class the precision table is keyed by: ``cuda:<GPU name>``, ``cpu:amx_bf16`` /
    ``cpu:avx512_bf16`` (the CPU's bf16 dot-product units, best first) or ``cpu:none``; else the device type."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    if device.type == "cpu":
        have = [f for f in BF16_CPU_FLAGS if f in _cpu_flags()]
        return f"cpu:{have[0] if have else 'none'}"
    return device.type


def measured_precision(device_cls: str, n_layers: int, table: Path = PRECISION_TABLE) -> tuple[str, str] | None:
    """``(precision, source)`` of the first row of the shipped table (``precision_table.json``) for ``device_cls``
    whose ``max_layers`` covers ``n_layers``; None where no measurement covers it. Pure: the same class and size
    always give the same answer (cache keys and recorded values stay put)."""
    row = _measured_row(device_cls, n_layers, table)
    return (row["precision"], row["source"]) if row is not None else None


def _measured_row(device_cls: str, n_layers: int, table: Path) -> dict | None:
    import json

    for row in json.loads(table.read_text())["rows"]:
        if row["device"] == device_cls and n_layers <= row["max_layers"]:
            return row
    return None


def with_step_graphs(recipe: R, device_cls: str, n_layers: int, table: Path = PRECISION_TABLE
                     ) -> tuple[R, str]:
    """The recipe with the training step as CUDA graphs (:mod:`.step_graphs`) where the measured table's row for
    this CUDA device class and model size says they pay (its ``step_graphs``: ``pad_to_multiple`` and the
    measurement's ``source``), else unchanged. Returns (recipe, why; "" where unchanged). Like the precision, the
    choice is in the recipe (the checkpoint's key): the same machine class always trains the same way."""
    row = _measured_row(device_cls, n_layers, table) if device_cls.startswith("cuda:") else None
    graphs = (row or {}).get("step_graphs")
    if not graphs:
        return recipe, ""
    multiple = int(graphs["pad_to_multiple"])
    return replace(recipe, step_graphs=True, pad_to_multiple=multiple), \
        f"step graphs, batches padded to a multiple of {multiple}: measured on {device_cls} ({graphs['source']})"


def with_precision(recipe: R, device, choice: str | None = None, n_layers: int | None = None) -> tuple[R, str]:
    """The recipe with the training precision of ``choice`` (the run's precision option; default "auto"):
    "auto" takes the measured table's precision for the device class and ``n_layers`` (:func:`measured_precision`),
    where it has none bf16 autocast only where :func:`bf16_pays`, else fp32; "recipe" keeps ``recipe.bf16_autocast``;
    "bf16" / "fp32" force one. Returns (recipe, why); the precision is in the recipe, so in the checkpoint's key and
    its meta."""
    choice = (choice or "").strip().lower() or "auto"
    if choice not in PRECISIONS:
        raise DataError(f"{PRECISION_ENV}={choice!r}: expected one of {', '.join(PRECISIONS)}")
    if choice == "recipe":
        return recipe, f"the recipe's ({'bf16 autocast' if recipe.bf16_autocast else 'fp32'})"
    if choice in ("bf16", "fp32"):
        return replace(recipe, bf16_autocast=choice == "bf16"), f"{PRECISION_ENV}={choice}"
    if n_layers is not None:
        cls = device_class(device)
        found = measured_precision(cls, n_layers)
        if found is not None:
            precision, source = found
            return replace(recipe, bf16_autocast=precision == "bf16"), \
                f"auto: {precision} measured on {cls}, {n_layers}-layer model ({source})"
    ok, why = bf16_pays(device)
    return replace(recipe, bf16_autocast=ok), f"auto: {why} (no measured row for this device and model size)"
