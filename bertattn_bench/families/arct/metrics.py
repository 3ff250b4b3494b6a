"""Niven & Kao (the model-free arct family): the claim metrics on cues and on the authors' shipped per-seed runs
(named by reference_numbers/niven2019_arct.toml)."""
from __future__ import annotations

import numpy as np

from ...claims.registry import Measurement, NotApplicable, metric
from ..common.arct_runs import run_values
from .run import ArctResult
from .tokens import TOKENIZATIONS

# ---- claim metrics: cues ----------------------------------------------------------------------------------------

def _result(pr) -> ArctResult:
    if not isinstance(pr.result, ArctResult):
        raise NotApplicable("not an ARCT pass result")
    return pr.result


def _outside(value: float, printed: str) -> float:
    """How far ``value`` lies outside the rounding interval of the printed number ("0.09" → [0.085, 0.095]); a
    value on the interval's edge (0.7005 printed 0.701) is inside, whatever float noise says (1e-9)."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    d = abs(value - float(printed)) - 0.5 * 10.0 ** -decimals
    return d if d > 1e-9 else 0.0


def _cue_grid(res: ArctResult, cue: str, splits, reference: dict | None = None) -> str:
    """Per tokenisation, π/ξ (α) of ``cue`` on each split, with the paper's π/ξ beside where given."""
    lines = []
    for v in TOKENIZATIONS:
        cells = []
        for s in splits:
            t = res.table(s, v)
            ref = f" [paper {reference[s][0]}/{reference[s][1]}]" if reference and s in reference else ""
            cells.append(f"{s} {t.productivity(cue):.3f}/{t.coverage(cue):.3f} (α={t.alpha(cue)}, n={t.n}){ref}")
        lines.append(f"{v}: " + "; ".join(cells))
    return " | ".join(lines)


@metric("cue_min_productivity")
def cue_min_productivity(pr, cue: str = "not", variant: str = "treebank_clean", splits=("train", "dev"),
                         reference: dict | None = None) -> Measurement:
    """Smallest productivity π of ``cue`` over ``splits`` under one tokenisation; the detail gives π/ξ of the cue
    for every tokenisation and split beside the paper's Table 2."""
    res = _result(pr)
    values = {s: res.table(s, variant).productivity(cue) for s in splits}
    worst = min(values, key=values.get)
    n = sum(res.table(s, variant).n for s in splits)
    grid = _cue_grid(res, cue, ("train", "dev", "test", "all"), reference)
    detail = (f"{variant}: π({cue!r}) " + ", ".join(f"{s} {v:.3f}" for s, v in values.items())
              + f"; min on {worst}. π/ξ per tokenisation: {grid}")
    return Measurement(values[worst], n=n, n_unit="arguments", detail=detail, unit="π")


@metric("cue_table_gap")
def cue_table_gap(pr, cue: str = "not", reference: dict | None = None) -> Measurement:
    """How far the best tokenisation comes to the paper's Table 2: for each tokenisation the largest distance of
    π or ξ from the printed value (outside its rounding interval) over the splits; the value is the smallest of
    these (0 = every printed number reproduced)."""
    res = _result(pr)
    if not reference:
        raise NotApplicable("no reference table given (params.reference = {split = [π, ξ]})")
    gaps = {}
    for v in TOKENIZATIONS:
        worst = 0.0
        for s, (p, x) in reference.items():
            t = res.table(s, v)
            worst = max(worst, _outside(t.productivity(cue), str(p)), _outside(t.coverage(cue), str(x)))
        gaps[v] = worst
    best = min(gaps, key=gaps.get)
    n = sum(res.table(s, best).n for s in reference if s != "all")
    detail = ("OPEN DISCREPANCY: no tokenisation reproduces Table 2 (largest miss per tokenisation: "
              + ", ".join(f"{v} {g:.3f}" for v, g in gaps.items())
              + f"; best {best}). π/ξ per tokenisation: {_cue_grid(res, cue, list(reference), reference)}")
    return Measurement(gaps[best], n=n, n_unit="arguments", detail=detail, unit="|Δ|")


@metric("cue_strongest_unigram")
def cue_strongest_unigram(pr, cue: str = "not", variant: str = "treebank_clean", split: str = "all",
                          min_productivity: float = 0.6) -> Measurement:
    """Coverage margin of ``cue`` over the best other unigram with π ≥ ``min_productivity`` (> 0: ``cue`` has the
    highest coverage among productive unigrams). NaN when ``cue`` itself is below the productivity bar."""
    res = _result(pr)
    t = res.table(split, variant)
    others = [c for c in t.top(min_productivity, unigrams_only=True, k=len(t.applicable)) if c != cue]
    best_other = others[0] if others else None
    margin = (t.coverage(cue) - (t.coverage(best_other) if best_other else 0.0)
              if t.productivity(cue) >= min_productivity else float("nan"))
    per_variant = []
    for v in TOKENIZATIONS:
        tv = res.table(split, v)
        top = tv.top(min_productivity, unigrams_only=True, k=3)
        per_variant.append(f"{v}: " + ", ".join(f"{c!r} {tv.productivity(c):.2f}/{tv.coverage(c):.2f}" for c in top))
    bigrams = [c for c in t.top(min_productivity, k=40) if " " in c][:5]
    detail = (f"{split}, {variant}: {cue!r} {t.row(cue)}; best other unigram with π≥{min_productivity}: "
              + (f"{best_other!r} {t.row(best_other)}" if best_other else "none")
              + f". Top-3 unigrams by coverage (π/ξ) per tokenisation: {'; '.join(per_variant)}. Top bigrams ({variant}): "
              + ", ".join(f"{c!r} {t.productivity(c):.2f}/{t.coverage(c):.2f}" for c in bigrams))
    return Measurement(margin, n=t.n, n_unit="arguments", detail=detail, unit="Δξ")


@metric("cue_mirror")
def cue_mirror(pr, splits=("dev_adv", "test_adv"), cue: str = "not") -> Measurement:
    """Largest |π_k − 0.5| over every unigram and bigram cue, every tokenisation and ``splits`` (0: every warrant
    cue is mirrored across the labels)."""
    res = _result(pr)
    worst, where, n_cues = 0.0, "", 0
    for s in splits:
        for v in TOKENIZATIONS:
            t = res.table(s, v)
            for c, a in t.applicable.items():
                n_cues += 1
                d = abs(t.productive.get(c, 0) / a - 0.5)
                if d > worst:
                    worst, where = d, f"{c!r} on {s} ({v}): {t.row(c)}"
    checks = [res.adversarial[s] for s in splits if s in res.adversarial]
    pairs = ", ".join(f"{c.split}: {c.same_warrants_reason_flipped}/{c.pairs} pairs keep warrants and reason and "
                      f"flip the label" for c in checks)
    t_train, t_sw = res.table("train", "treebank_clean"), res.table("train_swapped", "treebank_clean")
    detail = (f"{n_cues} (cue, split, tokenisation) entries checked" + (f"; worst {where}" if where else "")
              + f". {pairs}. π({cue!r}, treebank_clean): " + ", ".join(
                  f"{s} {res.table(s, 'treebank_clean').productivity(cue):.3f}" for s in splits)
              + f"; train_adv {res.table('train_adv', 'treebank_clean').productivity(cue):.3f}. The errata's training "
              f"set (original + swapped warrants) keeps the cue: π on train_swapped {t_sw.productivity(cue):.3f} = "
              f"train {t_train.productivity(cue):.3f}")
    n = sum(res.table(s, "treebank_clean").n for s in splits)
    return Measurement(worst, n=n, n_unit="arguments", detail=detail, unit="|π−0.5|")


@metric("adversarial_rows")
def adversarial_rows(pr, splits=("train_adv", "dev_adv", "test_adv")) -> Measurement:
    """Defects in the adversarial files' construction: per split |rows − 2 × original rows| + unpaired rows +
    original-half rows that differ from the original ARCT (0: each is the original split plus one copy per row)."""
    res = _result(pr)
    total, parts = 0, []
    for s in splits:
        c = res.adversarial[s]
        defects = abs(c.rows - 2 * c.originals_expected) + len(c.unpaired) + len(c.original_mismatch)
        total += defects
        parts.append(f"{s}: {c.rows} rows = 2 × {c.originals_expected}? {c.rows == 2 * c.originals_expected}; "
                     f"{c.originals} original + {c.copies} negated; unpaired {len(c.unpaired)}; original half ≠ "
                     f"arct_original: {len(c.original_mismatch)}" + (f" {c.original_mismatch[:3]}" if c.original_mismatch else ""))
    n = sum(res.adversarial[s].rows for s in splits)
    return Measurement(float(total), n=n, n_unit="rows", detail="; ".join(parts), unit="defects")


@metric("claims_not_negated")
def claims_not_negated(pr, splits=("train_adv", "dev_adv", "test_adv")) -> Measurement:
    """claim_map entries whose 'negation' is the claim itself (case and spaces ignored); the detail lists them and
    counts the adversarial pairs they make identical inputs with opposite labels."""
    res = _result(pr)
    norm = lambda s: " ".join(s.lower().split())  # noqa: E731
    bad = [e for e in res.claim_map if norm(e.original) == norm(e.negated)]
    contradictory = {s: len(res.adversarial[s].contradictory) for s in splits}
    off_map = {s: res.adversarial[s].claim_not_from_map for s in splits}
    detail = ("not negated: " + ("; ".join(f"{e.original!r} → {e.negated!r} ({e.source.rsplit('/', 1)[-1]})" for e in bad)
                                 or "none")
              + ". Pairs with identical input (claim, reason, warrants) and opposite labels: "
              + ", ".join(f"{s} {k}/{res.adversarial[s].pairs}" for s, k in contradictory.items())
              + " (any model scores exactly 50% on them). Pairs whose negated claim is not claim_map's: "
              + ", ".join(f"{s} {k}" for s, k in off_map.items()))
    return Measurement(float(len(bad)), n=len(res.claim_map), n_unit="claim_map entries", detail=detail, unit="claims")


# ---- claim metrics: the authors' shipped runs ------------------------------------------------------------------

def stat_of(values: np.ndarray, stat: str) -> float:
    from ...data.arct_corpus import Summary

    s = Summary.of(values)
    if stat not in ("mean", "sd", "median", "max", "min"):
        raise NotApplicable(f"unknown statistic {stat!r} (mean, sd, median, max, min)")
    return getattr(s, stat)


@metric("shipped_vs_paper")
def shipped_vs_paper(pr, rows: dict, paper_seeds: int = 20) -> Measurement:
    """The paper's table rows recomputed from the shipped ``accs.csv``: ``rows = {experiment = {"<column>_<stat>" =
    "printed value"}}``. The value is the largest distance of a recomputed statistic from the printed one, outside
    the printed number's rounding interval (0 = every number reproduced). sd is the population sd (``np.std``)."""
    res = _result(pr)
    worst, parts, n = 0.0, [], 0
    for experiment, ref in rows.items():
        runs = res.run(experiment)
        n += runs.n
        cells = []
        for key, printed in ref.items():
            column, _, stat = key.rpartition("_")
            values = run_values(runs, column)
            value = stat_of(values, stat)
            d = _outside(value, str(printed))
            worst = max(worst, d)
            extra = f", n={len(values)}" if len(values) != runs.n else ""
            cells.append(f"{key} {value:.4f} (paper {printed}{', Δ %.4f' % d if d else ''}{extra})")
            if column == "adv_ceil":
                pooled = stat_of(run_values(runs, "adv_pooled"), stat)
                cells.append(f"correctly rounded {pooled:.4f}")
                if stat == "mean":
                    cells.append(f"halves: original test {stat_of(runs.array('test'), 'mean'):.4f}, negated "
                                 f"test_adv {stat_of(runs.array('test_adv'), 'mean'):.4f}")
        seeds = f"{runs.n} seeds" + (f" — only {runs.n} shipped, the paper states {paper_seeds}"
                                     if runs.n != paper_seeds else "")
        parts.append(f"{experiment} ({seeds}): " + ", ".join(cells))
    return Measurement(worst, n=n, n_unit="seed runs", detail="; ".join(parts), unit="|Δ|")


@metric("degenerate_runs")
def degenerate_runs(pr, experiment: str = "bert_large", train_below: float = 0.8) -> Measurement:
    """Runs whose train accuracy is below ``train_below`` (P §3: 'degenerate', near-random dev/test)."""
    res = _result(pr)
    runs = res.run(experiment)
    train, dev, test = runs.array("train"), runs.array("dev"), runs.array("test")
    bad = train < train_below
    good = stat_of(test[~bad], "mean"), stat_of(test[~bad], "sd")
    detail = (f"{experiment}: seeds {[s for s, b in zip(runs.seeds, bad) if b]} with train < {train_below}: train "
              f"{np.round(train[bad], 3).tolist()}, dev {np.round(dev[bad], 3).tolist()}, test "
              f"{np.round(test[bad], 3).tolist()}; test over the {int((~bad).sum())} other runs {good[0]:.3f} ± "
              f"{good[1]:.3f} (paper: 0.716 ± 0.04)")
    return Measurement(float(bad.sum()), n=runs.n, n_unit="seeds", detail=detail, unit="runs")


@metric("cue_gains_sum")
def cue_gains_sum(pr, full: str = "bert_large", w: str = "bert_large_w", rw: str = "bert_large_rw",
                  cw: str = "bert_large_cw", column: str = "test") -> Measurement:
    """|max(W) + (max(R,W) − max(W)) + (max(C,W) − max(W)) − max(full)|: the paper's arithmetic that W, R and C
    account for the whole peak (maxima of different seeds; the arithmetic is the paper's, not an additive model)."""
    res = _result(pr)
    m = {k: stat_of(run_values(res.run(e), column), "max") for k, e in (("full", full), ("w", w), ("rw", rw), ("cw", cw))}
    total = m["w"] + (m["rw"] - m["w"]) + (m["cw"] - m["w"])
    detail = (f"max {column}: W {m['w']:.3f} + R {m['rw'] - m['w']:+.3f} + C {m['cw'] - m['w']:+.3f} = {total:.3f} vs "
              f"full {m['full']:.3f} (paper 0.712 + 0.038 + 0.020 = 0.770); seeds: "
              + ", ".join(f"{e} {res.run(e).n}" for e in (full, w, rw, cw)))
    n = sum(res.run(e).n for e in (full, w, rw, cw))
    return Measurement(abs(total - m["full"]), n=n, n_unit="seed runs", detail=detail, unit="|Δ|")


@metric("input_ablation_gap")
def input_ablation_gap(pr, models=("bov", "bilstm"), ablation: str = "w", stat: str = "mean",
                       column: str = "test") -> Measurement:
    """Largest |stat(ablated input) − stat(full input)| over ``models`` (experiments ``<model>`` and
    ``<model>_<ablation>``); the detail gives every setting of each model."""
    res = _result(pr)
    worst, parts, n = 0.0, [], 0
    for m in models:
        full = stat_of(run_values(res.run(m), column), stat)
        abl = stat_of(run_values(res.run(f"{m}_{ablation}"), column), stat)
        worst = max(worst, abs(abl - full))
        n += res.run(m).n + res.run(f"{m}_{ablation}").n
        settings = [s for s in ("", "_w", "_rw", "_cw") if f"{m}{s}" in res.runs]
        parts.append(f"{m}: " + ", ".join(
            f"{(s[1:].upper() or 'full')} {stat_of(run_values(res.run(m + s), column), stat):.3f} (n={res.run(m + s).n})"
            for s in settings))
    return Measurement(worst, n=n, n_unit="seed runs", detail=f"{stat} {column}: " + "; ".join(parts), unit="|Δ|")


@metric("adv_exact_half")
def adv_exact_half(pr, experiments=("bert_large_adv_w", "bert_large_adv_rw")) -> Measurement:
    """Largest |pooled adversarial accuracy − 0.5| over every seed of ``experiments`` with correct rounding: a
    model that sees only W (or R, W) gets exactly one of each claim-negated pair right."""
    res = _result(pr)
    worst, parts, n = 0.0, [], 0
    for e in experiments:
        pooled, ceil = run_values(res.run(e), "adv_pooled"), run_values(res.run(e), "adv_ceil")
        worst = max(worst, float(np.max(np.abs(pooled - 0.5))))
        n += len(pooled)
        parts.append(f"{e}: pooled {pooled.min():.4f}..{pooled.max():.4f} (ceil formula max {ceil.max():.4f})")
    return Measurement(worst, n=n, n_unit="seed runs", detail="; ".join(parts), unit="|acc−0.5|")
