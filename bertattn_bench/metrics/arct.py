"""Niven & Kao 2019 on ARCT, the model-free half: cue statistics (§4, Table 2), the adversarial set's construction
(§6), and the authors' shipped per-seed results (Tables 1, 3, 4) as reference distributions.

Cue statistics (P §4; ``../shared/papers/niven2019-notes.md`` §2), for a cue k (a unigram or bigram of a warrant's
tokens) over n arguments i with warrants T_0, T_1 (token sets) and label y_i:

* applicability α_k = #{i : k is in exactly one of the two warrants} (an integer count);
* productivity π_k = #{i applicable : the warrant holding k is the correct one} / α_k;
* coverage ξ_k = α_k / n.

The paper does not state its tokenisation, so it is a parameter (:data:`TOKENIZATIONS`); no variant reproduces
Table 2, and ``niven.not_table2`` reports that as an open discrepancy. The ``treebank`` variants use NLTK's Penn
Treebank word tokenizer (the one ``word_tokenize`` applies: ``n't``, ``'s`` split off, ``cannot`` → ``can not``,
punctuation split) per sentence split at ``.!?`` + space (``word_tokenize`` first runs Punkt, whose model is a
download; on ARCT's 5,622 sentences this split is what Punkt's would be for the cue counts). It replaced a hand copy
of the rules that left an opening single quote on its word (7 of 5,622 sentences: "'Starchitects'"), which moved
no recorded value.

The family's pass reads data files only: the model under test is not used (its name is kept in the pass result
for the table); the fine-tuned half of the paper is not here.
"""
from __future__ import annotations

import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..batching import Skipped
from ..plotting import pyplot, save_figure
from ..registry import Measurement, NotApplicable, family, figure, metric

# ---- tokenisation variants -------------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _treebank_sentence(text: str) -> list[str]:
    """NLTK's Penn Treebank word tokenizer (the one inside ``word_tokenize``) on one sentence."""
    from nltk.tokenize.destructive import NLTKWordTokenizer

    return NLTKWordTokenizer().tokenize(text)


def treebank_tokens(text: str) -> list[str]:
    """Penn Treebank tokens (NLTK ``word_tokenize``'s rules), lower-cased: "don't" → do n't, "cannot" → can not."""
    return [t.lower() for s in _SENTENCE_END.split(text.strip()) if s for t in _treebank_sentence(s)]


_CLEAN_SUBS = [(re.compile(p), r) for p, r in (
    (r"what's", "what is "), (r"\'s", " "), (r"\'ve", " have "), (r"can't", "cannot "), (r"n't", " not "),
    (r"i'm", "i am "), (r"i’m", "i am"), (r"\'re", " are "), (r"\'d", " would "), (r"\'ll", " will "),
    (r",", " "), (r"\.", " "), (r"'", " "), (r"\s{2,}", " "), (r"\d+", ""), (r"[^a-z\d ]", ""))]


def _clean(token: str) -> str:
    """The per-token ``clean`` of the authors' ``util/text.py`` (IKMLab/arct2, paper era): lower-case, n't → not,
    punctuation and digits removed."""
    token = token.lower()
    for regexp, sub in _CLEAN_SUBS:
        token = regexp.sub(sub, token)
    return token.strip()


def treebank_clean_tokens(text: str) -> list[str]:
    """≈ the authors' ``util/text.tokenize``: Treebank tokens, each cleaned (n't → not); empty tokens dropped and a
    cleaned token holding a space ("what is") split."""
    return [w for t in treebank_tokens(text) for w in _clean(t).split()]


_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")


TOKENIZATIONS = {
    "whitespace": lambda text: text.lower().split(),  # punctuation stays attached ("not," is not "not")
    "regex_words": lambda text: _WORD.findall(text.lower()),  # letters/digits, contractions kept whole ("don't")
    "treebank": treebank_tokens,
    "treebank_clean": treebank_clean_tokens,
}


# ---- cue statistics --------------------------------------------------------------------------------------------

def cues(tokens: list[str], ngrams: tuple[int, ...] = (1, 2)) -> set[str]:
    """The set of n-grams (space-joined) of one warrant's tokens."""
    return {" ".join(tokens[i:i + k]) for k in ngrams for i in range(len(tokens) - k + 1)}


@dataclass
class CueTable:
    """α and productive counts of every cue over ``n`` arguments of one split under one tokenisation."""

    n: int
    applicable: dict[str, int]
    productive: dict[str, int]

    def alpha(self, cue: str) -> int:
        return self.applicable.get(cue, 0)

    def productivity(self, cue: str) -> float:
        a = self.alpha(cue)
        return self.productive.get(cue, 0) / a if a else float("nan")

    def coverage(self, cue: str) -> float:
        return self.alpha(cue) / self.n if self.n else float("nan")

    def row(self, cue: str) -> str:
        return f"α={self.alpha(cue)} π={self.productivity(cue):.3f} ξ={self.coverage(cue):.3f} (n={self.n})"

    def top(self, min_productivity: float = 0.5, unigrams_only: bool = False, k: int = 5,
            key: str = "coverage") -> list[str]:
        """Cues with π ≥ ``min_productivity`` sorted by coverage (or productivity), best first (ties by name)."""
        pool = [c for c in self.applicable if self.productivity(c) >= min_productivity
                and (not unigrams_only or " " not in c)]
        score = self.coverage if key == "coverage" else self.productivity
        return sorted(pool, key=lambda c: (-score(c), -self.alpha(c), c))[:k]


def cue_table(items, tokenize, ngrams: tuple[int, ...] = (1, 2)) -> CueTable:
    """Niven & Kao's α/π counts for every cue: a cue is applicable to an argument when it is in exactly one
    warrant, productive when that warrant is the correct one (``item.label``)."""
    applicable, productive = Counter(), Counter()
    memo: dict[str, set[str]] = {}

    def of(text):
        if text not in memo:
            memo[text] = cues(tokenize(text), ngrams)
        return memo[text]

    n = 0
    for item in items:
        n += 1
        in0, in1 = of(item.warrant0), of(item.warrant1)
        for cue in in0 ^ in1:
            applicable[cue] += 1
            if (cue in in0) == (item.label == 0):
                productive[cue] += 1
    return CueTable(n, dict(applicable), dict(productive))


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


# ---- the pass ---------------------------------------------------------------------------------------------------

ORIGINAL_SPLITS = ("train", "dev", "test", "all", "train_swap")
ADVERSARIAL_SPLITS = ("train_swapped", "train_adv", "dev_adv", "test_adv")


@dataclass
class ArctResult:
    tables: dict[tuple[str, str], CueTable]  # (split, tokenisation) -> cue table
    split_sizes: dict[str, int]
    adversarial: dict[str, AdversarialCheck]
    claim_map: list  # ClaimMapEntry
    runs: dict  # experiment -> SeedRuns
    ngrams: tuple[int, ...] = (1, 2)

    def table(self, split: str, variant: str) -> CueTable:
        if (split, variant) not in self.tables:
            raise NotApplicable(f"no cue table for split {split!r} and tokenisation {variant!r} (splits: "
                                f"{', '.join(sorted({s for s, _ in self.tables}))}; tokenisations: "
                                f"{', '.join(TOKENIZATIONS)})")
        return self.tables[split, variant]

    def run(self, experiment: str):
        if experiment not in self.runs:
            raise NotApplicable(f"no shipped results for experiment {experiment!r} (have {', '.join(sorted(self.runs))})")
        return self.runs[experiment]


def compute_arct(data_dir: Path) -> tuple[ArctResult, int]:
    from ..data.arct import CLAIM_MAP, load_adversarial, load_original, load_shipped_results, read_claim_map
    from ..settings import data_file

    original = load_original(data_dir)
    original["all"] = original["train"] + original["dev"] + original["test"]
    adversarial = load_adversarial(data_dir)
    cmap = read_claim_map(data_file(data_dir, CLAIM_MAP))
    splits = {**{s: original[s] for s in ORIGINAL_SPLITS}, **adversarial}
    tables = {(s, v): cue_table(items, tok) for s, items in splits.items() for v, tok in TOKENIZATIONS.items()}
    mapping = {e.original: e.negated for e in cmap}
    checks = {s: check_adversarial(s, adversarial[s], original[s.removesuffix("_adv")], mapping)
              for s in ("train_adv", "dev_adv", "test_adv")}
    result = ArctResult(tables, {s: len(v) for s, v in splits.items()}, checks, cmap, load_shipped_results(data_dir))
    n_rows = sum(len(original[s]) for s in ("train", "dev", "test", "train_swap")) + sum(map(len, adversarial.values()))
    return result, n_rows


@dataclass
class ArctPass:
    """Prepared pass (a ``passes.Pass``); reads the ARCT files only, never runs the model."""

    family: str
    corpus: str
    data: str
    loaded: object
    data_dir: Path
    data_paths: list = field(default_factory=list)
    skipped: Skipped = field(default_factory=Skipped)
    encoded: list = field(default_factory=list)

    def nothing_to_measure(self) -> str | None:
        return None

    def artifacts(self, progress: bool = False) -> None:
        """Nothing to make: the pass reads the ARCT files only."""

    def run(self, progress: bool = False):
        from ..passes import PassResult

        start = time.perf_counter()
        result, n_rows = compute_arct(self.data_dir)
        return PassResult(self.family, self.corpus, self.data, self.loaded.info, result, n_rows, self.skipped,
                          time.perf_counter() - start)


@family("arct", corpora=("all",), default_corpus="all")
def prepare_arct(loaded, data_dir: Path, corpus: str = "all", limit: int | None = None,
                 batch_size: int = 32) -> ArctPass:
    """Niven & Kao 2019, model-free: every ARCT file (original, adversarial, claim_map, the authors' accs.csv).
    ``limit`` is ignored (the whole files take about a second) and the model is not used."""
    from ..data.arct import data_paths

    data = ("arct_original (train/dev/test, train-w-swap) + arct_adversarial (train-swapped, train/dev/test-adv-negated, "
            "claim_map, results_from_paper/*/accs.csv); model-free: the model under test is not used")
    return ArctPass("arct", corpus, data, loaded, Path(data_dir), data_paths(Path(data_dir)))


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
    detail = (f"OPEN DISCREPANCY: no tokenisation reproduces Table 2 (largest miss per tokenisation: "
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

ADV_TEST_HALF = 444  # rows in each half of test-adv-negated (original test and its negated copy)


def run_values(runs, column: str) -> np.ndarray:
    """Per-seed values of a column, or of a derived one:

    * ``adv_ceil``: Table 4's adversarial accuracy as the paper-era ``accs.py`` computed it,
      (ceil(test·444) + ceil(test_adv·444)) / 888 — the ceiling turns 221.99999 into 222;
    * ``adv_pooled``: the same pooled over both halves with correct rounding;
    * ``test_nondegenerate``: test accuracy of the runs with train accuracy ≥ 0.8 (P §3).
    """
    if column in ("adv_ceil", "adv_pooled"):
        if "test_adv" not in runs.columns:
            raise NotApplicable(f"{runs.experiment}: no test_adv column (not an adversarial run)")
        r = np.ceil if column == "adv_ceil" else np.round
        return (r(runs.array("test") * ADV_TEST_HALF) + r(runs.array("test_adv") * ADV_TEST_HALF)) / (2 * ADV_TEST_HALF)
    if column == "test_nondegenerate":
        return runs.array("test")[runs.array("train") >= 0.8]
    if column not in runs.columns:
        raise NotApplicable(f"{runs.experiment}: no column {column!r}")
    return runs.array(column)


def stat_of(values: np.ndarray, stat: str) -> float:
    from ..data.arct import Summary

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


# ---- figure -------------------------------------------------------------------------------------------------

PAPER_TABLE2 = {"train": (0.65, 0.66), "dev": (0.62, 0.44), "test": (0.52, 0.77), "all": (0.61, 0.64)}
FIGURE_SETTINGS = (("BERT-L", "bert_large", "test"), ("BERT-L W", "bert_large_w", "test"),
                   ("BERT-L R,W", "bert_large_rw", "test"), ("BERT-L C,W", "bert_large_cw", "test"),
                   ("BERT-B", "bert_base", "test"), ("BoV", "bov", "test"), ("BiLSTM", "bilstm", "test"),
                   ("BERT-L adv", "bert_large_adv", "adv_pooled"), ("BERT-L adv W", "bert_large_adv_w", "adv_pooled"),
                   ("BERT-L adv R,W", "bert_large_adv_rw", "adv_pooled"),
                   ("BERT-L adv C,W", "bert_large_adv_cw", "adv_pooled"))


@figure("arct")
def arct_figures(pass_results, directory: Path) -> list[Path]:
    """The authors' per-seed test accuracies per setting (strip + median), and π/ξ of "not" per split and
    tokenisation beside Table 2 — one pair of PNGs per pass (the data, not the model, decides them)."""
    plt = pyplot()
    paths = []
    for pr in pass_results:
        if not isinstance(pr.result, ArctResult):
            continue
        res = pr.result
        fig, ax = plt.subplots(figsize=(7.5, 3.4))
        rng = np.random.default_rng(0)
        labels = []
        for x, (label, exp, column) in enumerate(FIGURE_SETTINGS):
            if exp not in res.runs:
                continue
            v = run_values(res.runs[exp], column)
            ax.scatter(x + rng.uniform(-0.15, 0.15, len(v)), v, s=10, alpha=0.6)
            ax.hlines(np.median(v), x - 0.3, x + 0.3, color="k", lw=1)
            labels.append((x, f"{label}\n(n={len(v)})"))
        ax.axhline(0.5, color="grey", ls=":", lw=1, label="chance")
        ax.set_xticks([x for x, _ in labels], [t for _, t in labels], fontsize=6, rotation=45, ha="right")
        ax.set_ylabel("test accuracy (adv: pooled 888)")
        ax.set_title("Niven & Kao 2019: the authors' shipped runs, one dot per seed (line: median)", fontsize=8)
        ax.legend(fontsize=7)
        paths.append(save_figure(fig, directory, f"arct-shipped-runs-{pr.corpus}.png"))

        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        markers = dict(zip(TOKENIZATIONS, "osD^"))
        colours = dict(zip(PAPER_TABLE2, ("tab:blue", "tab:orange", "tab:green", "tab:red")))
        for s, (p, c) in PAPER_TABLE2.items():
            ax.scatter([c], [p], marker="*", s=120, color=colours[s], edgecolors="k", label=f"paper {s}")
            for v, mk in markers.items():
                t = res.table(s, v)
                ax.scatter([t.coverage("not")], [t.productivity("not")], marker=mk, color=colours[s], alpha=0.7)
        for v, mk in markers.items():  # legend entries for the tokenisations, in grey (colour = split)
            ax.scatter([], [], marker=mk, color="grey", label=v)
        ax.axhline(0.5, color="grey", ls=":", lw=1)
        ax.set_xlabel('coverage ξ of "not"')
        ax.set_ylabel('productivity π of "not"')
        ax.set_title('Table 2 (stars) vs our counts per tokenisation (colour = split)', fontsize=8)
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        paths.append(save_figure(fig, directory, f"arct-not-cue-{pr.corpus}.png"))
    return paths


__all__ = ["TOKENIZATIONS", "CueTable", "cue_table", "cues", "treebank_tokens", "treebank_clean_tokens",
           "check_adversarial", "ArctResult", "prepare_arct", "run_values"]
