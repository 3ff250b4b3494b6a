"""Clark §4.3 coreference: GUM Entity= parsing, windows, baselines, the reducer on planted maps, the claim metrics.

The toy document (fixtures/coref/GUM_toy_coref.conllu), document word indices:
  S1  0 John 1 Smith 2 saw 3 Zbrowskiova 4 .                     e1=[John Smith]  e2=[Zbrowskiova] (4 pieces)
  S2  5 He 6 gave 7 her 8 a 9 hat 10 .                           e1=He  e2=her  e4=[a hat] (singleton: dropped)
  S3  11 John 12 Smith 13 and 14 John 15 Doe 16 , 17 a 18 doctor 19 , 20 met 21 .
                                                                 e1=[John Smith]  e3=[John Doe]  [a doctor] (appos: dropped)
  S4  22 Doe 23 thanked 24 John 25 Smith 26 .                    e3=Doe  e1=[John Smith]
  S5  27 The 28 doctor 29 left 30 .                              e3=[The doctor]
Anaphors (head word: nearest / head-word / rules correct):
  He 5 (pronoun: F F F), her 7 (pronoun: F F T — "He" fails gender), John 11 (proper: F T T),
  Doe 22 (proper: T F T), John 24 (proper: F F T — head-word finds John Doe, the full string finds John Smith),
  doctor 28 (nominal: F F F — the appositive "a doctor" is not a mention).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from bertattn_bench.base.errors import DataError
from bertattn_bench.claims.registry import METRICS, NotApplicable, load_all_metrics
from bertattn_bench.claims.stats import difference_se
from bertattn_bench.data.coref_corpus import load_documents, make_windows, read_gum_document
from bertattn_bench.data.coref_documents import span_head
from bertattn_bench.engine.batching import encode_words, make_batch
from bertattn_bench.families.coref import CorefReducer, CorefResult, baseline_counts

TOY = Path(__file__).resolve().parent.parent / "fixtures" / "coref" / "GUM_toy_coref.conllu"
EXPECTED = {  # head word -> (kind, antecedent heads, nearest, head_word, rules)
    5: ("pronoun", (0,), False, False, False),
    7: ("pronoun", (3,), False, False, True),
    11: ("proper", (0, 5), False, True, True),
    22: ("proper", (14,), True, False, True),
    24: ("proper", (0, 5, 11), False, False, True),
    28: ("nominal", (14, 22), False, False, False),
}


@pytest.fixture(scope="module")
def doc():
    """The toy read as the project's earlier setup (UPOS types, UD name heads): the EXPECTED table above."""
    return read_gum_document(TOY, typing="upos", name_heads="ud")


@pytest.fixture(scope="module")
def window(doc, tokenizer):
    windows, stats = make_windows([doc], tokenizer, 128)
    assert len(windows) == 1 and stats.n_skipped_sentences == 0
    return windows[0]


# ---- data --------------------------------------------------------------------------------------------------------

def test_mentions_heads_kinds_and_drops(doc):
    got = [(m.start, m.end, m.entity, m.head, m.kind) for m in doc.mentions]
    assert got == [(0, 2, "1", 0, "proper"), (3, 4, "2", 3, "proper"), (5, 6, "1", 5, "pronoun"),
                   (7, 8, "2", 7, "pronoun"), (11, 13, "1", 11, "proper"), (14, 16, "3", 14, "proper"),
                   (22, 23, "3", 22, "proper"), (24, 26, "1", 24, "proper"), (27, 29, "3", 28, "nominal")]
    assert doc.n_singletons == 1 and doc.n_dropped == 1
    assert doc.mentions[0].source.endswith("GUM_toy_coref.conllu:6")


def test_span_head_is_the_word_headed_outside():
    heads = [2, 0, -1, 2, 3]  # 0 -> 2, 1 -> 0, 2 root, 3 -> 2, 4 -> 3
    assert span_head(0, 2, heads) == 0
    assert span_head(3, 5, heads) == 3
    assert span_head(0, 5, heads) == 2


def test_anaphors_and_baselines(window):
    got = {a.head: (a.kind, a.antecedent_heads, a.nearest, a.head_word, a.rules) for a in window.anaphors}
    assert got == EXPECTED
    counts = baseline_counts([window])
    assert counts["nearest"].tolist() == [0, 1, 0]  # pronoun, proper, nominal
    assert counts["head_word"].tolist() == [0, 1, 0]
    assert counts["rules"].tolist() == [1, 3, 0]


def test_windows_keep_antecedents_inside(doc, tokenizer):
    pieces = [sum(len(tokenizer.tokenize(w)) for w in doc.words[s:e])
              for s, e in zip(doc.sentence_starts, doc.sentence_starts[1:] + [len(doc.words)])]
    windows, stats = make_windows([doc], tokenizer, pieces[0] + pieces[1] + 2)  # S1+S2 fit exactly
    assert [w.offset for w in windows][:1] == [0] and len(windows[0].words) == 11
    assert {a.head for a in windows[0].anaphors} == {5, 7}
    for w in windows:
        assert len(encode_words(tokenizer, 0, w.words).input_ids) <= pieces[0] + pieces[1] + 2
        for a in w.anaphors:
            assert all(0 <= h < len(w.words) for h in a.antecedent_heads)
    # a window too small for S3 alone: S3 is skipped (counted), its mentions never reach an anaphor
    windows, stats = make_windows([doc], tokenizer, pieces[2] + 1)
    assert stats.n_skipped_sentences >= 1
    assert all(not set(range(w.offset, w.offset + len(w.words))) & set(range(11, 22)) for w in windows)


# ---- Clark's setup: PTB typing, last-word name heads, first-128-piece truncation, corpus variants --------------

def test_ptb_typing_and_last_word_name_heads(tmp_path):
    from bertattn_bench.data.coref_documents import name_head, ptb_kind

    assert [ptb_kind(t) for t in ("PRP", "PRP$", "NNP", "NNPS", "DT", "WP", "NN", "VB", "_")] == \
        ["pronoun", "pronoun", "proper", "proper"] + ["nominal"] * 5
    # "John Smith" (UD: John heads Smith by flat) -> Smith; a non-flat dependent does not move the head
    assert name_head(0, 0, 2, [-1, 0], ["root", "flat"]) == 1
    assert name_head(0, 0, 2, [-1, 0], ["root", "flat:name"]) == 1
    assert name_head(1, 0, 2, [1, -1], ["amod", "root"]) == 1
    doc = read_gum_document(TOY)  # Clark's defaults
    got = [(m.head, m.kind) for m in doc.mentions]
    assert got == [(1, "proper"), (3, "proper"), (5, "pronoun"), (7, "pronoun"), (12, "proper"), (15, "proper"),
                   (22, "proper"), (25, "proper"), (28, "nominal")]
    assert doc.n_name_heads_moved == 4 and doc.typing == "ptb" and doc.name_heads == "last"
    # typing reads XPOS, not UPOS: a PROPN tagged NN is nominal under ptb, proper under upos
    text = TOY.read_text(encoding="utf-8").replace("Zbrowskiova\tzbrowskiova\tPROPN\tNNP",
                                                   "Zbrowskiova\tzbrowskiova\tPROPN\tNN")
    path = _write(tmp_path, text)
    assert read_gum_document(path).mentions[1].kind == "nominal"
    assert read_gum_document(path, typing="upos").mentions[1].kind == "proper"
    # no XPOS: ptb typing refuses, naming file:line of the head word
    bad = _write(tmp_path, text.replace("He\the\tPRON\tPRP", "He\the\tPRON\t_"))
    with pytest.raises(DataError, match=r"GUM_bad.conllu:\d+: head word 'He' .* no XPOS"):
        read_gum_document(bad)
    assert read_gum_document(bad, typing="upos").mentions[2].kind == "pronoun"


def test_truncation_keeps_the_first_pieces_only(doc, tokenizer):
    from bertattn_bench.data.coref_corpus import truncate_documents

    pieces = [max(1, len(tokenizer.tokenize(w))) for w in doc.words]
    windows, stats = truncate_documents([doc], tokenizer, 128)
    assert len(windows) == 1 and len(windows[0].words) == len(doc.words)
    # cut inside S3, after "John Smith and John" (word 14): [John Doe] straddles the cut, S4/S5 are not read
    budget = sum(pieces[:14 + 1]) + 2
    windows, stats = truncate_documents([doc], tokenizer, budget)
    assert len(windows) == 1 and windows[0].offset == 0 and len(windows[0].words) == 15
    assert {a.head for a in windows[0].anaphors} == {5, 7, 11}
    assert stats.n_cut_mentions == 1 and stats.n_windows == 1
    assert len(encode_words(tokenizer, 0, windows[0].words).input_ids) <= budget
    windows, _ = truncate_documents([doc], tokenizer, budget - 1)  # one piece less: John (14) is cut off
    assert len(windows[0].words) == 14


def test_corpus_variants():
    from bertattn_bench.data.coref_corpus import corpus_variants, parse_corpus

    assert parse_corpus("gum_dev") == ("gum_dev", False, "ptb", "last")
    assert parse_corpus("gum_dev_windows") == ("gum_dev", True, "ptb", "last")
    assert parse_corpus("gum_test_ud") == ("gum_test", False, "upos", "ud")
    assert parse_corpus("gum_train_windows_ud") == ("gum_train", True, "upos", "ud")
    assert parse_corpus("litbank_windows") == ("litbank", True, "ptb", "last")
    assert "litbank_ud" not in corpus_variants()
    for bad in ("litbank_ud", "gum_dev_ud_windows", "gum", "gum_dev_"):
        with pytest.raises(DataError, match="unknown coreference corpus"):
            parse_corpus(bad)


def _write(tmp_path, text: str) -> Path:
    p = tmp_path / "GUM_bad.conllu"
    p.write_text(text, encoding="utf-8")
    return p


def test_malformed_entity_brackets_name_file_and_line(tmp_path):
    head = "# newdoc id = GUM_bad\n# sent_id = b-1\n"
    row = "1\tJohn\tjohn\tPROPN\t_\t_\t0\troot\t_\t{}\n"
    with pytest.raises(DataError, match=r"GUM_bad.conllu:3: .*closes '7'"):
        read_gum_document(_write(tmp_path, head + row.format("Entity=7)") + "\n"))
    with pytest.raises(DataError, match=r"GUM_bad.conllu:3: .*never closed"):
        read_gum_document(_write(tmp_path, head + row.format("Entity=(7-person-new-nnnnn-cf1-1-coref") + "\n"))
    with pytest.raises(DataError, match=r"GUM_bad.conllu:3: malformed Entity="):
        read_gum_document(_write(tmp_path, head + row.format("Entity=(7-x)junk") + "\n"))


def test_splits_from_ud_newdoc_lines(tmp_path):
    data = _toy_data_dir(tmp_path)
    assert [d.doc_id for d in load_documents(data, "gum_dev")] == ["GUM_toy_coref"]
    assert [d.doc_id for d in load_documents(data, "gum_train")] == ["GUM_toy_other"]
    with pytest.raises(DataError, match="unknown coreference corpus"):
        load_documents(data, "conll2012")


# ---- the reducer on planted attention ----------------------------------------------------------------------------

def _pieces(enc, w):
    return [t for t, wi in enumerate(enc.word_index) if wi == w]


def _run_planted(window, tokenizer, rows_for, n_heads=2):
    """One layer; head k's map from ``rows_for(k, enc)`` = {query word: {key piece: weight}}; other rows → [CLS]."""
    enc = encode_words(tokenizer, 0, window.words)
    batch = make_batch([enc], tokenizer, torch.device("cpu"), with_words=True)
    t = len(enc.input_ids)
    probs = torch.zeros(1, n_heads, t, t)
    probs[..., 0] = 1.0
    for k in range(n_heads):
        for w, keys in rows_for(k, enc).items():
            for q in _pieces(enc, w):
                probs[0, k, q] = 0.0
                for key, v in keys.items():
                    probs[0, k, q, key] = v
    red = CorefReducer([window], n_layers=1, n_heads=n_heads, device=torch.device("cpu"))
    red.start_batch(batch)
    red.update(0, probs)
    return red.finalize()


def test_reducer_counts_antecedent_hits(window, tokenizer):
    def rows(k, enc):
        if k == 0:  # head 0: every anaphor → its latest antecedent's head word (first piece)
            return {a.head: {_pieces(enc, a.antecedent_heads[-1])[0]: 1.0} for a in window.anaphors}
        return {a.head: {_pieces(enc, a.head - 1)[0]: 1.0} for a in window.anaphors}  # head 1: previous word

    res = _run_planted(window, tokenizer, rows)
    assert res.n.tolist() == [2, 3, 1]
    assert res.correct[0, :, 0].tolist() == [2, 3, 1]
    assert res.correct[0, :, 1].tolist() == [0, 0, 0]
    # head 0 is right on every anaphor: "both right" = the baselines' own hits per type; head 1 on none
    for i, name in enumerate(("nearest", "head_word", "rules")):
        assert res.both[0, :, i, 0].tolist() == {"nearest": [0, 1, 0], "head_word": [0, 1, 0],
                                                 "rules": [1, 3, 0]}[name]
        assert res.both[0, :, i, 1].tolist() == [0, 0, 0]
    res.baseline_correct = baseline_counts([window])
    # paired SE vs rules (n 6): head right / rules wrong on 2, the reverse on 0: sqrt(2 - 4/6) / 6
    assert res.paired_se(0, 0, "rules") == pytest.approx(100 * (2 - 4 / 6) ** 0.5 / 6)
    # head 1 (0 of 6) vs nearest (1 of 6): c = 1: sqrt(1 - 1/6) / 6
    assert res.paired_se(0, 1, "nearest") == pytest.approx(100 * (1 - 1 / 6) ** 0.5 / 6)
    assert res.paired_se(0, 0, "rules", "proper") == pytest.approx(0.0)  # 3 of 3 both


def test_reducer_sums_pieces_attended_to_and_skips_self(window, tokenizer):
    """'her' (7) spreads 0.2 over each of Zbrowskiova's 4 pieces (sum 0.8) and gives 0.35 to 'gave': the word-level
    argmax is Zbrowskiova (the antecedent). In head 1 'her' attends most to itself (excluded), then to 'He' (wrong).
    'He' (5) attends to 'gave' in both heads (wrong)."""
    def rows(k, enc):
        he = {5: {_pieces(enc, 6)[0]: 1.0}}
        if k == 0:
            keys = {p: 0.2 for p in _pieces(enc, 3)}
            keys[_pieces(enc, 6)[0]] = 0.35
            return {7: keys, **he}
        return {7: {_pieces(enc, 7)[0]: 0.7, _pieces(enc, 5)[0]: 0.3}, **he}

    res = _run_planted(window, tokenizer, rows)
    pronoun = res.kinds.index("pronoun")
    assert res.correct[0, pronoun, 0] == 1
    assert res.correct[0, pronoun, 1] == 0


def test_reducer_neighbour_mass_and_pronoun_heads_metric(window, tokenizer):
    """Kovaleva §4.5 on the coreference pass: head 0 puts every query on the previous piece, head 1 on [CLS].
    The ±1 mass counts ordinary keys only: of the t queries, q = 0 ([CLS] on itself) and q = 1 (on [CLS]) get
    nothing, so head 0 = (t - 2) / t; head 1 = 0. The metric divides the top head's mass by the median's."""
    enc = encode_words(tokenizer, 0, window.words)
    batch = make_batch([enc], tokenizer, torch.device("cpu"), with_words=True)
    t = len(enc.input_ids)
    probs = torch.zeros(1, 2, t, t)
    probs[0, 0, 0, 0] = 1.0
    for q in range(1, t):
        probs[0, 0, q, q - 1] = 1.0
    probs[0, 1, :, 0] = 1.0
    red = CorefReducer([window], n_layers=1, n_heads=2, device=torch.device("cpu"))
    red.start_batch(batch)
    red.update(0, probs)
    res = red.finalize()
    assert res.neighbour[0].tolist() == pytest.approx([(t - 2) / t, 0.0])
    load_all_metrics()
    res = _result([(6, 8, 5), (1, 1, 1)], BASE)
    res.neighbour = torch.tensor([[0.1, 0.3]])  # head 1-1 resolves most pronouns; median of (0.1, 0.3) = 0.2
    m = METRICS["coref_pronoun_heads_diagonal"](_PR(res), k=1)
    assert m.value == pytest.approx(0.1 / 0.2) and m.n == 10 and "1-1 (acc% 60.00, ±1 mass 0.10)" in m.detail
    with pytest.raises(NotApplicable, match="most of them"):
        METRICS["coref_pronoun_heads_diagonal"](_PR(res), k=2)


def test_tiny_model_pass_batched_equals_one_by_one(tmp_path, tiny):
    from bertattn_bench.families.coref import prepare_coref

    data = _toy_data_dir(tmp_path)
    a = prepare_coref(tiny, data, "gum_dev_windows_ud", batch_size=8).run().result
    b = prepare_coref(tiny, data, "gum_dev_windows_ud", batch_size=1).run().result
    assert a.count() == 6 and a.n_documents == 1
    assert torch.equal(a.correct, b.correct)
    assert a.correct.shape == (tiny.info.n_layers, 3, tiny.info.n_heads)
    # issue 61: the per-window counts and ±1 mass add back up to the pooled ones (every window once)
    whole = a.resample(torch.arange(a.n_windows))
    assert torch.equal(whole.correct.double(), a.correct.double()) and torch.equal(whole.n, a.n)
    assert torch.allclose(whole.neighbour.double(), a.neighbour.double(), atol=1e-6)
    assert torch.equal(b.correct_per_window.sum(0).permute(1, 0, 2).double(), b.correct.double())
    assert a.baseline("rules") == pytest.approx(100 * 4 / 6)
    # Clark's default (first 128 pieces, PTB types, last-word name heads): the toy fits, every name is NNP
    c = prepare_coref(tiny, data, "gum_dev", batch_size=8).run().result
    assert c.count() == 6 and c.n_windows == 1
    assert c.count("proper") == 3 and c.count("pronoun") == 2 and c.count("nominal") == 1


def _toy_data_dir(tmp_path) -> Path:
    data = tmp_path / "data"
    (data / "gum" / "documents").mkdir(parents=True)
    (data / "ud_english_gum").mkdir()
    shutil.copy(TOY, data / "gum" / "documents" / TOY.name)
    other = TOY.read_text(encoding="utf-8").replace("GUM_toy_coref", "GUM_toy_other")
    (data / "gum" / "documents" / "GUM_toy_other.conllu").write_text(other, encoding="utf-8")
    (data / "ud_english_gum" / "en_gum-ud-dev.conllu").write_text("# newdoc id = GUM_toy_coref\n", encoding="utf-8")
    (data / "ud_english_gum" / "en_gum-ud-test.conllu").write_text("# newdoc id = GUM_none\n", encoding="utf-8")
    return data


# ---- claim metrics on a result with known numbers ----------------------------------------------------------------

class _PR:
    def __init__(self, result):
        self.result = result


def _result(head_correct, baselines, n=(10, 10, 10)) -> CorefResult:
    """One layer, two heads; ``head_correct[k]`` = per-type correct counts of head k."""
    correct = torch.tensor([head_correct], dtype=torch.float64).transpose(1, 2)  # (1, kinds, heads)
    return CorefResult(("pronoun", "proper", "nominal"), correct, torch.tensor(n),
                       {k: torch.tensor(v, dtype=torch.float64) for k, v in baselines.items()})


BASE = {"nearest": (3, 3, 2), "head_word": (5, 7, 4), "rules": (7, 8, 6)}  # percent = x10


def test_best_head_gap_and_type_order():
    load_all_metrics()
    res = _result([(6, 8, 5), (1, 1, 1)], BASE)  # head 1-1: 60/80/50, all 63.3; head-word 53.3, nearest 26.7
    m = METRICS["coref_best_head_gap"](_PR(res), baselines=("head_word", "nearest"), margins=(0, 15))
    assert m.head == "1-1" and m.n == 30
    assert m.value == pytest.approx(min(190 / 3 - 160 / 3, 190 / 3 - 80 / 3 - 15))
    # its standard error: the binding bar's (head-word) difference, binomial over the 30 anaphors
    assert m.standard_error == pytest.approx(difference_se((190 / 3, 30), (160 / 3, 30)))
    assert m.standard_error == pytest.approx(100 * ((19 / 30 * 11 / 30 + 16 / 30 * 14 / 30) / 30) ** 0.5)
    order = METRICS["coref_type_order"](_PR(res))
    assert order.value == pytest.approx(min(80 - 60, 60 - 50))
    assert order.standard_error == pytest.approx(difference_se((60, 10), (50, 10)))  # pronoun - nominal binds
    weak = _result([(1, 1, 2), (0, 0, 0)], BASE)  # best head 13.3 <= nearest 26.7: no coreference head
    with pytest.raises(NotApplicable, match="no coreference head"):
        METRICS["coref_type_order"](_PR(weak))


def test_baseline_rank_nominal_gap_and_named_head():
    load_all_metrics()
    res = _result([(6, 8, 5), (1, 1, 1)], BASE)
    for name, rank in (("nearest", 1), ("head_word", 2), ("rules", 3)):
        assert METRICS["coref_baseline_rank"](_PR(res), baseline=name, rank=rank).value == 4
    assert METRICS["coref_baseline_rank"](_PR(res), baseline="rules", rank=1).value == 0
    # gaps to rules: pronoun -10, proper 0, nominal -10 → nominal - best other = -10; nominal vs head-word +10
    nominal = METRICS["coref_nominal_gap"](_PR(res))
    assert nominal.value == pytest.approx(-10)
    assert nominal.standard_error == pytest.approx(difference_se((50, 10), (60, 10), (80, 10), (80, 10)))
    assert METRICS["coref_named_head"](_PR(res), head="1-2").value == 2
    with pytest.raises(NotApplicable):
        METRICS["coref_named_head"](_PR(res), head="5-4")


def test_figure_writes_png(tmp_path):
    from bertattn_bench.claims.registry import FIGURES, load_all_metrics
    from bertattn_bench.families.coref import coref_figure

    load_all_metrics()
    assert FIGURES["coref"] is coref_figure  # the report draws it (a decorator once slid onto the next function)

    class Info:
        name, slug = "toy-model", "toy"

    class PR:
        result = _result([(6, 8, 5), (1, 1, 1)], BASE)
        model = Info()
        corpus = "gum_dev"

    paths = coref_figure([PR()], tmp_path / "fig")
    assert len(paths) == 1 and paths[0].read_bytes()[:4] == b"\x89PNG"


def test_claims_load():
    from bertattn_bench.claims.catalog import load_claims

    claims = load_claims(family="coref")
    assert {c.id for c in claims} >= {"clark.coref_head", "clark.coref_by_type", "clark.coref_baseline_nearest",
                                      "clark.coref_baseline_headword", "clark.coref_baseline_rules",
                                      "clark.coref_beats_string_match", "clark.coref_nominal"}
    assert np.all([not c.learned for c in claims if "baseline" in c.id])


# ---- LitBank (CoNLL-2012 coreference column, heuristic heads and types) -----------------------------------------

# Document word indices (coreference column after the word):
#   S1  0 Mary (0  1 Brown  2 of  3 Bath (1)|0)  4 met  5 her (3|(0)  6 sister 3)  7 .
#   S2  8 Her (3|(0)  9 sister  10 ,  11 who  12 was  13 tired 3)  14 ,  15 slept  16 .
#   S3  17 Brown (0)  18 laughed  19 ,  20 and  21 Brown (5|(0)  22 's  23 dog 5)  24 barked  25 .
#   S4  26 Rain (6)  27 fell  28 and  29 the (5  30 dog 5)  31 ran  32 .
#   S5  33 The (6  34 rain 6)  35 stopped  36 .
LITBANK_SENTENCES = [
    [("Mary", "(0"), ("Brown", ""), ("of", ""), ("Bath", "(1)|0)"), ("met", ""), ("her", "(3|(0)"), ("sister", "3)"),
     (".", "")],
    [("Her", "(3|(0)"), ("sister", ""), (",", ""), ("who", ""), ("was", ""), ("tired", "3)"), (",", ""),
     ("slept", ""), (".", "")],
    [("Brown", "(0)"), ("laughed", ""), (",", ""), ("and", ""), ("Brown", "(5|(0)"), ("'s", ""), ("dog", "5)"),
     ("barked", ""), (".", "")],
    [("Rain", "(6)"), ("fell", ""), ("and", ""), ("the", "(5"), ("dog", "5)"), ("ran", ""), (".", "")],
    [("The", "(6"), ("rain", "6)"), ("stopped", ""), (".", "")],
]


def _conll2012(sentences, name="toy_litbank") -> str:
    """CoNLL-2012 text as LitBank writes it: 13 tab-separated fields, coreference last (empty when none)."""
    lines = [f"#begin document ({name}); part 0"]
    for sent in sentences:
        for k, (word, coref) in enumerate(sent):
            lines.append("\t".join([name, "0", str(k), word] + ["_"] * 8 + [coref]))
        lines.append("")
    lines.append("#end document")
    return "\n".join(lines) + "\n"


def _litbank_file(tmp_path, sentences=LITBANK_SENTENCES, name="toy_litbank") -> Path:
    p = tmp_path / f"{name}.conll"
    p.write_text(_conll2012(sentences, name), encoding="utf-8")
    return p


def test_litbank_brackets_nested_multi_id_and_singletons(tmp_path):
    from bertattn_bench.data.litbank import read_litbank_document

    doc = read_litbank_document(_litbank_file(tmp_path))
    assert doc.doc_id == "toy_litbank" and len(doc.words) == 37
    assert doc.sentence_starts == [0, 8, 17, 26, 33]
    got = [(m.start, m.end, m.entity, m.head, m.kind) for m in doc.mentions]
    assert got == [(0, 4, "0", 1, "proper"),  # "Mary Brown of Bath": head before "of"; Bath (entity 1) inside
                   (5, 6, "0", 5, "pronoun"), (5, 7, "3", 6, "nominal"),  # "(3|(0)" on one token
                   (8, 9, "0", 8, "pronoun"), (8, 14, "3", 9, "nominal"),  # head before the comma
                   (17, 18, "0", 17, "proper"),  # sentence-initial, capitalised everywhere else: proper
                   (21, 22, "0", 21, "proper"), (21, 24, "5", 23, "nominal"),  # "Brown 's dog" → dog
                   (26, 27, "6", 26, "nominal"),  # sentence-initial "Rain", lower-case elsewhere: nominal
                   (29, 31, "5", 30, "nominal"), (33, 35, "6", 34, "nominal")]
    assert doc.n_singletons == 1 and doc.n_dropped == 0  # Bath
    assert doc.mentions[0].source.endswith("toy_litbank.conll:2")
    assert doc.heads == [-1] * 37
    assert doc.feats[5] == {"Number": "Sing", "Gender": "Fem", "Person": "3"} and doc.upos[5] == "PRON"
    assert doc.feats[23] == {"Number": "Sing"} and doc.upos[1] == "PROPN" and doc.upos[26] == "_"


def test_litbank_windows_and_baselines(tmp_path, tokenizer):
    from bertattn_bench.data.litbank import read_litbank_document

    doc = read_litbank_document(_litbank_file(tmp_path))
    windows, stats = make_windows([doc], tokenizer, 128)
    assert len(windows) == 1 and stats.n_singletons == 1
    got = {a.head: (a.kind, a.antecedent_heads, a.nearest, a.head_word, a.rules) for a in windows[0].anaphors}
    assert got[5] == ("pronoun", (1,), True, False, True)  # her → Mary Brown (agreement: Sing/unmarked gender)
    assert got[9] == ("nominal", (6,), False, True, True)  # sister → her sister (head-word match)
    assert got[34] == ("nominal", (26,), False, True, True)  # rain → Rain (lower-cased head match)


def test_litbank_head_word_heuristic():
    from bertattn_bench.data.litbank import litbank_head

    words = "the man in the house who laughed".split()
    assert litbank_head(words, 0, 7) == 1  # before the first preposition
    assert litbank_head(words, 3, 7) == 4  # before the relative pronoun
    assert litbank_head("he who laughed".split(), 0, 3) == 0
    assert litbank_head("that man".split(), 0, 2) == 1  # a marker word in first position is no post-modifier
    assert litbank_head(["the", "king", "'s"], 0, 3) == 1  # a trailing possessive is skipped
    assert litbank_head(["Lincoln", "'s", "Inn", "Hall"], 0, 4) == 3
    assert litbank_head(["Sir", "John", ",", "the", "knight"], 0, 5) == 1


def test_litbank_type_heuristic():
    from bertattn_bench.data.coref_documents import mention_kind
    from bertattn_bench.data.litbank import guess_tags

    words = ['"', "Stone", "fell", ".", "Rose", "saw", "Rose", ".", "Hope", "came", ".", "Themselves", "men", "."]
    upos, feats = guess_tags(words, [0, 4, 8, 11])
    kinds = [mention_kind(u) for u in upos]
    assert kinds[1] == "nominal"  # after an opening quote, never seen elsewhere: capitalisation proves nothing
    assert kinds[4] == kinds[6] == "proper"  # initial, but capitalised at its non-initial occurrence too
    assert kinds[8] == "nominal"  # only ever sentence-initial
    assert kinds[11] == "pronoun" and feats[11] == {"Number": "Plur", "Person": "3"}
    assert feats[12] == {"Number": "Plur"} and feats[2] == {"Number": "Sing"} and feats[3] == {}
    upos, _ = guess_tags(["I", "met", "the", "Stone", "."], [0])
    assert upos[0] == "PRON" and upos[3] == "PROPN"


@pytest.mark.parametrize("coref, line, message", [
    ("7)", 3, r"closes entity '7', which is not open"),
    ("(7", 3, r"mention of entity 7 is never closed"),
    ("(7)|(x", 3, r"malformed coreference value"),
    ("(7))", 3, r"malformed coreference value"),
])
def test_litbank_malformed_brackets_name_file_and_line(tmp_path, coref, line, message):
    from bertattn_bench.data.litbank import read_litbank_document

    path = _litbank_file(tmp_path, [[("John", ""), ("left", coref), (".", "")]], name="bad")
    with pytest.raises(DataError, match=rf"bad\.conll:{line}: .*{message}"):
        read_litbank_document(path)


def test_litbank_corpus_loading_paths_and_fingerprint(tmp_path, tiny):
    from bertattn_bench.base.hashing import data_files, data_fingerprint
    from bertattn_bench.claims.baselines import describe_data
    from bertattn_bench.claims.registry import FAMILIES
    from bertattn_bench.data.coref_corpus import corpus_data_paths
    from bertattn_bench.families.coref import prepare_coref

    data = tmp_path / "data"
    (data / "litbank_coref" / "conll").mkdir(parents=True)
    folder = data / "litbank_coref" / "conll"
    _litbank_file(folder, name="b_doc")
    _litbank_file(folder, name="a_doc")
    assert [d.doc_id for d in load_documents(data, "litbank")] == ["a_doc", "b_doc"]
    assert [d.doc_id for d in load_documents(data, "litbank", limit=1)] == ["a_doc"]
    paths = corpus_data_paths(data, "litbank")
    assert paths == [folder] and [p.name for p in data_files(folder)] == ["a_doc.conll", "b_doc.conll"]
    assert describe_data(paths, data).startswith("litbank_coref/conll sha256:")
    assert describe_data(paths, data).endswith("(2 file(s))")
    before = data_fingerprint(paths)
    (folder / "b_doc.conll").write_text(_conll2012(LITBANK_SENTENCES[:2], "b_doc"), encoding="utf-8")
    assert data_fingerprint(corpus_data_paths(data, "litbank")) != before  # the files themselves are hashed
    assert "litbank" in FAMILIES["coref"].corpora and FAMILIES["coref"].default_corpus == "gum_dev"
    pr = prepare_coref(tiny, data, "litbank")
    assert pr.data_paths == corpus_data_paths(data, "litbank") and pr.data.startswith("LitBank (2 docs")
    res = pr.run().result
    assert res.n_documents == 2 and res.count() > 0
    with pytest.raises(DataError, match="litbank_coref/conll"):
        load_documents(tmp_path / "empty", "litbank")
