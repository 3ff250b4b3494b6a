"""Niven & Kao §5 (the model-free arct family): the adversarial set's construction, checked against the shipped one."""
from __future__ import annotations

from dataclasses import dataclass, field

# ---- adversarial construction --------------------------------------------------------------------------------

@dataclass
class AdversarialCheck:
    """One claim-negated split: pairs (original row, its ``-adversarial`` copy) and what they share."""

    split: str
    rows: int
    originals_expected: int  # rows of the original split
    originals: int  # rows with adversarial = False
    copies: int  # rows with adversarial = True
    unpaired: list[str]  # ids of copies without an original or originals without a copy
    original_mismatch: list[str]  # original-half rows that differ from the original ARCT row (id, text, label)
    pairs: int = 0
    same_warrants_reason_flipped: int = 0  # pairs with identical warrants (same order) and reason, label flipped
    contradictory: list[str] = field(default_factory=list)  # pairs with identical input (claim too), opposite labels
    claim_not_from_map: int = 0  # pairs whose negated claim is not claim_map's negation of the original claim


def check_adversarial(split: str, rows, original_rows, claim_map: dict[str, str]) -> AdversarialCheck:
    originals = {r.id: r for r in rows if not r.flag}
    copies = {r.id: r for r in rows if r.flag}
    ref = {r.id: r for r in original_rows}
    unpaired = sorted([i for i in copies if not i.endswith("-adversarial") or i[:-len("-adversarial")] not in originals]
                      + [i for i in originals if f"{i}-adversarial" not in copies])
    mismatch = sorted(i for i, r in originals.items() if i not in ref or
                      (r.warrant0, r.warrant1, r.label, r.reason, r.claim) !=
                      (ref[i].warrant0, ref[i].warrant1, ref[i].label, ref[i].reason, ref[i].claim))
    mismatch += sorted(set(ref) - set(originals))
    out = AdversarialCheck(split, len(rows), len(original_rows), len(originals), len(copies), unpaired, mismatch)
    for oid, o in originals.items():
        c = copies.get(f"{oid}-adversarial")
        if c is None:
            continue
        out.pairs += 1
        if (o.warrant0, o.warrant1, o.reason) == (c.warrant0, c.warrant1, c.reason) and o.label != c.label:
            out.same_warrants_reason_flipped += 1
            if o.claim == c.claim:
                out.contradictory.append(oid)
        if claim_map.get(o.claim) != c.claim:
            out.claim_not_from_map += 1
    return out
