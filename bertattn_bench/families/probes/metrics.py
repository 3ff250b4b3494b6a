"""Clark §5 probes: the claim metrics (named by reference_numbers/clark2019_probes.toml)."""
from __future__ import annotations

import numpy as np

from ...claims.registry import Measurement, NotApplicable, metric
from ...claims.stats import binomial_se_points, difference_se
from .constants import TIERS
from .run import ProbeResult

# ---- claim metrics (named by reference_numbers/clark2019_probes.toml) -----------------------------------------------

def _result(pr) -> ProbeResult:
    res = pr.result
    if res.n_eval_arcs == 0:
        raise NotApplicable("no scored arcs in the eval sentences")
    return res


REDUCED_NOTE = ("REDUCED BUDGET: the regression tier's seeded sample of the GUM train sentences; the verdict that counts "
                "is --tier full's (every sentence), and the two can differ")


def _train_note(res: ProbeResult) -> str:
    note = (f"trained on {res.n_train_sentences} GUM train sentences ({res.n_train_arcs} arcs, "
            f"{res.n_train_documents} documents; {res.seed_text()})")
    return note + (f"; {REDUCED_NOTE}" if TIERS.get(res.tier, {}).get("n_train") is not None else "")


def _bars(res: ProbeResult, probe: str, bars: dict) -> tuple[list[float], str]:
    """``uas(probe) - (uas(bar) + margin)`` per bar, and a readable line."""
    gaps, parts = [], []
    for name, margin in bars.items():
        level = res.uas(name) + margin
        gaps.append(res.uas(probe) - level)
        parts.append(f"{res.label(name)} {res.uas(name):.1f} {'+' if margin >= 0 else '-'} {abs(margin):g}"
                     f" = {level:.1f}")
    return gaps, f"{res.label(probe)} {res.uas(probe):.1f} vs " + ", ".join(parts)


def _gap_se(res: ProbeResult, probe: str, bar: str) -> float:
    """SE of UAS(probe) - UAS(bar) on the same eval arcs (binomial, taken as independent: errs wide)."""
    return difference_se((res.uas(probe), res.n_eval_arcs), (res.uas(bar), res.n_eval_arcs))


@metric("probe_uas")
def probe_uas(pr, probe: str) -> Measurement:
    """UAS (%) of a probe or baseline of Clark Table 3 on the eval arcs."""
    res = _result(pr)
    return Measurement(res.uas(probe), n=res.n_eval_arcs, n_unit="arcs", unit="UAS",
                       standard_error=binomial_se_points(res.uas(probe), res.n_eval_arcs),
                       detail=f"{res.describe()}; {_train_note(res)}")


@metric("probe_margin_over")
def probe_margin_over(pr, probe: str, bars: dict) -> Measurement:
    """How far the probe's UAS clears the highest of ``bars`` (name → margin in points); >= 0: clears them all."""
    res = _result(pr)
    gaps, line = _bars(res, probe, bars)
    return Measurement(min(gaps), n=res.n_eval_arcs, n_unit="arcs", unit="points over the highest bar",
                       standard_error=_gap_se(res, probe, list(bars)[int(np.argmin(gaps))]),
                       detail=f"{line}; {_train_note(res)}")


@metric("probe_margin_under")
def probe_margin_under(pr, probe: str, bars: dict) -> Measurement:
    """How far the probe's UAS stays under the lowest of ``bars`` (name → margin); <= 0: under them all."""
    res = _result(pr)
    gaps, line = _bars(res, probe, bars)
    return Measurement(max(gaps), n=res.n_eval_arcs, n_unit="arcs", unit="points over the lowest bar",
                       standard_error=_gap_se(res, probe, list(bars)[int(np.argmax(gaps))]),
                       detail=f"{line}; random init: {res.random_init}; {_train_note(res)}")


@metric("probe_vs_structural")
def probe_vs_structural(pr, probe: str = "attn_words") -> Measurement:
    """Clark §5: the probe's UAS minus Hewitt & Manning's structural probe's UUAS on the same model and eval set
    (the paper: 77 vs 80, "not directly comparable": directed heads vs an undirected minimum spanning tree)."""
    res = _result(pr)
    uuas = res.structural_uuas()
    if uuas is None:
        raise NotApplicable("this probes pass trained no structural probe")
    sts = [x.structural for x in res.seed_sets()]
    st = sts[0]
    what = st.describe() if len(sts) == 1 else (f"structural probes {uuas:.1f} UUAS (mean of seeds: "
                                                 + ", ".join(f"{x.uuas:.1f} at layer {x.layer}" for x in sts) + ")")
    return Measurement(res.uas(probe) - uuas, n=res.n_eval_arcs, n_unit="arcs", unit="points (UAS - UUAS)",
                       standard_error=difference_se((res.uas(probe), res.n_eval_arcs), (uuas, st.n_edges)),
                       detail=f"{res.label(probe)} {res.uas(probe):.1f} UAS vs {what}; {_train_note(res)}",
                       values={"structural_layer": st.layer, "structural_uuas": uuas, "probe_uas": res.uas(probe)})
