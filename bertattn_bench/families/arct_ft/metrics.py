"""The arct_ft family's claim metrics (named by reference_numbers/niven2019_arct_ft.toml)."""
from __future__ import annotations

import math

from ...claims.registry import Measurement, NotApplicable, metric
from ...claims.stats import binomial_se
from ...data import arct_corpus as arct
from ...training import arct_finetune as arct_ft
from ...training.glue_pass import result_of
from .run import ArctFtResult, epochs_text

# ---- claim metrics (named by reference_numbers/niven2019_arct_ft.toml) ------------------------------------

def _result(pr, settings=None) -> ArctFtResult:
    """The pass's result (nothing to measure: :func:`~bertattn_bench.training.glue_pass.result_of` says why), or why
    the claim does not apply to it."""
    r = result_of(pr)
    if not isinstance(r, ArctFtResult):
        raise NotApplicable("not an arct_ft pass result")
    if settings and r.setting not in settings:
        raise NotApplicable(f"the claim is about setting(s) {', '.join(settings)}; this pass is {r.setting}")
    if not r.runs:
        raise NotApplicable("no fine-tuned run in this pass")
    return r


def summary(values) -> str:
    return arct.Summary.of(values).text()


def _runs_text(r: ArctFtResult) -> str:
    runs = ", ".join(f"seed {x.seed}: test {x.test_acc:.3f} (train {x.train_acc:.3f}, dev {x.dev_acc:.3f}, "
                     f"best epoch {x.meta.get('best_epoch')})" for x in r.runs)
    return f"{r.tier} tier, {epochs_text(r.recipe.get('epochs', '?'))}: {runs}"


def _degenerate_text(r: ArctFtResult) -> str:
    bad = r.degenerate()
    others = f"test over the others {summary(r.accs(True))}" if len(bad) < len(r.runs) else "no other run"
    return (f"degenerate runs (train < {arct_ft.DEGENERATE_TRAIN}): {len(bad)}/{len(r.runs)}"
            + (f" (seeds {[x.seed for x in bad]}; {others})" if bad else ""))


def _authors_text(r: ArctFtResult) -> str:
    return "; ".join(f"authors' {e}: {summary(v)}" for e, v in r.authors.items() if not e.endswith(":train"))


@metric("arct_ft_test")
def arct_ft_test(pr, stat: str = "median", settings=None) -> Measurement:
    """A statistic (mean, median, max, min) of our per-seed test accuracies; the detail gives every run, the
    degenerate count and the authors' distributions beside it."""
    r = _result(pr, settings)
    s = arct.Summary.of(r.accs())
    if stat not in ("mean", "median", "max", "min"):
        raise NotApplicable(f"unknown statistic {stat!r}")
    detail = (f"{r.setting}, ours: {s.text()} [{_runs_text(r)}]; {_degenerate_text(r)}; {_authors_text(r)}; "
              f"chance 0.5 ± {binomial_se(0.5, r.n_test):.3f} (binomial SE, n={r.n_test})")
    return Measurement(getattr(s, stat), n=r.n_test, n_unit=f"test arguments x {len(r.runs)} seeds", detail=detail,
                       unit="accuracy")


@metric("arct_ft_gap")
def arct_ft_gap(pr, passes, stat: str = "median", min_full: float = 0.55) -> Measurement:
    """stat(full input) − stat(this pass's input) over seeds (e.g. W only); NaN (does not hold) when the full input
    does not reach ``min_full``: then there is no cue-driven accuracy for the ablated input to account for."""
    r = _result(pr)
    (other,) = passes
    full = _result(other, ("full",))
    a, b = getattr(arct.Summary.of(full.accs()), stat), getattr(arct.Summary.of(r.accs()), stat)
    value = a - b if a >= min_full else float("nan")
    detail = (f"{stat} test accuracy: full {a:.3f} ({summary(full.accs())}) − {r.setting} {b:.3f} "
              f"({summary(r.accs())}) = {a - b:+.3f}" + ("" if a >= min_full else f"; full is below {min_full}: NaN")
              + f"; {_authors_text(r)}; paper (BERT Large): median full 0.712 vs W 0.675, max 0.770 vs 0.712")
    return Measurement(value, n=r.n_test, n_unit=f"test arguments x {len(r.runs)}+{len(full.runs)} seeds",
                       detail=detail, unit="accuracy")


@metric("arct_ft_adv_mean")
def arct_ft_adv_mean(pr) -> Measurement:
    """|mean pooled adversarial accuracy − 0.5| in binomial SEs of the test size (the seeds share one test set,
    so their mean keeps its sampling noise)."""
    r = _result(pr, ("adv",))
    accs = r.accs()
    se = binomial_se(0.5, r.n_test)
    detail = (f"pooled over {r.n_test} rows: {summary(accs)}; original half {summary(r.half_accs(False))}, "
              f"claim-negated half {summary(r.half_accs(True))}; SE {se:.4f}; {_degenerate_text(r)}; "
              f"{_authors_text(r)} (Table 4: 0.504 ± 0.01, median 0.505, max 0.533)")
    return Measurement(abs(float(accs.mean()) - 0.5) / se, n=r.n_test, n_unit=f"test rows x {len(r.runs)} seeds",
                       detail=detail, unit="SE")


@metric("arct_ft_adv_max")
def arct_ft_adv_max(pr, paper_max: float = 0.533) -> Measurement:
    """(max pooled adversarial accuracy − the paper's max) / noise, noise = sqrt(SE² + sd²): the test set's binomial
    SE at 0.5 and the measured population sd over our seeds."""
    r = _result(pr, ("adv",))
    accs = r.accs()
    se, sd = binomial_se(0.5, r.n_test), float(accs.std())
    noise = math.sqrt(se ** 2 + sd ** 2)
    detail = (f"max {accs.max():.4f} vs paper {paper_max} (+2 noise = {paper_max + 2 * noise:.4f}); noise "
              f"{noise:.4f} (SE {se:.4f}, seed sd {sd:.4f}, {len(accs)} seeds); per seed "
              + ", ".join(f"{x.seed}: {x.test_acc:.4f}" for x in r.runs) + f"; {_authors_text(r)}")
    return Measurement((float(accs.max()) - paper_max) / noise, n=r.n_test, n_unit=f"test rows x {len(r.runs)} seeds",
                       detail=detail, unit="noise units", values={"seeds": len(r.runs)})


@metric("arct_ft_degenerate")
def arct_ft_degenerate(pr) -> Measurement:
    """Share of runs whose train accuracy (best-dev weights) is below 0.8 (P §3's degenerate runs), with Wilson's
    95% bounds over the seed runs (issue 61: the share a seed draws; one run of one reads [0.21, 1])."""
    from ...claims.stats import wilson_bounds

    r = _result(pr)
    bad = r.degenerate()
    authors = "; ".join(f"authors' {e[:-6]}: {int((v < arct_ft.DEGENERATE_TRAIN).sum())}/{len(v)}"
                        for e, v in r.authors.items() if e.endswith(":train"))
    lo, hi = wilson_bounds(len(bad), len(r.runs))
    detail = (f"{r.setting}: {_degenerate_text(r)}; train accuracy per seed "
              + ", ".join(f"{x.seed}: {x.train_acc:.3f}" for x in r.runs) + f"; {authors}; Wilson 95% bounds over the "
              f"{len(r.runs)} run(s) [{lo / 100:.2f}, {hi / 100:.2f}]")
    return Measurement(len(bad) / len(r.runs), n=len(r.runs), n_unit="seed runs", detail=detail, unit="share",
                       bounds=(lo / 100, hi / 100), values={"seeds": len(r.runs)})
