"""Which run recorded a baseline entry: a baseline's provenance is its latest run's, with the runs that measured
its older entries kept in ``earlier_runs``; each entry names its run by date (``recorded``)."""
from __future__ import annotations


def provenance_runs(provenance: dict) -> list[dict]:
    """The latest run and the earlier ones, latest first."""
    return [provenance, *provenance.get("earlier_runs", [])]


def recorded_device(baseline: dict | None, entry: dict) -> str | None:
    """The device of the run that recorded ``entry`` (the provenance, or the earlier run of the entry's date)."""
    provenance = (baseline or {}).get("provenance", {})
    for run in provenance_runs(provenance):
        if run.get("date") == entry.get("recorded"):
            return run.get("device")
    return provenance.get("device")


def device_type(device: str | None) -> str | None:
    """``cuda:1`` → ``cuda``; None stays None."""
    return None if not device else str(device).split(":")[0]
