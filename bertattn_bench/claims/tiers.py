"""Budget tiers: how much data and training one run of the claim benchmarks spends (``--tier``, ``BERTATTN_TIER``).

* ``quick`` (the default; the README's first command and CI): a smoke run of every family in minutes. The forward
  families read a capped sample of their corpus (``Family.quick_limit``), the fine-tuning families train one short
  seed on a seeded sample of MRPC train and judge on the first dev examples. Its values are another measurement
  than the recorded tier's, so they carry the tier in their corpus label (``mrpc+quick``, ``wikitext2+quick``) and
  are compared with baselines recorded at the same tier, never with the regression tier's.
* ``regression``: the recorded tier (unsuffixed baseline keys): whole dev corpora, MRPC fine-tuned for 3 epochs
  with five seeds, the probes and a short ARCT run with three (not timed whole at five seeds: docs/results.md).
* ``full``: the papers' settings where the machine allows: every GLUE task with train data, 5 seeds on MRPC, 3 on
  RTE, the fine-tuned random-init twin, all probes training sentences, five ARCT settings x five seeds (hours).

Each family keeps its tier's numbers beside its code (``TIERS`` in its module); this module names the tiers and
says how a tier shows in a corpus label.
"""
from __future__ import annotations

QUICK, REGRESSION, FULL = "quick", "regression", "full"
NAMES = (QUICK, REGRESSION, FULL)
DEFAULT = QUICK
RECORDED = REGRESSION  # baseline keys without a tier suffix are this tier's (they predate the other tiers)


def check(tier: str, where: str = "--tier") -> str:
    """``tier`` if it is one; else an error naming where it came from."""
    from ..base.errors import BenchError

    if tier not in NAMES:
        raise BenchError(f"{where} {tier!r}: expected one of {', '.join(NAMES)}")
    return tier


def of_options(options: dict | None, table) -> str:
    """The tier a family's pass was asked for (``options["tier"]``; the recorded tier when none), which must be one
    the family's ``table`` (its TIERS) knows: else an error naming ``--tier``."""
    from ..base.errors import DataError

    tier = (options or {}).get("tier") or RECORDED
    if tier not in table:
        raise DataError(f"--tier {tier!r}: expected one of {', '.join(table)}")
    return tier


def suffix(tiers) -> str:
    """How the tiers of a claim's passes show in its corpus label: ``+quick``, ``+full`` (none for the recorded
    tier and for passes whose budget no tier changes)."""
    return "".join(f"+{t}" for t in sorted(set(tiers) - {None, RECORDED}))
