"""FrameNet family (Kovaleva §4.2, §5): loader and filters on hand-made records, the reducer on planted attention,
the claim metrics on results with known numbers, and a tiny model's pass batched = one by one."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from bertattn_bench.base.errors import DataError
from bertattn_bench.data import framenet_corpus as F
from bertattn_bench.engine.batching import encode_words, make_batch
from bertattn_bench.families import framenet as M

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "framenet"
JSONL = FIX / "exemplars_toy.jsonl"
XML = FIX / "lu_toy.xml"
CPU = torch.device("cpu")


# ---- loader ------------------------------------------------------------------------------------------------------

def test_jsonl_records_words_and_spans():
    recs = {r.annoset_id: r for r in F.read_jsonl(JSONL)}
    assert len(recs) == 7
    sold = recs[101]
    assert sold.words[:4] == ["The", "old", "farmer", "sold"] and len(sold.words) == 10
    assert sold.target_words == (3,)
    assert [(fe.name, fe.words) for fe in sold.fes] == [("Seller", (0, 1, 2)), ("Goods", (4, 5)), ("Buyer", (6, 7, 8))]
    assert sold.source.endswith("exemplars_toy.jsonl:1 (annoset 101)")


def test_filters_in_order_with_n_at_each_step():
    kept, steps = F.apply_filters(F.read_jsonl(JSONL))
    assert [s.n_records for s in steps] == [7, 6, 5, 4, 2]  # read, <= 12 tokens, core FE, <= 3 tokens, >= 2 apart
    assert [r.annoset_id for r in kept] == [101, 201]
    # 101: Seller (3 tokens) and Goods are 1 token from "sold"; only Buyer ("to a neighbour", 3 away) is linked
    assert [fe.name for fe in kept[0].links] == ["Buyer"]
    assert kept[0].link_pairs() == [(3, 6), (3, 7), (3, 8)]
    assert kept[1].link_pairs() == [(3, 0)]  # agitated -> He


def test_filter_boundaries():
    """Exactly 12 tokens, an FE of exactly 3 tokens, exactly 2 tokens apart: kept; one more of each: dropped."""
    def rec(n_words, fe_words, gap):
        words = [f"w{i}" for i in range(n_words)]
        text = " ".join(words) + " "
        start = lambda k: sum(len(w) + 1 for w in words[:k])  # noqa: E731
        fe0 = 0
        target = fe0 + fe_words - 1 + gap
        return {"lu_id": 1, "lu": "x.v", "frame": "X", "sent_id": 1, "annoset_id": 1, "text": text,
                "target": [[start(target), start(target) + len(words[target])]],
                "fes": [{"name": "A", "type": "Core", "start": 0, "end": start(fe_words) - 1}]}

    def kept(obj):
        r = F._record("x", obj["text"], obj["target"], obj["fes"], annoset_id=1, sent_id=1, lu_id=1, lu="x", frame="X")
        return len(F.apply_filters([r])[0])

    assert kept(rec(12, 3, 2)) == 1
    assert kept(rec(13, 3, 2)) == 0
    assert kept(rec(12, 4, 2)) == 0
    assert kept(rec(12, 3, 1)) == 0


def test_core_unexpressed_is_not_core():
    recs = {r.annoset_id: r for r in F.read_jsonl(JSONL)}
    assert recs[401].fes[1].type == "Core-Unexpressed"
    assert F.apply_filters([recs[401]])[0] == []


@pytest.mark.parametrize("line, message", [
    ("{not json", "not valid JSON"),
    ('[1, 2]', "expected a JSON object"),
    ('{"lu_id": 1}', "missing key(s)"),
    ('{"lu_id":1,"lu":"a.v","frame":"F","sent_id":1,"annoset_id":9,"text":"a b ","target":[[0,1]],'
     '"fes":[{"name":"X","type":"Core","start":2,"end":9}]}', "(annoset 9): frame element 'X' span [2, 9) is not inside"),
    ('{"lu_id":1,"lu":"a.v","frame":"F","sent_id":1,"annoset_id":9,"text":"a b ","target":[],"fes":[]}',
     "(annoset 9): no target span"),
    ('{"lu_id":1,"lu":"a.v","frame":"F","sent_id":1,"annoset_id":9,"text":"a b ","target":[[1,2]],"fes":[]}',
     "target span [1, 2) covers no word"),
])
def test_malformed_line_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    good = JSONL.read_text(encoding="utf-8").splitlines()[0]
    path.write_text(good + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        F.read_jsonl(path)
    assert f"{path}:2" in str(exc.value) and message in str(exc.value)


def test_xml_reader_end_inclusive_and_header_types():
    recs = F.read_lu_xml(XML)
    assert [r.annoset_id for r in recs] == [1502691, 1502692]  # the UNANN set (no Target/FE layer) is left out
    he = recs[0]
    assert he.words == ["He", "was", "becoming", "agitated", "."] and he.target_words == (3,)
    # XML end="1" is inclusive: "He" = [0, 2); the type comes from the header, not the <valences> FE (no type)
    assert [(fe.name, fe.type, fe.start, fe.end, fe.words) for fe in he.fes] == [("Experiencer", "Core", 0, 2, (0,))]
    # a null-instantiated FE (no start/end) has no span
    assert [fe.name for fe in recs[1].fes] == ["Experiencer", "Degree"]


def test_xml_errors_name_the_file(tmp_path):
    bad = tmp_path / "lu1.xml"
    bad.write_text("<lexUnit", encoding="utf-8")
    with pytest.raises(DataError, match="lu1.xml: not well-formed XML"):
        F.read_lu_xml(bad)
    bad.write_text(XML.read_text(encoding="utf-8").replace('end="23" start="16"', 'end="99" start="16"'),
                   encoding="utf-8")
    with pytest.raises(DataError, match=r"lu1.xml, sentence 1025376, annotationSet 1502691: target span"):
        F.read_lu_xml(bad)


def test_real_xml_agrees_with_jsonl(tmp_path):
    """The shared data's raw LU XML and the derived JSONL give the same records (skipped without the data)."""
    import os

    data = Path(os.environ.get("BERTATTN_DATA_DIR", "/nonexistent"))
    lu = data / F.XML_DIR / "lu8776.xml"
    if not lu.is_file():
        pytest.skip("no BERTATTN_DATA_DIR with framenet_v15/")
    from_xml = {r.annoset_id: r for r in F.read_lu_xml(lu)}
    lines = [ln for ln in open(data / F.JSONL, encoding="utf-8") if ln.startswith('{"lu_id":8776,')]
    (tmp_path / "lu8776.jsonl").write_text("".join(lines), encoding="utf-8")
    from_json = {r.annoset_id: r for r in F.read_jsonl(tmp_path / "lu8776.jsonl")}
    assert from_json and set(from_json) <= set(from_xml)
    for k, r in from_json.items():
        x = from_xml[k]
        assert (x.text, x.target_words, [(f.name, f.type, f.start, f.end) for f in x.fes]) == \
               (r.text, r.target_words, [(f.name, f.type, f.start, f.end) for f in r.fes])


def test_one_per_lu_is_seeded():
    recs = F.read_jsonl(JSONL)
    a, b = F.one_per_lu(recs, seed=0), F.one_per_lu(recs, seed=0)
    assert [r.annoset_id for r in a] == [r.annoset_id for r in b]
    assert sorted({r.lu_id for r in a}) == sorted({r.lu_id for r in recs}) and len(a) == len({r.lu_id for r in recs})


# ---- the matched-distance control --------------------------------------------------------------------------------

def test_control_pairs_same_distance_not_linked():
    pairs = [(3, 6), (3, 7), (3, 8)]
    c, fallback = M.control_pairs(pairs, 10, 50, np.random.default_rng(0))
    assert c.shape == (50, 3, 2) and fallback == 0
    d = c[..., 1] - c[..., 0]
    assert (d == np.array([3, 4, 5])[None, :]).all()
    assert (c >= 0).all() and (c < 10).all()
    linked = {frozenset(p) for p in pairs}
    assert not any(frozenset(map(int, x)) in linked for x in c.reshape(-1, 2))


def test_control_falls_back_to_the_linked_pair_when_alone():
    c, fallback = M.control_pairs([(0, 4)], 5, 4, np.random.default_rng(0))  # distance 4 in 5 words: one pair only
    assert fallback == 4 and (c == np.array([0, 4])).all()


# ---- the reducer on planted attention ----------------------------------------------------------------------------

def _encode(tokenizer, words_list):
    return [encode_words(tokenizer, i, w) for i, w in enumerate(words_list)]


def _plant(batch, fill_by_head):
    """(B, H, T, T): head h's query piece q attends one-hot to ``fill_by_head[h](example, q)`` (a piece index), or
    uniformly over the real pieces when that returns None."""
    b, t = batch.input_ids.shape
    probs = torch.zeros(b, len(fill_by_head), t, t)
    for i, ex in enumerate(batch.examples):
        n = len(ex.input_ids)
        for h, fill in enumerate(fill_by_head):
            for q in range(n):
                k = fill(ex, q)
                if k is None:
                    probs[i, h, q, :n] = 1.0 / n
                else:
                    probs[i, h, q, k] = 1.0
    return probs


def test_reducer_known_answer(tokenizer):
    """Sentence "a b c d e": link (target 0 -> FE 2). Head 0: every piece attends to word 2 ("c"): t2f = 1, f2t =
    0 (c attends to itself); the control pairs at distance 2 that are not the link are (1, 3) and (2, 4): t2f 0,
    f2t = 1 only for (2, 4), whose reverse 4 -> 2 hits "c". Head 1: uniform over the 7 pieces: everything 1/7."""
    words = ["a", "b", "c", "d", "e"]
    enc = _encode(tokenizer, [words])
    assert all(len([t for t in enc[0].word_index if t == w]) == 1 for w in range(5))
    red = M.FrameReducer([[(0, 2)]], [5], 1, 2, CPU, draws=20)
    batch = make_batch(enc, tokenizer, CPU, with_words=True)
    to_c = lambda ex, q: ex.word_index.index(2)  # noqa: E731
    red.start_batch(batch)
    red.update(0, _plant(batch, [to_c, lambda ex, q: None]))
    r = red.finalize()
    starts = red.ctrl[0][:20, 0]  # draws of the t2f control pair: t' in {1, 2}
    share_2 = float(np.mean(starts == 2))
    assert set(starts.tolist()) <= {1, 2}
    assert r.score[:, 0, 0].tolist() == pytest.approx([1.0, 0.0, 1.0])
    assert r.control[:, 0, 0].tolist() == pytest.approx([0.0, share_2, share_2])
    assert r.score[:, 0, 1] == pytest.approx(np.full(3, 1 / 7))
    assert r.control[:, 0, 1] == pytest.approx(np.full(3, 1 / 7))
    assert r.diff_mean[:, 0, 1] == pytest.approx(np.zeros(3), abs=1e-7)
    assert r.n_sentences == 1 and r.n_pairs == 1


def test_reducer_max_over_pairs_and_padding(tokenizer):
    """Two sentences of different lengths in one padded batch; the score is the max over a sentence's pairs, and
    a uniform head's value is 1/n of each sentence's own real length (padding never counts)."""
    sents = [["a", "b", "c", "d", "e"], ["a", "b", "c", "d", "e", "f", "g", "h"]]
    enc = _encode(tokenizer, sents)
    # sentence 1: links (0 -> 3) and (0 -> 5); head 0 sends word 0 half to word 3 and half to word 5, others to [CLS]
    def head0(ex, q):
        return 0

    red = M.FrameReducer([[(0, 2)], [(0, 3), (0, 5)]], [5, 8], 1, 2, CPU, draws=4)
    batch = make_batch(enc, tokenizer, CPU, with_words=True)
    probs = _plant(batch, [head0, lambda ex, q: None])
    row = batch.examples.index(next(e for e in batch.examples if e.index == 1))
    w0 = batch.examples[row].word_index.index(0)
    probs[row, 0, w0] = 0.0
    probs[row, 0, w0, batch.examples[row].word_index.index(3)] = 0.3
    probs[row, 0, w0, batch.examples[row].word_index.index(5)] = 0.7
    red.start_batch(batch)
    red.update(0, probs)
    r = red.finalize()
    # head 0: t2f max = 0.7 in sentence 1, 0 in sentence 0 -> mean 0.35
    assert r.score[0, 0, 0] == pytest.approx(0.35)
    assert r.score[0, 0, 1] == pytest.approx((1 / 7 + 1 / 10) / 2)  # uniform: 1/7 and 1/10, not 1/padded length


def test_mean_pooling_ignores_piece_counts(tokenizer):
    """A uniform head gives a multi-piece word k/n with Clark's sum over pieces, 1/n with the mean (ours)."""
    words = ["the", "tokenization", "was", "unbelievably", "slow"]
    enc = _encode(tokenizer, [words])
    k = sum(1 for t in enc[0].word_index if t == 1)
    assert k > 1
    n = len(enc[0].input_ids)
    out = {}
    for pooling in ("mean", "sum"):
        red = M.FrameReducer([[(3, 1)]], [5], 1, 1, CPU, draws=2, pooling=pooling)
        batch = make_batch(enc, tokenizer, CPU, with_words=True)
        red.start_batch(batch)
        red.update(0, _plant(batch, [lambda ex, q: None]))
        out[pooling] = red.finalize().score[0, 0, 0]
    assert out["mean"] == pytest.approx(1 / n) and out["sum"] == pytest.approx(k / n)


# ---- claim metrics on results with known numbers -----------------------------------------------------------------

class _PR:
    def __init__(self, result):
        self.result = result


def _result(score, control, diff_sd=0.05, n=400):
    score, control = np.asarray(score, float), np.asarray(control, float)
    stack = lambda x: np.stack([x, x, x])  # noqa: E731
    words = ["He", "was", "becoming", "agitated", "."]
    rows = np.full(score.shape + (5,), 0.1)
    return M.FrameResult(score=stack(score), control=stack(control), diff_mean=stack(score - control),
                         diff_sd=stack(np.full(score.shape, diff_sd)), n_sentences=n, n_pairs=2 * n, n_fallback=0,
                         draws=10, example={"annoset_id": 1502691, "labels": words, "row": 3, "lu": "agitated.a",
                                            "frame": "Emotion_directed", "hits": [0], "exclude": [3],
                                            "fe_names": ["Experiencer"], "what": "the row of 'agitated'", "rows": rows})


def test_frame_heads_need_the_control_percentile_and_the_paired_test():
    score = np.full((2, 4), 0.10)
    control = np.full((2, 4), 0.10)
    score[1, 2], control[1, 2] = 0.30, 0.12  # a frame head
    score[0, 1], control[0, 1] = 0.25, 0.25  # high but no better than its control (an offset-like head)
    score[0, 3], control[0, 3] = 0.103, 0.10  # beats its control a little, below the control's p99
    r = _result(score, control)
    m = M.framenet_heads(_PR(r))
    assert m.value == 1 and m.head == "2-3" and m.n == 400
    # the control's p99 over 8 heads: between 0.12 and 0.25
    heads, threshold, p = M.frame_heads(r)
    assert threshold == pytest.approx(np.percentile(control, 99))
    assert [h[:2] for h in heads] == [(1, 2)]
    # same means with a huge spread: not significant after Bonferroni -> no head
    assert M.framenet_heads(_PR(_result(score, control, diff_sd=20.0))).value == 0


def test_paper_criterion_is_reported_not_used():
    score = np.linspace(0.1, 0.2, 8).reshape(2, 4)
    m = M.framenet_heads(_PR(_result(score, score)))  # every head equals its control (a random twin)
    assert m.value == 0
    assert "paper's criterion" in m.detail and "2-4" in m.detail  # the p99 of the scores always picks one of 8


def test_example_argmax_counts_frame_heads_only():
    score = np.full((2, 4), 0.10)
    control = np.full((2, 4), 0.10)
    score[1, 2], control[1, 2] = 0.30, 0.12
    r = _result(score, control)
    r.example["rows"][1, 2] = [0.5, 0.1, 0.1, 0.9, 0.1]  # self (agitated) highest, then "He"
    m = M.framenet_example_argmax(_PR(r), top=2)
    assert m.value == 1 and "argmax 'He' 0.50" in m.detail
    r.example["rows"][1, 2] = [0.1, 0.5, 0.1, 0.9, 0.1]  # "was"
    assert M.framenet_example_argmax(_PR(r), top=2).value == 0
    # no frame-semantic head: 0 even where the strongest raw head looks at "He"
    flat = _result(np.full((2, 4), 0.1), np.full((2, 4), 0.1))
    flat.example["rows"][:, :, 0] = 0.9
    assert M.framenet_example_argmax(_PR(flat), top=2).value == 0


# ---- the notebook's pipeline (visualize_attention.ipynb, "7. BaseBERT study") -------------------------------------

@pytest.mark.parametrize("text, expected", [  # NLTK 3.10.4 word_tokenize(text, preserve_line=True), run on each
    ('Three or four articles in the library . " ', ["Three", "or", "four", "articles", "in", "the", "library", ".",
                                                     "``"]),
    ("` Lookin' fer the Post Office , dear ? \" said the old lady .",
     ["`", "Lookin", "'", "fer", "the", "Post", "Office", ",", "dear", "?", "``", "said", "the", "old", "lady", "."]),
    ("'' Waffenruhe '' translates as truce .", ["''", "Waffenruhe", "``", "translates", "as", "truce", "."]),
    ("guests at the $300-a-night hotels . ", ["guests", "at", "the", "$", "300-a-night", "hotels", "."]),
    ('She said "hi" to me.', ["She", "said", "``", "hi", "''", "to", "me", "."]),
    ("He can't go, I cannot stay: 3,000 left...", ["He", "ca", "n't", "go", ",", "I", "can", "not", "stay", ":",
                                                   "3,000", "left", "..."]),
    ("Mr. Smith 's dog (a pug) barks.", ["Mr.", "Smith", "'s", "dog", "(", "a", "pug", ")", "barks", "."]),
])
def test_treebank_tokens_as_nltk(text, expected):
    assert F.treebank_tokens(text) == expected


def _rec(text, target_word, fes, frame="Commerce_sell", k=0):
    """A record from words: ``fes`` = [(name, type, first word, last word)], spans on the space-separated text."""
    words = text.split()
    starts = [sum(len(w) + 1 for w in words[:i]) for i in range(len(words))]
    span = lambda a, b: (starts[a], starts[b] + len(words[b]))  # noqa: E731
    fe_objs = [{"name": n, "type": t, "start": span(a, b)[0], "end": span(a, b)[1]} for n, t, a, b in fes]
    return F._record(f"toy:{k}", text, [span(target_word, target_word)], fe_objs, annoset_id=k, sent_id=k, lu_id=k,
                     lu="x.v", frame=frame)


def test_notebook_is_close_compares_strings_in_a_window():
    far = _rec("He was becoming agitated .", 3, [("Experiencer", "Core", 0, 0)])
    assert not F.notebook_is_close(far.text, far.target_spans[0], far.fes)
    # the FE is far, but a token 1 to the left equals one of its tokens as a string: dropped (the notebook's rule)
    same = _rec("x y the sold a b c the w", 3, [("Goods", "Core", 7, 8)])
    assert F.notebook_is_close(same.text, same.target_spans[0], same.fes)
    # exactly 2 tokens away is still close (window target-2 .. target+2); 3 away is not
    two = _rec("w1 w2 w3 sold w5 w6 w7", 3, [("Goods", "Core", 5, 5)])
    three = _rec("w1 w2 w3 sold w5 w6 w7", 3, [("Goods", "Core", 6, 6)])
    assert F.notebook_is_close(two.text, two.target_spans[0], two.fes)
    assert not F.notebook_is_close(three.text, three.target_spans[0], three.fes)
    # the target is not a token of the sentence (part of a word): dropped
    assert F.notebook_is_close("He was unagitated .", (9, 17), far.fes)


def test_notebook_filters_order_and_core_sets():
    core = {"Commerce_sell": frozenset({"Buyer", "Goods"}), "Topic": frozenset()}
    recs = [
        _rec("w0 sold w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12", 1, [("Buyer", "Core", 10, 10)], k=1),  # 13 tokens
        _rec("Kim sold w2 w3 w4 the cheap old car", 1, [("Goods", "Core", 5, 8)], k=2),  # an FE of 4 tokens
        _rec("Kim sold w2 w3 w4 cars .", 1, [("Seller", "Core", 0, 0), ("Goods", "Core", 5, 5)], k=3),  # Kim close
        _rec("w0 sold w2 w3 w4 Lee .", 1, [("Seller", "Core", 5, 5)], k=4),  # Seller: Core type, not in a core set
        _rec("w0 sold w2 w3 cars to Lee", 1, [("Goods", "Core", 4, 4), ("Buyer", "Core", 5, 6)], k=5),  # kept
        _rec("w0 addressed w2 w3 w4 it", 1, [("Topic", "Core", 5, 5)], frame="Topic", k=6),  # frame without sets
        _rec("w0 sold w2 w3 w4 cars", 1, [("Place", "Peripheral", 4, 4), ("Goods", "Core", 5, 5)], k=7),  # kept
    ]
    two_targets = _rec("w0 sold w2 w3 w4 Lee", 1, [("Buyer", "Core", 5, 5)], k=8)
    two_targets.target_spans = two_targets.target_spans * 2
    kept, steps = F.notebook_filters(recs + [two_targets], core)
    assert [s.n_records for s in steps] == [8, 7, 6, 5, 4, 2]
    assert [r.annoset_id for r in kept] == [5, 7]
    assert [fe.name for fe in kept[0].links] == ["Goods", "Buyer"] and [fe.name for fe in kept[1].links] == ["Goods"]
    assert recs[4].links == []  # the input records are not changed (the project's filters share them)
    with pytest.raises(DataError, match="toy:9: frame 'Nope' has no frame XML"):
        F.notebook_filters([_rec("w0 sold w2 w3 w4 Lee", 1, [("Buyer", "Core", 5, 5)], frame="Nope", k=9)], core)


def test_core_sets_from_frame_xml(tmp_path):
    sets = F.read_core_sets(FIX / "frame")
    assert sets["Emotion_directed"] == {"Stimulus", "Topic", "State", "Expressor", "Experiencer"}
    assert sets["Commerce_sell"] == {"Buyer", "Goods"} and sets["Topic"] == frozenset()
    with pytest.raises(DataError, match="no frame XML files"):
        F.read_core_sets(tmp_path)
    (tmp_path / "Bad.xml").write_text("<frame", encoding="utf-8")
    with pytest.raises(DataError, match="Bad.xml: not well-formed XML"):
        F.read_core_sets(tmp_path)


def test_notebook_pairs_zip_first_occurrence_and_cut(tokenizer):
    he = _rec("He was becoming agitated .", 3, [("Experiencer", "Core", 0, 0)])
    pieces, pairs = M.notebook_pairs(tokenizer, he.text, he.target_spans[0], he.fes)
    assert pieces == ["[CLS]", "he", "was", "becoming", "agitated", ".", "[SEP]"] and pairs == [(4, 1)]
    # a 3-word FE and a one-piece target: zip keeps the FE's first piece only; "the" is found at its FIRST
    # occurrence (position 1), as bert_tokens.index does, not inside the FE
    r = _rec("the man sold the old car", 2, [("Goods", "Core", 3, 5)])
    pieces, pairs = M.notebook_pairs(tokenizer, r.text, r.target_spans[0], r.fes)
    assert pieces[3] == "sold" and pairs == [(3, 1)]
    # the input is cut at 17 sentence pieces: a target beyond the cut is not found
    long = _rec(" ".join(f"w{i}" for i in range(9)) + " sold", 9, [("Goods", "Core", 0, 0)])
    pieces, pairs = M.notebook_pairs(tokenizer, long.text, long.target_spans[0], long.fes)
    assert len(pieces) == 19 and pairs is None


def test_piece_level_reducer_known_answer(tokenizer):
    """The notebook's score on planted maps: attn[FE piece, target piece] (f2t), max over the zipped pairs."""
    from bertattn_bench.engine.batching import Encoded

    ids = tokenizer.convert_tokens_to_ids(["[CLS]", "he", "was", "becoming", "agitated", ".", "[SEP]"])
    enc = [Encoded(0, ids, [0] * 7, [-1] * 7, 0)]
    red = M.FrameReducer([[(4, 1)]], [5], 1, 2, CPU, draws=10, level="piece", offset=1)
    batch = make_batch(enc, tokenizer, CPU, with_words=False)
    probs = _plant(batch, [lambda ex, q: 4, lambda ex, q: None])  # head 0: everything -> "agitated"
    red.start_batch(batch)
    red.update(0, probs)
    r = red.finalize()
    assert r.level == "piece" and r.direction(None) == "f2t"
    f2t, t2f = r.d("f2t"), r.d("t2f")
    assert r.score[f2t, 0, 0] == pytest.approx(1.0)  # he -> agitated
    assert r.score[t2f, 0, 0] == pytest.approx(0.0)  # agitated -> he (agitated attends to itself)
    assert r.score[f2t, 0, 1] == pytest.approx(1 / 7)  # uniform over the 7 pieces, [CLS]/[SEP] included
    # control pairs stay inside the sentence's pieces (1..5) at the same distance (-3), never the link
    c = red.ctrl[0][:, :2]
    assert ((c >= 1) & (c <= 5)).all() and {tuple(x) for x in c[:10]} <= {(5, 2)}


# ---- a tiny model end to end -------------------------------------------------------------------------------------

def _toy_data(tmp_path) -> Path:
    data = tmp_path / "data"
    (data / F.XML_DIR).mkdir(parents=True)
    shutil.copy(JSONL, data / F.JSONL)
    shutil.copy(XML, data / F.XML_DIR / "lu8776.xml")
    shutil.copytree(FIX / "frame", data / F.FRAME_DIR)
    return data


def test_tiny_model_pass_batched_equals_one_by_one(tmp_path, tiny):
    data = _toy_data(tmp_path)
    a = M.prepare_framenet(tiny, data, "all", batch_size=8).run().result
    b = M.prepare_framenet(tiny, data, "all", batch_size=1).run().result
    assert a.n_sentences == 3  # 101, 201 from the JSONL + the paper's example from the XML
    assert a.score.shape == (3, tiny.info.n_layers, tiny.info.n_heads)
    for field in ("score", "control", "diff_mean"):
        np.testing.assert_allclose(getattr(a, field), getattr(b, field), rtol=1e-5, atol=1e-6)
    assert a.example["labels"] == ["He", "was", "becoming", "agitated", "."]
    assert a.example["rows"].shape == (tiny.info.n_layers, tiny.info.n_heads, 5)
    assert "8,467" not in a.description and "-> ... >= 2 tokens from the target 2" in a.description


def test_tiny_model_notebook_pass(tmp_path, tiny):
    """The default corpus: the notebook's filters on the toy file keep only "He was becoming agitated" (annoset 201;
    the others are too long, have a long FE, or an FE token next to the target), + the paper's example from the
    XML; batched = one by one; the example's row is that of "he"."""
    data = _toy_data(tmp_path)
    a = M.prepare_framenet(tiny, data, batch_size=8).run().result
    b = M.prepare_framenet(tiny, data, batch_size=1).run().result
    assert a.level == "piece" and a.n_sentences == 2 and a.n_pairs == 2
    assert "7 -> sentence <= 12 word_tokenize tokens 6 -> one target span 6 -> every FE <= 3 tokens 4 -> no FE " \
           "token within 2 of the target 1 -> a core-set FE (frame XML FEcoreSets) 1" in a.description
    assert "the paper: 473" in a.description
    for field in ("score", "control", "diff_mean"):
        np.testing.assert_allclose(getattr(a, field), getattr(b, field), rtol=1e-5, atol=1e-6)
    ex = a.example
    assert ex["labels"][ex["row"]] == "he" and [ex["labels"][i] for i in ex["hits"]] == ["agitated"]
    assert ex["rows"].shape == (tiny.info.n_layers, tiny.info.n_heads, 7)


def test_unknown_corpus(tmp_path, tiny):
    with pytest.raises(DataError, match="unknown FrameNet corpus"):
        M.prepare_framenet(tiny, _toy_data(tmp_path), "nope")


def test_per_sentence_values_add_up_and_bound_the_head_count(tokenizer):
    """Issue 61: the reducer keeps each sentence's pair max and control (the pooled means are their means), and the
    frame-head count carries bootstrap bounds over the sentences: identical sentences give bounds at the value."""
    words = ["a", "b", "c", "d", "e"]
    enc = _encode(tokenizer, [words, words])
    red = M.FrameReducer([[(0, 2)], [(0, 2)]], [5, 5], 1, 2, CPU, draws=20)
    batch = make_batch(enc, tokenizer, CPU, with_words=True)
    to_c = lambda ex, q: ex.word_index.index(2)  # noqa: E731
    red.start_batch(batch)
    red.update(0, _plant(batch, [to_c, lambda ex, q: None]))
    r = red.finalize()
    assert r.score_per_sentence.shape == (2, 3, 1, 2)
    np.testing.assert_allclose(r.score_per_sentence.mean(0), r.score, atol=1e-6)
    np.testing.assert_allclose(r.control_per_sentence.mean(0), r.control, atol=1e-6)
    again = r.resample(np.array([0, 1]))
    np.testing.assert_allclose(again.score, r.score, atol=1e-6)
    np.testing.assert_allclose(again.diff_mean, r.diff_mean, atol=1e-6)
    # planted: 40 sentences, head 2-3 a frame head in every one: count 1, bounds [1, 1]
    score = np.full((40, 3, 2, 4), 0.10)
    control = np.full((40, 3, 2, 4), 0.10)
    score[:, :, 1, 2] = 0.30 + 0.01 * np.random.default_rng(0).random((40, 3))
    control[:, :, 1, 2] = 0.12
    res = M.FrameResult(score.mean(0), control.mean(0), (score - control).mean(0), (score - control).std(0, ddof=1),
                        40, 40, 0, 20, score_per_sentence=score, control_per_sentence=control)
    m = M.framenet_heads(_PR(res))
    assert m.value == 1 and m.bounds == (1.0, 1.0)
