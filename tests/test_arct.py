"""Niven & Kao 2019 on ARCT, model-free: loaders (file:line errors), the cue definitions (α, π, ξ) on hand-made
arguments with hand-computed answers, tokenisers, the adversarial checks and the shipped-results arithmetic."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bertattn_bench.base.errors import DataError
from bertattn_bench.claims.registry import families
from bertattn_bench.data.arct_corpus import (
    ArctItem,
    Summary,
    load_shipped_results,
    read_accs,
    read_arct,
    read_claim_map,
)
from bertattn_bench.families import arct as m

HEADER = "#id\twarrant0\twarrant1\tcorrectLabelW0orW1\treason\tclaim\tdebateTitle\tdebateInfo"
ADV_HEADER = "#id\twarrant0\twarrant1\treason\tclaim\tdebateTitle\tdebateInfo\tcorrectLabelW0orW1\tadversarial"


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def row(i, w0, w1, label, reason="r", claim="c"):
    return f"{i}\t{w0}\t{w1}\t{label}\t{reason}\t{claim}\tt\tinfo"


def item(w0, w1, label, claim="c", reason="r", id="x", flag=None):
    return ArctItem(id, w0, w1, label, reason, claim, flag=flag)


# ---- loaders ----------------------------------------------------------------------------------------------------

def test_read_arct_original_keeps_quotes_and_names_columns(tmp_path):
    p = write(tmp_path / "train.txt", [HEADER, row("a", 'the "bad apples" win', "they lose", 1), row("b", "x", "y", 0)])
    a, b = read_arct(p)
    assert (a.id, a.warrant0, a.label, a.flag, a.source) == ("a", 'the "bad apples" win', 1, None, f"{p}:2")
    assert b.label == 0 and b.warrants == ("x", "y")


def test_read_arct_adversarial_column_order_csv_quoting_and_flag(tmp_path):
    p = write(tmp_path / "test-adv.csv", [ADV_HEADER,
                                          'a\t"the ""bad apples"" win"\tthey lose\tr\tc\tt\ti\t1\tFalse',
                                          "a-adversarial\tw\tv\tr\tnot c\tt\ti\t0\tTrue"])
    a, b = read_arct(p)
    assert a.warrant0 == 'the "bad apples" win' and a.label == 1 and a.flag is False
    assert (b.claim, b.label, b.flag) == ("not c", 0, True)


@pytest.mark.parametrize("bad, message", [
    (row("b", "x", "y", 2), "correctLabelW0orW1 must be 0 or 1"),
    ("b\tx\ty\t0\tr", "expected 8 tab-separated fields"),
    (row("b", "", "y", 0), "empty warrant0"),
    (row("a", "x", "y", 0), "duplicate id 'a' (first at line 2)"),
])
def test_read_arct_errors_name_file_and_line(tmp_path, bad, message):
    p = write(tmp_path / "dev.txt", [HEADER, row("a", "x", "y", 1), bad])
    with pytest.raises(DataError) as exc:
        read_arct(p)
    assert f"{p}:3" in str(exc.value) and message in str(exc.value)


def test_read_arct_header_and_flag_errors(tmp_path):
    p = write(tmp_path / "x.txt", ["#id\twarrant0\tclaim", "a\tb\tc"])
    with pytest.raises(DataError, match=r"x.txt:1: header lacks column\(s\) \['warrant1'"):
        read_arct(p)
    p = write(tmp_path / "y.csv", [ADV_HEADER, "a\tw\tv\tr\tc\tt\ti\t1\tyes"])
    with pytest.raises(DataError, match=r"y.csv:2: column adversarial must be True or False, found 'yes'"):
        read_arct(p)
    p = write(tmp_path / "z.csv", [ADV_HEADER, 'a\t"unclosed\tv\tr\tc\tt\ti\t1\tFalse'])
    with pytest.raises(DataError, match=r"z.csv:2: malformed TSV line"):
        read_arct(p)
    p = write(tmp_path / "swap.txt", [HEADER, row("a", "x", "y", 1), row("a", "y", "x", 0)])
    assert len(read_arct(p, unique_ids=False)) == 2  # UKPLab's swap file lists each id twice


def test_read_claim_map_and_its_errors(tmp_path):
    p = write(tmp_path / "claim_map.csv", ["original,negated", '"Say ""no""",Say yes', "A is good,A is bad"])
    entries = read_claim_map(p)
    assert [(e.original, e.negated) for e in entries] == [('Say "no"', "Say yes"), ("A is good", "A is bad")]
    assert entries[1].source == f"{p}:3"
    write(p, ["original,negated", "A is good,A is bad", "A is good,A is fine"])
    with pytest.raises(DataError, match=r"claim_map.csv:3: claim 'A is good' mapped to 'A is fine', but to 'A is bad' at line 2"):
        read_claim_map(p)
    write(p, ["original,negated", "A,B,C"])
    with pytest.raises(DataError, match=r"claim_map.csv:2: expected 2 comma-separated fields"):
        read_claim_map(p)


def test_read_accs_summary_uses_population_sd(tmp_path):
    p = write(tmp_path / "exp" / "accs.csv", ["run_no,seed,train,dev,test", "1,7,1.0,0.6,0.5", "2,8,0.5,0.6,0.7"])
    runs = read_accs(p)
    assert runs.experiment == "exp" and runs.seeds == [7, 8] and runs.n == 2
    s = runs.summary("test")
    # hand computation: mean 0.6; population sd sqrt(((0.1)^2 + (0.1)^2) / 2) = 0.1 (the sample sd would be 0.1414)
    assert s == Summary(mean=pytest.approx(0.6), sd=pytest.approx(0.1), median=pytest.approx(0.6),
                        max=pytest.approx(0.7), min=pytest.approx(0.5), n=2)


@pytest.mark.parametrize("bad, message", [
    ("2,8,0.5,0.6,1.2", "test accuracy 1.2 is outside [0, 1]"),
    ("2,8,0.5,x,0.7", "dev accuracy 'x' is not a number"),
    ("2,7,0.5,0.6,0.7", "seed 7 appears twice (first at line 2)"),
    ("2,8,0.5,0.6", "expected 5 comma-separated fields"),
])
def test_read_accs_errors_name_file_and_line(tmp_path, bad, message):
    p = write(tmp_path / "exp" / "accs.csv", ["run_no,seed,train,dev,test", "1,7,1.0,0.6,0.5", bad])
    with pytest.raises(DataError) as exc:
        read_accs(p)
    assert f"{p}:3" in str(exc.value) and message in str(exc.value)


def test_seeds_txt_must_match_the_runs(tmp_path):
    root = tmp_path / "arct_adversarial" / "results_from_paper" / "exp"
    write(root / "accs.csv", ["run_no,seed,train,dev,test", "1,7,1.0,0.6,0.5"])
    write(root / "seeds.txt", ["7"])
    assert load_shipped_results(tmp_path)["exp"].listed_seeds == [7]
    write(root / "seeds.txt", ["7", "9"])
    with pytest.raises(DataError, match=r"seeds.txt: lists seeds \[7, 9\]"):
        load_shipped_results(tmp_path)


# ---- cue definitions (P §4) on hand-made arguments -----------------------------------------------------------

# Hand-computed with whitespace tokens:
#   1: "not" only in w0, label 0 -> applicable, productive
#   2: "not" only in w1, label 0 -> applicable, not productive
#   3: "not" in both warrants     -> not applicable
#   4: "not" only in w1, label 1 -> applicable, productive (twice in w1: counted once)
# α(not) = 3, π(not) = 2/3, ξ(not) = 3/4.
ITEMS = [item("we should not go", "we should go", 0), item("it is fine", "it is not fine", 0),
         item("not now", "not later", 1), item("yes", "no not not", 1)]


def test_cue_table_alpha_productivity_coverage_by_hand():
    t = m.cue_table(ITEMS, m.TOKENIZATIONS["whitespace"])
    assert t.n == 4
    assert t.alpha("not") == 3 and t.productivity("not") == pytest.approx(2 / 3) and t.coverage("not") == 0.75
    assert (t.alpha("we"), t.alpha("is"), t.alpha("fine")) == (0, 0, 0)  # in both warrants: never applicable
    assert (t.alpha("now"), t.productivity("now")) == (1, 0.0)  # only in w0, label 1
    assert (t.alpha("later"), t.productivity("later")) == (1, 1.0)
    # bigrams: "should go" only in w1 (label 0), "not go" only in w0, "not fine" only in w1 (label 0)
    assert (t.alpha("should go"), t.productivity("should go")) == (1, 0.0)
    assert (t.alpha("not go"), t.productivity("not go")) == (1, 1.0)
    assert (t.alpha("not fine"), t.productivity("not fine")) == (1, 0.0)
    assert (t.alpha("not not"), t.productivity("not not")) == (1, 1.0)
    assert np.isnan(t.productivity("absent")) and t.coverage("absent") == 0.0


def test_cue_table_unigrams_only():
    t = m.cue_table(ITEMS, m.TOKENIZATIONS["whitespace"], ngrams=(1,))
    assert "not go" not in t.applicable and t.alpha("not") == 3


def test_mirrored_copies_make_every_cue_productivity_one_half():
    mirrored = ITEMS + [item(i.warrant0, i.warrant1, 1 - i.label) for i in ITEMS]
    t = m.cue_table(mirrored, m.TOKENIZATIONS["whitespace"])
    assert t.applicable and all(t.productivity(c) == 0.5 for c in t.applicable)
    swapped = ITEMS + [item(i.warrant1, i.warrant0, 1 - i.label) for i in ITEMS]  # swapping keeps the cue
    assert m.cue_table(swapped, m.TOKENIZATIONS["whitespace"]).productivity("not") == pytest.approx(2 / 3)


# ---- tokenisers ---------------------------------------------------------------------------------------------------

def test_treebank_rules():
    assert m.treebank_tokens("They don't, cannot and can't go. Really?") == [
        "they", "do", "n't", ",", "can", "not", "and", "ca", "n't", "go", ".", "really", "?"]
    assert m.treebank_clean_tokens("They don't, cannot and can't go. What's 42?") == [
        "they", "do", "not", "can", "not", "and", "ca", "not", "go", "what"]  # "'s" cleans to nothing
    assert m.TOKENIZATIONS["regex_words"]("Don't stop, not now") == ["don't", "stop", "not", "now"]
    assert m.TOKENIZATIONS["whitespace"]("Not, now") == ["not,", "now"]


def test_not_coverage_depends_on_tokenisation():
    items = [item("we don't go", "we go", 0), item("we cannot go", "we go", 1)]
    cov = {v: m.cue_table(items, tok).alpha("not") for v, tok in m.TOKENIZATIONS.items()}
    assert cov == {"whitespace": 0, "regex_words": 0, "treebank": 1, "treebank_clean": 2}


# ---- adversarial checks ------------------------------------------------------------------------------------------

def test_check_adversarial_pairs_contradictions_and_mismatches():
    orig = [item("a", "b", 0, claim="C1", id="1"), item("c", "d", 1, claim="C2", id="2"),
            item("e", "f", 0, claim="C3", id="3")]
    rows = [item("a", "b", 0, claim="C1", id="1", flag=False), item("a", "b", 1, claim="not C1", id="1-adversarial", flag=True),
            item("c", "d", 1, claim="C2", id="2", flag=False), item("c", "d", 0, claim="C2", id="2-adversarial", flag=True),
            item("e", "X", 0, claim="C3", id="3", flag=False)]  # 3: text differs from the original, and no copy
    c = m.check_adversarial("dev_adv", rows, orig, {"C1": "not C1", "C2": "C2"})
    assert (c.rows, c.originals_expected, c.originals, c.copies, c.pairs) == (5, 3, 3, 2, 2)
    assert c.unpaired == ["3"] and c.original_mismatch == ["3"]
    assert c.same_warrants_reason_flipped == 2 and c.contradictory == ["2"] and c.claim_not_from_map == 0


# ---- the whole pass on a hand-made data directory -----------------------------------------------------------

def make_data_dir(root: Path) -> Path:
    o = root / "arct_original"
    train = [row("t1", "we should not go", "we should go", 0, claim="A"), row("t2", "it is fine", "it is not fine", 1, claim="B")]
    dev = [row("d1", "not now", "later", 0, claim="A")]
    test = [row("s1", "yes", "no not", 1, claim="B"), row("s2", "go", "stay", 0, claim="Same")]
    write(o / "train-full.txt", [HEADER] + train)
    write(o / "dev-full.txt", [HEADER] + dev)
    write(o / "test-full.txt", [HEADER] + test)
    write(o / "train-w-swap-full.txt", [HEADER] + train + [row("t1", "we should go", "we should not go", 1, claim="A")])
    a = root / "arct_adversarial"
    neg = {"A": "not A", "B": "not B", "Same": "Same"}

    def adv(lines):
        out = []
        for line in lines:
            i, w0, w1, label, r, c, t, info = line.split("\t")
            out += [f"{i}\t{w0}\t{w1}\t{label}\t{r}\t{c}\t{t}\t{info}\tFalse",
                    f"{i}-adversarial\t{w0}\t{w1}\t{1 - int(label)}\t{r}\t{neg[c]}\t{t}\t{info}\tTrue"]
        return out

    head = HEADER + "\tadversarial"
    write(a / "train-adv-negated.csv", [head] + adv(train))
    write(a / "dev-adv-negated.csv", [head] + adv(dev))
    write(a / "test-adv-negated.csv", [head] + adv(test))
    write(a / "train-swapped.csv", [HEADER + "\tswapped"] + [ln + "\tFalse" for ln in train])
    write(a / "claim_map.csv", ["original,negated"] + [f"{k},{v}" for k, v in neg.items()])
    r = a / "results_from_paper"
    write(r / "full" / "accs.csv", ["run_no,seed,train,dev,test", "1,1,1.0,0.7,0.75", "2,2,0.5,0.5,0.5"])
    write(r / "w" / "accs.csv", ["run_no,seed,train,dev,test", "1,3,1.0,0.7,0.70"])
    write(r / "rw" / "accs.csv", ["run_no,seed,train,dev,test", "1,4,1.0,0.7,0.72"])
    write(r / "cw" / "accs.csv", ["run_no,seed,train,dev,test", "1,5,1.0,0.7,0.71"])
    # one seed at exactly 222/444 on both halves, stored a hair above/below as floats can be
    write(r / "adv_w" / "accs.csv", ["run_no,seed,train,dev,test,test_adv", f"1,6,1.0,0.5,{0.5 + 1e-12!r},{0.5 - 1e-12!r}"])
    return root


@pytest.fixture
def arct_pass(tmp_path):
    data = make_data_dir(tmp_path)
    loaded = SimpleNamespace(info=SimpleNamespace(name="fake", slug="fake"))
    prepared = families()["arct"].prepare(loaded, data, "all")
    assert prepared.nothing_to_measure() is None and prepared.loaded is loaded and "model-free" in prepared.data
    assert len(prepared.data_paths) == 9 + 5  # 9 data files + 5 accs.csv
    return prepared.run()


def measure(pr, name, **params):
    from bertattn_bench.claims.registry import load_all_metrics

    return load_all_metrics()[name](pr, **params)


def test_pass_cue_claims(arct_pass):
    res = arct_pass.result
    assert res.split_sizes["all"] == 5 and res.split_sizes["dev_adv"] == 2
    # all (whitespace): t1 not in w0, label 0 -> productive; t2 not in w1, label 1 -> productive;
    # d1 not in w0, label 0 -> productive; s1 not in w1, label 1 -> productive; s2 no "not": α=4, π=1, ξ=4/5
    t = res.table("all", "whitespace")
    assert (t.alpha("not"), t.productivity("not"), t.coverage("not")) == (4, 1.0, 0.8)
    got = measure(arct_pass, "cue_min_productivity", variant="whitespace", splits=["train", "dev"])
    assert got.value == 1.0 and got.n == 3
    gap = measure(arct_pass, "cue_table_gap", reference={"all": ["1.0", "0.80"]})
    assert gap.value == 0.0  # reproduced under every tokenisation
    gap = measure(arct_pass, "cue_table_gap", reference={"all": ["0.61", "0.64"]})
    assert gap.value == pytest.approx(1.0 - 0.61 - 0.005) and "OPEN DISCREPANCY" in gap.detail


def test_pass_adversarial_claims(arct_pass):
    assert measure(arct_pass, "cue_mirror", splits=["dev_adv", "test_adv"]).value == 0.0
    rows = measure(arct_pass, "adversarial_rows")
    assert rows.value == 0.0 and rows.n == 4 + 2 + 4
    neg = measure(arct_pass, "claims_not_negated")
    # "Same" maps to itself: one entry, and its test pair is an identical input with opposite labels
    assert neg.value == 1.0 and "test_adv 1/2" in neg.detail and "'Same'" in neg.detail


def test_pass_shipped_results(arct_pass):
    # full: test [0.75, 0.5] -> mean 0.625, population sd 0.125, median 0.625, max 0.75
    ok = measure(arct_pass, "shipped_vs_paper", rows={"full": {"test_mean": "0.625", "test_sd": "0.13",
                                                               "test_max": "0.750"}})
    assert ok.value == 0.0 and ok.n == 2 and "only 2 shipped" in ok.detail
    off = measure(arct_pass, "shipped_vs_paper", rows={"full": {"test_median": "0.630"}})
    assert off.value == pytest.approx(0.005 - 0.0005)
    assert measure(arct_pass, "degenerate_runs", experiment="full").value == 1.0  # train 0.5 < 0.8
    # max: W 0.70 + (RW 0.72 - 0.70) + (CW 0.71 - 0.70) = 0.73 vs full 0.75
    gains = measure(arct_pass, "cue_gains_sum", full="full", w="w", rw="rw", cw="cw")
    assert gains.value == pytest.approx(0.02)
    # the paper-era ceiling turns 222.0000000004 into 223: (223 + 222) / 888; correct rounding gives exactly 0.5
    assert m.run_values(arct_pass.result.run("adv_w"), "adv_ceil")[0] == pytest.approx(445 / 888)
    assert measure(arct_pass, "adv_exact_half", experiments=["adv_w"]).value == 0.0


def test_outside_rounding_interval():
    assert m.metrics._outside(0.0878, "0.09") == 0.0
    assert m.metrics._outside(0.5541, "0.552") == pytest.approx(0.0016)
    assert m.metrics._outside(0.5, "0.500") == 0.0


def test_treebank_tokens_are_nltks_word_tokenizer():
    """The treebank variants are NLTK's Penn Treebank word tokenizer per sentence (not a hand copy of its rules):
    an opening single quote is its own token, n't and 's split off, cannot -> can not."""
    assert m.treebank_tokens("'Starchitects' are ruining cities") == ["'", "starchitects", "'", "are", "ruining",
                                                                      "cities"]
    assert m.treebank_tokens("He can't go. She cannot!") == ["he", "ca", "n't", "go", ".", "she", "can", "not", "!"]
