"""DependencyReducer driven directly with planted attention (no model forward pass)."""
from __future__ import annotations

import pytest
import torch

from bertattn_bench.data.ud import Sentence
from bertattn_bench.engine.batching import encode_words, make_batch
from bertattn_bench.families.dependency import RELATIONS, Arc, DependencyReducer, sd_arcs

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from bertattn_bench.engine.model import embedded_model_path

    return AutoTokenizer.from_pretrained(str(embedded_model_path()))


def sent(rows) -> Sentence:
    words, heads, deprels, upos, xpos = (list(c) for c in zip(*rows))
    return Sentence(words=words, heads=heads, deprels=deprels, upos=upos, xpos=xpos)


# "The cat sat on the mat ." — every word is one word piece in the embedded (uncased) vocabulary.
CAT = sent([
    ("The", 2, "det", "DET", "DT"),      # 0
    ("cat", 3, "nsubj", "NOUN", "NN"),   # 1
    ("sat", 0, "root", "VERB", "VBD"),   # 2
    ("on", 6, "case", "ADP", "IN"),      # 3
    ("the", 6, "det", "DET", "DT"),      # 4
    ("mat", 3, "obl", "NOUN", "NN"),     # 5
    (".", 3, "punct", "PUNCT", "."),     # 6
])

# "The snorkeling stopped ." — "snorkeling" is 4 pieces: s ##nor ##kel ##ing
SNORKEL = sent([
    ("The", 2, "det", "DET", "DT"),             # 0
    ("snorkeling", 3, "nsubj", "NOUN", "NN"),   # 1
    ("stopped", 0, "root", "VERB", "VBD"),      # 2
    (".", 3, "punct", "PUNCT", "."),            # 3
])


def pieces(enc, w: int) -> list[int]:
    return [t for t, wi in enumerate(enc.word_index) if wi == w]


def first_piece(enc, w: int) -> int:
    return pieces(enc, w)[0]


def plant(enc, t_pad: int, rows: dict[int, dict[int, float]]) -> torch.Tensor:
    """A (T, T) attention map: ``rows[query piece] = {key piece: weight}``; other real rows attend to [CLS]."""
    n = len(enc.input_ids)
    a = torch.zeros(t_pad, t_pad)
    for q in range(n):
        for k, v in rows.get(q, {0: 1.0}).items():
            a[q, k] = v
    return a


def gold_head_rows(enc, sentence: Sentence) -> dict:
    """Every piece of word i attends to the first piece of i's gold head; the root's pieces to [CLS]."""
    rows = {}
    for t, w in enumerate(enc.word_index):
        if w < 0:
            rows[t] = {t: 1.0}
        else:
            h = sentence.heads[w]
            rows[t] = {first_piece(enc, h - 1): 1.0} if h > 0 else {0: 1.0}
    return rows


def next_token_rows(enc) -> dict:
    n = len(enc.input_ids)
    return {t: {min(t + 1, n - 1): 1.0} for t in range(n)}


def batch_probs(batch, per_example_heads: list[list[dict]]) -> torch.Tensor:
    """(B, H, T, T) from per example, per head row dicts."""
    b, t = batch.input_ids.shape
    h = len(per_example_heads[0])
    out = torch.zeros(b, h, t, t)
    for i, (enc, heads) in enumerate(zip(batch.examples, per_example_heads)):
        for j, rows in enumerate(heads):
            out[i, j] = plant(enc, t, rows)
    return out


def rel(res, name):
    return res.relations.index(name)


def test_tokenisation_assumptions(tok):
    enc = encode_words(tok, 0, CAT.words)
    assert enc.word_index == [-1, 0, 1, 2, 3, 4, 5, 6, -1]
    enc = encode_words(tok, 0, SNORKEL.words)
    assert enc.word_index == [-1, 0, 1, 1, 1, 1, 2, 3, -1]


def test_pooling_matrices(tok):
    enc = encode_words(tok, 0, SNORKEL.words)
    batch = make_batch([enc], tok, CPU, with_words=True)
    assert batch.word_to.shape == (1, 9, 4) and batch.word_from.shape == (1, 4, 9)
    # to: sum (ones) over the word's pieces; from: mean (1/4 each) over its pieces
    assert batch.word_to[0, 2:6, 1].tolist() == [1.0] * 4
    assert batch.word_from[0, 1, 2:6].tolist() == [0.25] * 4
    assert batch.word_from[0, 1].sum() == pytest.approx(1.0)
    # [CLS] and [SEP] belong to no word
    assert batch.word_to[0, 0].sum() == 0 and batch.word_to[0, 8].sum() == 0
    assert batch.word_mask.tolist() == [[True] * 4]


def run(tok, sentences, probs_fn, relations=RELATIONS, arcs=None, n_layers=1):
    encs = [encode_words(tok, i, s.words) for i, s in enumerate(sentences)]
    arcs = arcs if arcs is not None else [sd_arcs(s) for s in sentences]
    batch = make_batch(encs, tok, CPU, with_words=True)
    probs = probs_fn(batch)
    red = DependencyReducer(arcs, n_layers=n_layers, n_heads=probs.shape[1], device=CPU, relations=relations)
    red.start_batch(batch)
    for layer in range(n_layers):
        red.update(layer, probs)
    return red.finalize()


def test_planted_gold_head_and_next_token(tok):
    def probs_fn(batch):
        (enc,) = batch.examples
        return batch_probs(batch, [[gold_head_rows(enc, CAT), next_token_rows(enc)]])

    res = run(tok, [CAT], probs_fn)
    acc = res.accuracy()  # (L, 2, R, H)
    assert acc.shape == (1, 2, len(RELATIONS), 2)
    n = dict(zip(res.relations, res.n_arcs.tolist()))
    assert n["All"] == 5 and n["det"] == 2 and n["nsubj"] == 1 and n["pobj"] == 1 and n["prep"] == 1
    assert n["dobj"] == 0

    # head 0 = gold UD head: perfect dependent→head on every UD-shaped relation
    d2h = {r: float(acc[0, 0, rel(res, r), 0]) for r in ("All", "det", "nsubj", "pobj", "prep")}
    assert d2h == {"All": 100.0, "det": 100.0, "nsubj": 100.0, "pobj": 0.0, "prep": 0.0}
    # ... and in the head→dependent direction only pobj is right: "on" attends to "mat"
    h2d = {r: float(acc[0, 1, rel(res, r), 0]) for r in ("All", "det", "nsubj", "pobj", "prep")}
    assert h2d == {"All": 0.0, "det": 0.0, "nsubj": 0.0, "pobj": 100.0, "prep": 0.0}

    # head 1 = next token: dependent→head right where head = dependent + 1: (0,1) (1,2) (4,5) of All
    d2h = {r: float(acc[0, 0, rel(res, r), 1]) for r in ("All", "det", "nsubj", "pobj", "prep")}
    assert d2h == {"All": 60.0, "det": 100.0, "nsubj": 100.0, "pobj": 0.0, "prep": 0.0}
    # head→dependent: "sat" attends to "on", the SD prep dependent of "sat"
    h2d = {r: float(acc[0, 1, rel(res, r), 1]) for r in ("All", "det", "nsubj", "pobj", "prep")}
    assert h2d == {"All": 0.0, "det": 0.0, "nsubj": 0.0, "pobj": 0.0, "prep": 100.0}

    assert res.correct[0, 0, rel(res, "All")].tolist() == [5.0, 3.0]
    assert res.n_sentences == 1 and res.n_words == 7 and res.n_split_words == 0

    best = res.best_head("All", 0)
    assert (best.layer, best.head, best.direction, best.accuracy, best.n) == (0, 0, 0, 100.0, 5)
    best = res.best_head("pobj")
    assert (best.head, best.direction, best.accuracy) == (0, 1, 100.0)
    best = res.best_head("prep")
    assert (best.head, best.direction, best.accuracy) == (1, 1, 100.0)


def test_self_attention_is_not_a_candidate(tok):
    # each word puts 0.7 on itself and 0.3 on its gold head: the self-mask leaves the gold head as argmax
    def probs_fn(batch):
        (enc,) = batch.examples
        rows = {}
        for t, w in enumerate(enc.word_index):
            if w < 0 or CAT.heads[w] == 0:
                rows[t] = {t: 1.0}
            else:
                rows[t] = {t: 0.7, first_piece(enc, CAT.heads[w] - 1): 0.3}
        return batch_probs(batch, [[rows]])

    res = run(tok, [CAT], probs_fn)
    assert float(res.accuracy()[0, 0, rel(res, "All"), 0]) == 100.0


def test_cls_and_sep_are_not_candidates(tok):
    # each word puts 0.9 on [CLS]/[SEP] and 0.1 on its gold head: specials drop out, the gold head wins
    def probs_fn(batch):
        (enc,) = batch.examples
        sep = len(enc.input_ids) - 1
        rows = {}
        for t, w in enumerate(enc.word_index):
            if w < 0 or CAT.heads[w] == 0:
                rows[t] = {0: 1.0}
            else:
                rows[t] = {0: 0.5, sep: 0.4, first_piece(enc, CAT.heads[w] - 1): 0.1}
        return batch_probs(batch, [[rows]])

    res = run(tok, [CAT], probs_fn)
    assert float(res.accuracy()[0, 0, rel(res, "All"), 0]) == 100.0


def test_attention_to_a_split_word_is_summed_over_its_pieces(tok):
    # "The" (piece 1) gives 0.15 to each of the 4 pieces of "snorkeling" (sum 0.6, mean 0.15, first 0.15) and
    # 0.4 to "stopped": only the sum makes "snorkeling" — the gold det head — the argmax.
    arcs = [[Arc("det", 0, 1)]]

    def probs_fn(batch):
        (enc,) = batch.examples
        assert pieces(enc, 1) == [2, 3, 4, 5]
        row = {p: 0.15 for p in pieces(enc, 1)} | {first_piece(enc, 2): 0.4}
        return batch_probs(batch, [[{1: row}]])

    res = run(tok, [SNORKEL], probs_fn, arcs=arcs)
    assert res.n_arcs[rel(res, "det")] == 1
    assert float(res.correct[0, 0, rel(res, "det"), 0]) == 1.0
    assert res.n_words == 4 and res.n_split_words == 1


def test_attention_to_a_split_word_loses_when_its_pieces_sum_lower(tok):
    # control for the test above: 0.1 per piece (sum 0.4) vs 0.6 on "stopped" → wrong
    arcs = [[Arc("det", 0, 1)]]

    def probs_fn(batch):
        (enc,) = batch.examples
        row = {p: 0.1 for p in pieces(enc, 1)} | {first_piece(enc, 2): 0.6}
        return batch_probs(batch, [[{1: row}]])

    res = run(tok, [SNORKEL], probs_fn, arcs=arcs)
    assert float(res.correct[0, 0, rel(res, "det"), 0]) == 0.0


def test_attention_from_a_split_word_is_averaged_over_its_pieces(tok):
    # "snorkeling" → gold head "stopped" (nsubj). Its first piece alone prefers "The" (0.6 vs 0.4); the other three
    # pieces attend fully to "stopped". Mean: The 0.15, stopped 0.85 → correct. First piece alone → wrong.
    arcs = [[Arc("nsubj", 1, 2)]]
    the, stopped = 1, 6

    def probs_fn(batch):
        (enc,) = batch.examples
        p = pieces(enc, 1)
        rows = {p[0]: {the: 0.6, stopped: 0.4}} | {q: {stopped: 1.0} for q in p[1:]}
        return batch_probs(batch, [[rows]])

    res = run(tok, [SNORKEL], probs_fn, arcs=arcs)
    assert float(res.correct[0, 0, rel(res, "nsubj"), 0]) == 1.0


def test_attention_from_a_split_word_uses_all_pieces_not_the_last(tok):
    # the mirror image: the last piece alone prefers "stopped", but the mean over pieces prefers "The"
    arcs = [[Arc("nsubj", 1, 2)]]
    the, stopped = 1, 6

    def probs_fn(batch):
        (enc,) = batch.examples
        p = pieces(enc, 1)
        rows = {q: {the: 1.0} for q in p[:-1]} | {p[-1]: {stopped: 1.0}}
        return batch_probs(batch, [[rows]])

    res = run(tok, [SNORKEL], probs_fn, arcs=arcs)
    assert float(res.correct[0, 0, rel(res, "nsubj"), 0]) == 0.0


def test_possessive_s_counts_for_the_dependent(tok):
    # "John 's dog barked": poss(John → dog) with alt 's. Head 0: "John" → "barked" (wrong) but "'s" → "dog".
    # Head 1: "dog" attends to "'s" (alt) → correct head→dependent.
    s = sent([
        ("John", 3, "nmod:poss", "PROPN", "NNP"),
        ("'s", 1, "case", "PART", "POS"),
        ("dog", 4, "nsubj", "NOUN", "NN"),
        ("barked", 0, "root", "VERB", "VBD"),
    ])

    def probs_fn(batch):
        (enc,) = batch.examples
        john, s_, dog, barked = (first_piece(enc, w) for w in range(4))
        head0 = {john: {barked: 1.0}, dog: {barked: 1.0}} | {q: {dog: 1.0} for q in pieces(enc, 1)}
        head1 = {dog: {q: 0.5 for q in pieces(enc, 1)}}
        return batch_probs(batch, [[head0, head1]])

    res = run(tok, [s], probs_fn, relations=("poss",))
    assert res.n_arcs.tolist() == [1]
    assert res.correct[0, 0, 0].tolist() == [1.0, 0.0]
    assert res.correct[0, 1, 0].tolist() == [0.0, 1.0]


def test_counts_accumulate_per_layer(tok):
    def probs_fn(batch):
        (enc,) = batch.examples
        return batch_probs(batch, [[gold_head_rows(enc, CAT)]])

    res = run(tok, [CAT], probs_fn, n_layers=3)
    assert res.correct[:, 0, rel(res, "All"), 0].tolist() == [5.0, 5.0, 5.0]
    assert res.n_arcs[rel(res, "All")] == 5  # arcs counted once per batch, not per layer


LONG = sent([
    ("The", 2, "det", "DET", "DT"),
    ("unaffable", 3, "amod", "ADJ", "JJ"),  # split into 3 pieces
    ("glockenspiel", 4, "nsubj", "NOUN", "NN"),  # split into 5 pieces
    ("rang", 0, "root", "VERB", "VBD"),
    ("on", 7, "case", "ADP", "IN"),
    ("the", 7, "det", "DET", "DT"),
    ("mat", 4, "obl", "NOUN", "NN"),
    ("loudly", 4, "advmod", "ADV", "RB"),
    (".", 4, "punct", "PUNCT", "."),
])


def _padded_probs(batch, sentences_by_index, seed=0):
    """Gold-head (head 0) and next-token (head 1) maps, with random junk in every padded row and column."""
    g = torch.Generator().manual_seed(seed)
    b, t = batch.input_ids.shape
    out = torch.rand(b, 2, t, t, generator=g) * 5.0  # junk everywhere ...
    for i, enc in enumerate(batch.examples):
        n = len(enc.input_ids)
        s = sentences_by_index[enc.index]
        for j, rows in enumerate([gold_head_rows(enc, s), next_token_rows(enc)]):
            real = plant(enc, t, rows)
            out[i, j, :n, :n] = real[:n, :n]  # ... except the real block
    return out


def test_padding_does_not_leak(tok):
    sentences = [CAT, LONG]  # CAT is example 0, LONG example 1
    encs = [encode_words(tok, i, s.words) for i, s in enumerate(sentences)]
    assert len(encs[1].input_ids) > len(encs[0].input_ids)
    arcs = [sd_arcs(s) for s in sentences]

    def reduce(batch_encs, seed):
        batch = make_batch(batch_encs, tok, CPU, with_words=True)
        red = DependencyReducer(arcs, n_layers=1, n_heads=2, device=CPU)
        red.start_batch(batch)
        red.update(0, _padded_probs(batch, sentences, seed))
        return red.finalize()

    alone = reduce([encs[0]], seed=1)
    long_alone = reduce([encs[1]], seed=2)
    together = reduce([encs[1], encs[0]], seed=3)  # the short one padded, and not at batch position 0
    assert torch.equal(together.correct, alone.correct + long_alone.correct)
    assert torch.equal(together.n_arcs, alone.n_arcs + long_alone.n_arcs)
    assert together.n_words == 7 + 9 and together.n_split_words == 2 and together.n_sentences == 2
    # and the short sentence's own numbers are the planted ones (see test_planted_gold_head_and_next_token)
    assert alone.correct[0, 0, alone.relations.index("All")].tolist() == [5.0, 3.0]


def test_padding_with_only_the_short_sentence_scored(tok):
    # the long sentence in the batch but with no arcs: counts equal the short sentence alone
    sentences = [CAT, LONG]
    encs = [encode_words(tok, i, s.words) for i, s in enumerate(sentences)]
    arcs = [sd_arcs(CAT), []]

    def reduce(batch_encs, seed):
        batch = make_batch(batch_encs, tok, CPU, with_words=True)
        red = DependencyReducer(arcs, n_layers=1, n_heads=2, device=CPU)
        red.start_batch(batch)
        red.update(0, _padded_probs(batch, sentences, seed))
        return red.finalize()

    alone, together = reduce([encs[0]], 1), reduce([encs[0], encs[1]], 4)
    assert torch.equal(alone.correct, together.correct)
    assert torch.equal(alone.n_arcs, together.n_arcs)


def test_several_batches_accumulate(tok):
    sentences = [CAT, LONG]
    encs = [encode_words(tok, i, s.words) for i, s in enumerate(sentences)]
    arcs = [sd_arcs(s) for s in sentences]
    red = DependencyReducer(arcs, n_layers=1, n_heads=2, device=CPU)
    for e in encs:
        batch = make_batch([e], tok, CPU, with_words=True)
        red.start_batch(batch)
        red.update(0, _padded_probs(batch, sentences))
    res = red.finalize()
    n_all = len([a for a in arcs[0] + arcs[1] if a.relation == "All"])
    assert res.n_arcs[res.relations.index("All")] == n_all
    # the gold-head plant is right on every UD-shaped arc of both sentences
    assert res.correct[0, 0, res.relations.index("All"), 0] == n_all
    assert res.n_sentences == 2


def test_batch_without_arcs(tok):
    # a one-word sentence has no arcs; the reducer must cope with an empty arc list
    s = sent([("Hi", 0, "root", "INTJ", "UH")])
    res = run(tok, [s], lambda batch: batch_probs(batch, [[next_token_rows(batch.examples[0])]]))
    assert int(res.n_arcs.sum()) == 0
    assert float(res.correct.sum()) == 0.0
    assert float(res.accuracy().sum()) == 0.0


def test_words_the_tokenizer_drops_become_unk(tok):
    # a zero-width space and a NUL have no pieces; each must still be one word (as [UNK]) so word ids line up
    enc = encode_words(tok, 0, ["a", "\u200b", "b", "\x00"])
    assert enc.word_index == [-1, 0, 1, 2, 3, -1]
    assert enc.input_ids[2] == tok.unk_token_id and enc.input_ids[4] == tok.unk_token_id
    assert enc.n_words == 4


def test_length_order_is_the_one_stable_length_sort():
    """Indices by length, ties in their original order (hand-computed); the batches of iter_batches follow it."""
    from bertattn_bench.engine.batching import length_order

    assert length_order([3, 1, 2, 1, 3, 0]) == [5, 1, 3, 2, 0, 4]
    assert length_order([]) == []
    assert length_order([2, 2, 2]) == [0, 1, 2]


def test_iter_batches_carry_positions_and_in_data_order_restores_order(tokenizer):
    """The one batch loop: length-sorted batches name their examples' positions (hand-computed), and per-batch
    rows put back by those positions come out in data order."""
    import numpy as np

    from bertattn_bench.engine.batching import Encoded, in_data_order, iter_batches

    lengths = [5, 3, 4, 3, 6]
    enc = [Encoded(i, [tokenizer.cls_token_id] * n, [0] * n, [-1] * n, 0) for i, n in enumerate(lengths)]
    batches = list(iter_batches(enc, tokenizer, "cpu", 2))
    assert [b.positions for b in batches] == [[1, 3], [2, 0], [4]]
    assert [b.input_ids.shape[1] for b in batches] == [3, 5, 6]
    rows = [np.array([[10.0 * p] for p in b.positions]) for b in batches]  # a row's value names its example
    assert in_data_order([b.positions for b in batches], rows)[:, 0].tolist() == [0.0, 10.0, 20.0, 30.0, 40.0]


@pytest.mark.parametrize("cls_weight, expected", [(0.4, 100.0), (0.41, 0.0), (0.39, 100.0)])
def test_specials_as_candidates_a_tie_goes_to_the_word(tok, cls_weight, expected):
    """Clark fn. 2's variant with [CLS]/[SEP] as candidates: the argmax over [words, CLS, SEP] takes the first
    maximum, so a word tied with [CLS] wins and a [CLS] strictly above it wins (the reducer derives this argmax from
    the word argmax; ``>=`` for ``>`` there fails the tie)."""
    def probs_fn(batch):
        (enc,) = batch.examples
        rows = {}
        for t, w in enumerate(enc.word_index):
            if w < 0 or CAT.heads[w] == 0:
                rows[t] = {0: 1.0}
            else:  # powers of two apart are not needed: single-piece words pool their pieces' weights exactly
                rows[t] = {0: cls_weight, first_piece(enc, CAT.heads[w] - 1): 0.4}
        return batch_probs(batch, [[rows]])

    res = run(tok, [CAT], probs_fn)
    n_all = int(res.n_arcs[rel(res, "All")])
    assert float(res.all_correct_with_special[0, 0]) / n_all * 100 == expected
    assert float(res.accuracy()[0, 0, rel(res, "All"), 0]) == 100.0  # words alone: the gold head either way


def test_layer_groups_give_the_same_numbers(tok, monkeypatch):
    """A batch's layers reduced together, one at a time, or in groups of two (a cap on the group's elements) give
    the same numbers, bit for bit."""
    import bertattn_bench.families.common.dependency_stats as D

    sentences = [CAT, SNORKEL, CAT]
    g = torch.Generator().manual_seed(3)

    def probs_fn(batch):
        b, t = batch.input_ids.shape
        scores = torch.randn(b, 4, t, t, generator=g) * 3
        return scores.masked_fill(~batch.token_mask[:, None, None, :], float("-inf")).softmax(-1)

    encs = [encode_words(tok, i, s.words) for i, s in enumerate(sentences)]
    batch = make_batch(encs, tok, CPU, with_words=True)
    maps = [probs_fn(batch) for _ in range(3)]
    per_layer = batch.input_ids.shape[0] * 4 * batch.word_mask.shape[1] * (batch.input_ids.shape[1] +
                                                                           batch.word_mask.shape[1] + 2)

    def reduce(cap):
        monkeypatch.setitem(D.GROUP_ELEMENTS, "cpu", cap)
        red = DependencyReducer([sd_arcs(s) for s in sentences], 3, 4, CPU)
        red.start_batch(batch)
        assert red.group == min(3, max(1, cap // per_layer))
        for layer, p in enumerate(maps):
            red.update(layer, p)
        red.end_batch()
        return red.finalize()

    together, one, two = reduce(3 * per_layer), reduce(1), reduce(2 * per_layer)
    for res in (one, two):
        for name in ("correct", "all_correct_with_special", "sink_share", "sink_sq_mean"):
            assert torch.equal(getattr(together, name), getattr(res, name)), name
        assert res.max_row_sum_error == together.max_row_sum_error
    assert float(together.correct.sum()) > 0
