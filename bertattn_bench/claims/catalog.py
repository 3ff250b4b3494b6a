"""Claims are data: entries in ``reference_numbers/<paper>_<family>.toml``, each naming one metric function. This
module loads them (:func:`load_claims`); a claim is a :class:`~bertattn_bench.claims.claim.Claim`, its result a
:class:`~bertattn_bench.claims.outcome.ClaimOutcome`, and :func:`~bertattn_bench.claims.checks.evaluate` measures,
judges and checks it (the names are re-exported here, where the rest of the package has always found them).
"""
from __future__ import annotations

import tomllib  # Python 3.11+: the version pyproject.toml declares
from pathlib import Path

from ..base import resources
from ..base.errors import BenchError
from .checks import evaluate
from .claim import CHECKED, COMPARISONS, SHAPES, Claim
from .outcome import ClaimOutcome, baseline_key, corpus_label
from .registry import DEPTH_BANDS, load_all_metrics

__all__ = ["CHECKED", "COMPARISONS", "REFERENCE_DIR", "SHAPES", "Claim", "ClaimOutcome", "baseline_key",
           "catalog_claims", "claim_families", "claim_pairs", "corpus_label", "evaluate", "load_claims"]

REFERENCE_DIR = resources.folder(resources.REFERENCE_NUMBERS)  # the catalog (*.toml) and baselines/


def _claims_from_file(path: Path) -> list[Claim]:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise BenchError(f"{path}: invalid TOML: {exc}") from exc
    meta = doc.get("meta", {})
    defaults = doc.get("defaults", {})  # shared values of the file's claims (an entry overrides them)
    out = []
    for i, entry in enumerate(doc.get("claim", [])):
        merged = {"paper": meta.get("paper"), "family": meta.get("family"), "source": meta.get("source"),
                  **defaults, **entry}
        try:
            claim = Claim(**merged)
        except TypeError as exc:
            raise BenchError(f"{path}: claim #{i + 1} ({entry.get('id', '?')}): {exc}") from exc
        if not (claim.catalog is None or claim.catalog is False or isinstance(claim.catalog, str) and claim.catalog):
            raise BenchError(f"{path}: claim {claim.id}: catalog must be a claim id of the catalog or false, "
                             f"got {claim.catalog!r}")
        if claim.comparison not in COMPARISONS:
            raise BenchError(f"{path}: claim {claim.id}: unknown comparison {claim.comparison!r}")
        if claim.exact is not None and not (isinstance(claim.exact, str) and claim.exact.strip()):
            raise BenchError(f"{path}: claim {claim.id}: exact must say why the value has no randomness, got "
                             f"{claim.exact!r}")
        if claim.checked not in CHECKED:
            raise BenchError(f"{path}: claim {claim.id}: checked must be one of {', '.join(CHECKED)}, "
                             f"got {claim.checked!r}")
        if claim.checked == "verdict" and claim.tolerance:
            raise BenchError(f"{path}: claim {claim.id}: checked = \"verdict\" compares no value: its tolerance must "
                             f"be 0, got {claim.tolerance!r}")
        t = claim.threshold
        if claim.comparison == "in_band" and t not in DEPTH_BANDS:
            raise BenchError(f"{path}: claim {claim.id}: unknown depth band {t!r} (known: {', '.join(DEPTH_BANDS)})")
        if claim.comparison == "between" and not (isinstance(t, list) and len(t) == 2):
            raise BenchError(f"{path}: claim {claim.id}: 'between' needs threshold = [low, high], got {t!r}")
        if claim.comparison not in ("in_band", "between") and not isinstance(t, (int, float)):
            raise BenchError(f"{path}: claim {claim.id}: comparison {claim.comparison!r} needs a number, got {t!r}")
        out.append(claim)
    return out


def load_claims(directory: Path = REFERENCE_DIR, family: str | None = None) -> list[Claim]:
    """All claim entries (optionally of one family); every metric they name must exist."""
    metrics = load_all_metrics()
    files = sorted(Path(directory).glob("*.toml"))
    if not files:
        raise BenchError(f"no claims catalog: {directory} holds no *.toml file (the package's reference_numbers/; "
                         f"reinstall bertattn-bench or run from a full checkout)")
    claims = [c for p in files for c in _claims_from_file(p)]
    ids = [c.id for c in claims]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise BenchError(f"duplicate claim ids in {directory}: {sorted(dupes)}")
    for c in claims:
        if c.metric not in metrics:
            raise BenchError(f"claim {c.id}: unknown metric {c.metric!r} (registered: {sorted(metrics)})")
        if c.pairs is not None and (c.pairs not in ids or c.pairs == c.id):
            raise BenchError(f"claim {c.id}: pairs = {c.pairs!r} names no other claim of {directory}")
    return [c for c in claims if family is None or c.family == family]


def claim_families(directory: Path = REFERENCE_DIR) -> dict[str, str]:
    """Claim id -> its family, read from the catalog's TOML files alone (no metric is imported: light)."""
    return {c.id: c.family for p in sorted(Path(directory).glob("*.toml")) for c in _claims_from_file(p)}


def claim_pairs(directory: Path = REFERENCE_DIR) -> dict[str, str]:
    """Claim id -> the claim it is another reading of (its ``pairs`` key), from the TOML files alone (light)."""
    return {c.id: c.pairs for p in sorted(Path(directory).glob("*.toml")) for c in _claims_from_file(p) if c.pairs}


def catalog_claims(claims: list[Claim] | None = None) -> dict[str, list[Claim]]:
    """The catalog's claims, each with the entries that test it (one, or a claim and its variants); the entries
    that are additions of the project (``catalog = false``) are left out."""
    out: dict[str, list[Claim]] = {}
    for c in load_claims() if claims is None else claims:
        if c.catalog_id is not None:
            out.setdefault(c.catalog_id, []).append(c)
    return out
