"""Issue 61: every judged row of the quick tier (command 1's tier, what CI records) carries what was random in it —
an interval, bounds, or an ``exact`` reason in its catalog entry. Read from the committed baseline, which the quick
tier's run records for the embedded model over the whole catalog (``--record-baseline``: each entry keeps its
``interval`` and whether its claim is ``exact``); the same audit as the job summary's (``report.summary.unbounded``).
A re-recorded baseline with an unbounded row fails here."""
import json

import pytest

from bertattn_bench.claims.baselines import BASELINE_DIR, provenance_runs
from bertattn_bench.claims.catalog import load_claims
from bertattn_bench.report.summary import unbounded

SLUG = "all-MiniLM-L6-v2"


def _quick_rows() -> dict:
    """The entries a quick-tier run recorded (its settings say the tier): the ``+quick`` rows and the rows of the
    families whose quick tier reads the same data as the recorded tier (no suffix: the dependency corpora whole)."""
    doc = json.loads((BASELINE_DIR / f"{SLUG}.json").read_text(encoding="utf-8"))
    quick = {run["date"] for run in provenance_runs(doc["provenance"]) if (run.get("settings") or {}).get("tier") == "quick"}
    return {k: v for k, v in doc["results"].items() if v.get("recorded") in quick}


def _judged(entry: dict) -> bool:
    return entry.get("holds") is not None and not entry.get("not_judged")


def test_the_quick_baseline_records_the_interval_of_every_row():
    rows = _quick_rows()
    assert len(rows) > 150  # the whole catalog's quick tier on the embedded model, not a selection
    assert all("interval" in v for v in rows.values()), [k for k, v in rows.items() if "interval" not in v][:5]


def test_every_judged_quick_row_has_an_interval_bounds_or_an_exact_reason():
    exact = {c.id for c in load_claims() if c.exact}
    missing = [k for k, v in _quick_rows().items()
               if _judged(v) and not v.get("interval") and not v.get("exact") and k.split("@")[0] not in exact]
    assert missing == [], f"{len(missing)} judged rows with no interval, bounds or exact reason: {missing}"


@pytest.mark.parametrize("row, found", [({"holds": True, "interval": None}, 1),
                                        ({"holds": True, "interval": [0.1, 0.2]}, 0),
                                        ({"holds": False, "interval": None, "exact": True}, 0),
                                        ({"holds": None, "interval": None, "not_judged": "did not learn"}, 0)])
def test_the_audit_finds_a_planted_unbounded_row(row, found):
    """The job summary's audit (report.summary.unbounded) on planted records: a judged row without an interval or an
    exact reason is listed; a row with either, or not judged, is not."""
    record = {"claim_id": "x.y", "model": "m", "corpus": "c", "holds": row["holds"], "interval": row.get("interval"),
              "exact": row.get("exact"), "inconclusive": False, "not_judged": row.get("not_judged"), "skipped": None,
              "negative_control": False}
    assert len(unbounded([record])) == found
