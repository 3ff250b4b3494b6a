"""Kovaleva §4.1/§4.4/§4.5 (metrics/patterns.py) on planted attention maps with known answers, and on a tiny model."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bertattn_bench.engine.batching import Encoded, encode_words, iter_batches, make_batch
from bertattn_bench.families import patterns as P

V, D, VD, B, H = range(5)  # indices into P.TYPES


def _pair(tokenizer, index, n_a, n_b, word=None):
    """[CLS] a1..a_na [SEP] b1..b_nb [SEP] from plain word-piece ids (no punctuation)."""
    word = word or tokenizer.convert_tokens_to_ids("cat")
    ids = [tokenizer.cls_token_id] + [word] * n_a + [tokenizer.sep_token_id] + [word] * n_b + [tokenizer.sep_token_id]
    return Encoded(index, ids, [0] * (n_a + 2) + [1] * (n_b + 1), [-1] * len(ids), 0)


def _single(tokenizer, index, n):
    ids = [tokenizer.cls_token_id] + [tokenizer.convert_tokens_to_ids("dog")] * n + [tokenizer.sep_token_id]
    return Encoded(index, ids, [0] * len(ids), [-1] * len(ids), 0)


@pytest.fixture
def pair_batch(tokenizer):
    # example 0: [CLS] 8 words [SEP] 8 words [SEP] (19 tokens); example 1 shorter and padded (13 tokens)
    return make_batch([_pair(tokenizer, 0, 8, 8), _pair(tokenizer, 1, 5, 5)], tokenizer, "cpu", False)


def _rows(batch, fn, heads=1):
    """(B, heads, T, T) with row q of example b = fn(b, q, info) over the real keys; padded query rows get junk
    (all mass on [CLS]) that must never count."""
    b, t = batch.input_ids.shape
    probs = torch.zeros(b, heads, t, t)
    for i in range(b):
        n = int(batch.token_mask[i].sum())
        info = SimpleNamespace(n=n, cls=batch.is_cls[i].nonzero().flatten().tolist(),
                               sep=batch.is_sep[i].nonzero().flatten().tolist())
        info.special = set(info.cls + info.sep)
        info.seg = (torch.cumsum(batch.is_sep[i].long(), 0) - batch.is_sep[i].long()).tolist()
        for q in range(t):
            if q >= n:
                probs[i, :, q, 0] = 1.0
                continue
            row = torch.as_tensor(fn(i, q, info), dtype=torch.float32)
            probs[i, :, q, :n] = row / row.sum()
    return probs


def one_hot(n, k):
    r = np.zeros(n)
    r[k] = 1.0
    return r


def to_cls(i, q, s):
    return one_hot(s.n, s.cls[0])


def to_neighbour(i, q, s):
    """The previous ordinary token, else the next one (the first word of each sentence), else itself."""
    for k in (q - 1, q + 1):
        if 0 <= k < s.n and k not in s.special:
            return one_hot(s.n, k)
    return one_hot(s.n, q)


def uniform(i, q, s):
    return np.ones(s.n)


def uniform_ordinary(i, q, s):
    return np.array([0.0 if k in s.special else 1.0 for k in range(s.n)])


def own_sentence(i, q, s):
    if q in s.special:
        return np.ones(s.n)
    return np.array([1.0 if (k not in s.special and s.seg[k] == s.seg[q]) else 0.0 for k in range(s.n)])


def mix(*parts):
    def fn(i, q, s):
        return sum(w * f(i, q, s) / f(i, q, s).sum() for w, f in parts)
    return fn


def feats(batch, fn):
    v, d, b = P.map_features(_rows(batch, fn), P.map_masks(batch))
    return v[:, 0], d[:, 0], b[:, 0]


def test_features_by_hand(pair_batch):
    """Uniform attention over n tokens: v = 3/n (three special tokens), d = (number of (query, ordinary
    neighbour) pairs) / n^2, b = 0 (chance); all on [CLS]: v = 1; all on a neighbour: d = (n - 3)/n."""
    n = [19, 13]
    v, d, b = feats(pair_batch, uniform)
    assert v.tolist() == pytest.approx([3 / 19, 3 / 13])
    # ordered (query, key) neighbour pairs with an ordinary key: each sentence of m words has 2(m-1) inside, plus
    # the two special tokens beside it pointing in (the [CLS]/[SEP] before and the [SEP] after): 2(m-1) + 2
    pairs = [2 * (2 * 7 + 2), 2 * (2 * 4 + 2)]
    assert d.tolist() == pytest.approx([p / k / k for p, k in zip(pairs, n)])
    assert b.tolist() == pytest.approx([0.0, 0.0], abs=1e-6)
    v, d, b = feats(pair_batch, to_cls)
    assert v.tolist() == pytest.approx([1.0, 1.0]) and d.tolist() == pytest.approx([0.0, 0.0])
    v, d, _ = feats(pair_batch, to_neighbour)
    assert v.tolist() == pytest.approx([0.0, 0.0])
    assert d.tolist() == pytest.approx([1.0, 1.0])  # every query, [CLS]/[SEP] too, has an ordinary neighbour
    _, _, b = feats(pair_batch, own_sentence)
    assert b.tolist() == pytest.approx([1.0, 1.0])


@pytest.mark.parametrize("fn,expected", [
    (to_cls, V), (to_neighbour, D), (mix((0.5, to_cls), (0.5, to_neighbour)), VD), (own_sentence, B),
    (uniform, H),
])
def test_planted_map_of_every_type(pair_batch, fn, expected):
    v, d, b = feats(pair_batch, fn)
    assert P.classify(v, d, b).tolist() == [expected, expected]


def test_single_sentence_is_never_block(tokenizer):
    batch = make_batch([_single(tokenizer, 0, 10), _single(tokenizer, 1, 4)], tokenizer, "cpu", False)
    v, d, b = feats(batch, own_sentence)
    assert b.tolist() == [0.0, 0.0]
    assert P.classify(v, d, b).tolist() == [H, H]


@pytest.mark.parametrize("v,d,b,expected", [
    (0.49, 0.0, 0.0, H), (0.50, 0.0, 0.0, V), (0.30, 0.20, 0.0, VD),  # structured from v + d = 0.5
    (0.376, 0.124, 0.0, V), (0.374, 0.126, 0.0, VD),  # d just under / over a quarter of v + d
    (0.126, 0.374, 0.0, VD), (0.124, 0.376, 0.0, D),
    (0.1, 0.3, 0.59, H), (0.1, 0.3, 0.61, B), (0.3, 0.3, 0.9, VD),  # block only on an unstructured map
])
def test_rule_near_its_thresholds(v, d, b, expected):
    t = lambda x: torch.tensor([x])  # noqa: E731
    assert P.classify(t(v), t(d), t(b)).tolist() == [expected]


@pytest.mark.parametrize("alpha,expected", [(0.32, H), (0.35, V)])
def test_planted_mixture_near_the_structure_threshold(pair_batch, alpha, expected):
    """alpha on [CLS] + (1 - alpha) uniform: v = alpha + (1 - alpha) 3/n, d = (1 - alpha) d_uniform; on the
    19-token example v + d crosses 0.5 at alpha = 0.336 (computed here, then classified)."""
    v, d, b = feats(pair_batch, mix((alpha, to_cls), (1 - alpha, uniform)))
    d_uni = 2 * (2 * 7 + 2) / 19 / 19
    assert float(v[0] + d[0]) == pytest.approx(alpha + (1 - alpha) * (3 / 19 + d_uni))
    assert (float(v[0] + d[0]) >= 0.5) == (expected == V)
    assert int(P.classify(v, d, b)[0]) == expected


def test_planted_mixture_near_the_block_threshold(pair_batch):
    """beta own-sentence + (1 - beta) uniform over the ordinary tokens: the own-sentence share's excess over chance
    is exactly beta per ordinary query, so b = beta; the map turns block at beta = 0.6."""
    for beta, expected in ((0.55, H), (0.65, B)):
        v, d, b = feats(pair_batch, mix((beta, own_sentence), (1 - beta, uniform_ordinary)))
        assert b.tolist() == pytest.approx([beta, beta], abs=1e-5)
        assert P.classify(v, d, b).tolist() == [expected, expected]


def _reduce(batch, layers):
    red = P.PatternReducer(len(layers), layers[0].shape[1], "cpu")
    red.start_batch(batch)
    for layer, probs in enumerate(layers):
        red.update(layer, probs)
    return red.finalize()


def test_pattern_reducer_counts_scores_and_cls_row(pair_batch):
    heads = torch.cat([_rows(pair_batch, to_cls), _rows(pair_batch, uniform)], 1)  # head 1: vertical, head 2: het.
    res = _reduce(pair_batch, [heads, _rows(pair_batch, to_neighbour, heads=2)])
    assert res.counts[0, 0].tolist() == [2, 0, 0, 0, 0] and res.counts[0, 1].tolist() == [0, 0, 0, 0, 2]
    assert res.counts[1].sum(0).tolist() == [0, 4, 0, 0, 0]
    assert res.shares().tolist() == pytest.approx([0.25, 0.5, 0, 0, 0.25])
    assert res.n_maps == 8 and res.n_examples == 2
    # §4.4 score: [CLS] receives everything (n/n = 1) in the vertical head; uniform: each token receives 1/n,
    # the max over the two [SEP]s is 1/n; no punctuation in these inputs, so nothing is averaged for it
    assert res.special[0, 0, 0] == pytest.approx(1.0)
    assert res.special[0, 1].tolist() == pytest.approx([(1 / 19 + 1 / 13) / 2] * 2 + [0.0])
    assert res.n_special.tolist() == [2, 2, 0]
    # [CLS] query row: on [CLS] in head 1; uniform in head 2: 1/n on [CLS], 2/n on [SEP]s, the rest other
    assert res.cls_row[0, 0].tolist() == pytest.approx([1, 0, 0, 0])
    assert res.cls_row[0, 1].tolist() == pytest.approx([np.mean([1 / 19, 1 / 13]), np.mean([2 / 19, 2 / 13]), 0,
                                                        np.mean([16 / 19, 10 / 13])])
    # per token: uniform gives every token 1/n whatever its class (a class total gives "other" (n-3)/n)
    assert res.cls_row_token[0, 0].tolist() == pytest.approx([1, 0, 0, 0])
    u = np.mean([1 / 19, 1 / 13])
    assert res.cls_row_token[0, 1].tolist() == pytest.approx([u, u, 0, u])
    assert res.n_cls_class.tolist() == [2, 2, 0, 2]
    # the length-free §4.4 score: 1 for every token under uniform attention; n for a token that receives everything
    assert res.special_free[0, 1, :2].tolist() == pytest.approx([1.0, 1.0])
    assert res.special_free[0, 0, 0] == pytest.approx((19 + 13) / 2)
    assert res.sep_free_examples.shape == (2,)
    assert set(res.examples) == {"vertical", "diagonal", "heterogeneous"}
    assert res.examples["vertical"]["map"].shape[0] in (19, 13)


def test_batched_equals_one_by_one_on_a_model(tiny, tokenizer):
    """Padding never enters: the reducer over one padded batch equals the sum over examples fed alone."""
    from bertattn_bench.engine.attention import run_reducers

    encs = [_pair(tokenizer, 0, 9, 4), _pair(tokenizer, 1, 2, 3, tokenizer.convert_tokens_to_ids(".")),
            _single(tokenizer, 2, 6)]
    info = tiny.info

    def run(batches):
        return run_reducers(tiny.model, batches, [P.PatternReducer(info.n_layers, info.n_heads, "cpu")])[0]

    together = run(iter_batches(encs, tokenizer, "cpu", batch_size=3))
    alone = [run(iter_batches([e], tokenizer, "cpu", batch_size=1)) for e in encs]
    assert np.array_equal(together.counts, sum(a.counts for a in alone))
    np.testing.assert_allclose(together.features, np.mean([a.features for a in alone], 0), atol=1e-5)
    np.testing.assert_allclose(together.cls_row, np.mean([a.cls_row for a in alone], 0), atol=1e-5)
    has = np.array([a.n_special for a in alone])  # (3 examples, 3 features)
    expect = sum(a.special * h for a, h in zip(alone, has)) / np.maximum(has.sum(0), 1)
    np.testing.assert_allclose(together.special, expect, atol=1e-5)
    # issue 61: each example's §4.4 scores (mean over heads), nan where it lacks the token: their mean over the
    # examples with the token is the pooled score's mean over heads
    per = together.special_examples
    assert per.shape == (3, info.n_layers, 3)
    np.testing.assert_allclose(np.nanmean(per[..., :2], 0), together.special[..., :2].mean(1), atol=1e-5)


def test_feature_reducer_paper_score_and_subject_attention(tokenizer):
    """UD words: in sentence 1 every query attends to the noun 'dog' -> its score is n/n = 1 (max over the nouns),
    the verb attends to its subject -> verb->subject attention 1; sentence 2 is uniform (each word 1/n); sentences
    without a feature are left out of its mean."""
    s1 = ["The", "dog", "barks", "not", "."]
    s2 = ["Run", "!"]
    encs = [encode_words(tokenizer, 0, s1), encode_words(tokenizer, 1, s2)]
    lingo = {k: i for i, k in enumerate(P.LING)}
    f1 = np.zeros((5, len(P.LING)), bool)
    f1[1, lingo["noun"]] = f1[1, lingo["subject"]] = f1[2, lingo["verb"]] = True
    f1[3, lingo["negation"]] = f1[4, lingo["punct"]] = True
    f2 = np.zeros((2, len(P.LING)), bool)
    f2[0, lingo["verb"]] = f2[1, lingo["punct"]] = True
    batch = make_batch(encs, tokenizer, "cpu", with_words=True)
    dog = [t for t, w in enumerate(encs[0].word_index) if w == 1]
    n1 = len(encs[0].input_ids)

    def to_dog(i, q, s):
        return one_hot(s.n, dog[0]) if i == 0 else np.ones(s.n)

    probs = _rows(batch, to_dog)
    red = P.FeatureReducer({0: f1, 1: f2}, {0: [(2, 1)]}, 1, 1, "cpu")
    red.start_batch(batch)
    red.update(0, probs)
    res = red.finalize()
    sc = dict(zip(P.UD_FEATURES, res.scores[0, 0]))
    assert res.n_has.tolist() == [2, 2, 2, 1, 0, 2, 1, 0, 1]  # [CLS] [SEP] punct noun pronoun verb subj obj neg
    assert sc["noun"] == pytest.approx(1.0) and sc["subject"] == pytest.approx(1.0)
    assert sc["negation"] == pytest.approx(0.0)
    n2 = len(encs[1].input_ids)
    assert sc["verb"] == pytest.approx((0 + 1 / n2) / 2)  # s1: the verb gets nothing; s2 uniform: 1/n
    assert sc["[CLS]"] == pytest.approx((0 + 1 / n2) / 2)
    assert res.nsubj[0, 0] == pytest.approx(1.0) and res.n_arcs == 1
    assert n1 >= 7
    # per sentence (by example index): noun score 1 in sentence 0, none (nan) in sentence 1
    assert res.per_sentence.shape == (2, 1, 1, len(P.RISE))
    assert res.per_sentence[0, 0, 0, 0] == pytest.approx(1.0) and np.isnan(res.per_sentence[1, 0, 0, 0])
    # issue 61: the per-sentence values the bootstrap resamples add back up to the pooled ones (both sentences once)
    both = res.resample(np.array([0, 1]))
    np.testing.assert_allclose(both.scores, res.scores, atol=1e-6)
    np.testing.assert_allclose(both.nsubj, res.nsubj, atol=1e-6)
    np.testing.assert_allclose(both.diag, res.diag, atol=1e-6)
    assert both.n_arcs == 1 and res.arcs_per_sentence.tolist() == [1, 0]
    # sentence 1 alone: no noun (its score reads 0, as the pooled 0 / 0), the uniform verb 1/n, no arc
    one = res.resample(np.array([1, 1]))
    assert dict(zip(P.UD_FEATURES, one.scores[0, 0]))["verb"] == pytest.approx(1 / n2) and one.n_arcs == 0


def test_feature_score_of_a_many_piece_word_is_its_best_piece(tokenizer):
    """Uniform attention: a noun of k pieces scores 1/n (the max over its pieces, as the notebook's token ids), not
    k/n (a sum over pieces would favour long nouns under any diffuse head)."""
    words = ["the", "tokenization", "was", "slow"]
    enc = [encode_words(tokenizer, 0, words)]
    k = sum(1 for w in enc[0].word_index if w == 1)
    assert k > 1
    f = np.zeros((4, len(P.LING)), bool)
    f[1, P.LING.index("noun")] = True
    batch = make_batch(enc, tokenizer, "cpu", with_words=True)
    red = P.FeatureReducer({0: f}, {}, 1, 1, "cpu")
    red.start_batch(batch)
    red.update(0, _rows(batch, lambda i, q, s: np.ones(s.n)))
    n = len(enc[0].input_ids)
    assert dict(zip(P.UD_FEATURES, red.finalize().scores[0, 0]))["noun"] == pytest.approx(1 / n)


def _result(shares_pt, shares_ft=None, task="mrpc", diag=None, nsubj=None, cls_row=None, sink="[CLS]",
            cls_row_token=None, cls_row_max=None):
    def stats(shares, label):
        counts = np.zeros((2, 4, 5))
        counts[0, 0] = np.array(shares) * 100
        g = P.PatternStats(counts, np.zeros((2, 4, 3)), np.zeros((2, 4, 3)), np.zeros(3), np.zeros((2, 4, 2)),
                           np.zeros((2, 4, 4)) if cls_row is None else cls_row, 100,
                           cls_row_token=np.zeros((2, 4, 4)) if cls_row_token is None else cls_row_token,
                           n_cls_class=np.array([100, 100, 100, 100]), cls_row_max=cls_row_max)
        u = P.FeatureStats(np.zeros((2, 4, len(P.UD_FEATURES))), np.zeros(len(P.UD_FEATURES)),
                           np.zeros((2, 4)) if nsubj is None else nsubj, 10,
                           np.zeros((2, 4)) if diag is None else diag, 5)
        return P.ModelStats(label, g, u)

    r = P.PatternsResult(task, True, "regression", 100, 100, "ewt_dev", stats(shares_pt, "pre-trained"),
                         None if shares_ft is None else stats(shares_ft, "fine-tuned"), "no fine-tuned model", sink, 2, 4)
    return SimpleNamespace(result=r, corpus=task)


def test_share_metrics_and_fine_tuned_skip():
    from bertattn_bench.claims.registry import NotApplicable

    pr = _result([0.3, 0.04, 0.1, 0.06, 0.5])
    m = P.pattern_min_share(pr)
    assert m.value == pytest.approx(0.04) and "rarest diagonal" in m.detail and m.n == 100
    assert P.pattern_share(pr, ["vertical", "vertical+diagonal"]).value == pytest.approx(0.4)
    with pytest.raises(NotApplicable, match="fine-tuned"):
        P.pattern_share(pr, ["heterogeneous"], model="finetuned")
    single = _result([0.3, 0.1, 0.1, 0.0, 0.5])
    single.result.is_pair = False
    assert P.pattern_min_share(single).value == pytest.approx(0.1)  # no block type on single sentences
    others = [_result([0.3, 0.1, 0.1, 0.1, 0.4], [0.25, 0.1, 0.1, 0.1, 0.45], task="rte")]
    me = _result([0.3, 0.1, 0.1, 0.1, 0.4], [0.2, 0.1, 0.1, 0.1, 0.5])
    m = P.pattern_share_task_margin(me, others, ["heterogeneous"])
    assert m.value == pytest.approx(0.05)
    # its SE: two binomial shares (0.5 and 0.45 of 100 maps each), combined
    assert m.standard_error == pytest.approx(((0.5 * 0.5 + 0.45 * 0.55) / 100) ** 0.5)


def test_tok2tok_and_cls_target_metrics():
    diag = np.full((2, 4), 0.1)
    diag[0, 1], diag[1, 2], diag[1, 3] = 0.8, 0.5, 0.3
    nsubj = np.zeros((2, 4))
    nsubj[0, 1], nsubj[1, 2], nsubj[1, 3] = 0.9, 0.7, 0.6
    m = P.tok2tok_top_heads_diagonal(_result([0.2] * 5, diag=diag, nsubj=nsubj))
    assert m.value == pytest.approx((0.8 + 0.5 + 0.3) / 3 / 0.1)
    assert "1-2" in m.detail and "2-3" in m.detail
    cls_row = np.zeros((2, 4, 4))
    cls_row[-1, :, :] = [0.5, 0.1, 0.3, 0.1]  # final layer: most on [CLS]
    pr = _result([0.2] * 5, [0.2] * 5, cls_row_max=cls_row, sink="[CLS]")
    # [SEP] is read literally (the notebook's cell 53 scores the [SEP] positions), whatever the sink
    assert P.cls_final_target_margin(pr, {"mrpc": "[SEP]"}).value == pytest.approx(0.1 - 0.5)
    pr.result.task = "rte"
    assert P.cls_final_target_margin(pr, {"rte": "punct"}).value == pytest.approx(0.3 - 0.5)


def test_cls_target_compares_tokens_not_class_totals():
    """MRPC-like: [CLS] 0.16 of the row on one token, "other" 0.80 over 45 tokens (0.018 each): per token [CLS]
    wins by 0.16 - 0.018; the class totals (in the detail) would have "other" win."""
    total = np.zeros((2, 4, 4))
    total[-1] = [0.16, 0.02, 0.02, 0.80]
    tok = np.zeros((2, 4, 4))
    tok[-1] = [0.16, 0.01, 0.005, 0.80 / 45]
    top = np.zeros((2, 4, 4))
    top[-1] = [0.16, 0.01, 0.005, 0.05]  # max over each class's tokens (the notebook's cell 53)
    m = P.cls_final_target_margin(_result([0.2] * 5, [0.2] * 5, cls_row=total, cls_row_token=tok, cls_row_max=top),
                                  {"mrpc": "[SEP]"})
    assert m.value == pytest.approx(0.01 - 0.16) and "class totals [CLS] 0.160" in m.detail


def _with_sep(pr, free, per_example, lengths=None):
    """Per example: the §4.4 [SEP] score x length (``per_example``) and the length (default 10 tokens each)."""
    for ms in (pr.result.pretrained,):
        ms.glue.special_free = np.zeros((2, 4, 3))
        ms.glue.special_free[..., 1] = free
        ms.glue.sep_free_examples = np.asarray(per_example, float)
        ms.glue.example_lengths = np.full(len(per_example), 10.0) if lengths is None else np.asarray(lengths, float)
    return pr


def test_sep_margin_on_equal_lengths_with_its_se():
    me = _with_sep(_result([0.2] * 5, task="sst-2"), 1.5, [1.4, 1.6, 1.5, 1.5])
    other = _with_sep(_result([0.2] * 5, task="mrpc"), 1.2, [1.1, 1.3, 1.2, 1.2])
    m = P.sep_score_task_margin(me, [other])
    assert m.value == pytest.approx(0.03)  # the paper's score: x length / 10
    sd = np.std([1.4, 1.6, 1.5, 1.5], ddof=1) / 10
    assert m.standard_error == pytest.approx(np.hypot(sd / 2, sd / 2))
    # uniform attention everywhere (a random model): every task 1/n, margin 0
    flat = [_with_sep(_result([0.2] * 5, task=t), 1.0, [1.0, 1.0]) for t in ("sst-2", "mrpc")]
    assert P.sep_score_task_margin(flat[0], flat[1:]).value == pytest.approx(0.0)


def test_ling_vs_special_needs_a_significant_rise():
    """The first half of §4.4's sentence: a head whose noun score rises in every sentence is found; with no rise
    the value is inf (does not hold) whatever the ratio."""
    rng = np.random.default_rng(0)
    pr = _result([0.2] * 5, [0.2] * 5)
    r = pr.result
    for ms in (r.pretrained, r.finetuned):
        ms.ud.scores[..., P.UD_FEATURES.index("[CLS]")] = 0.5
        ms.ud.scores[..., P.UD_FEATURES.index("noun")] = 0.05
    base = rng.uniform(0.01, 0.05, size=(40, 2, 4, len(P.RISE))).astype(np.float32)
    r.pretrained.ud.per_sentence = base
    r.finetuned.ud.per_sentence = base + rng.normal(0, 0.001, size=base.shape).astype(np.float32)
    ctl = rng.uniform(0.01, 0.05, size=(40, 2, 4)).astype(np.float32)  # determiners: unchanged by fine-tuning
    r.pretrained.ud.per_sentence_control = r.finetuned.ud.per_sentence_control = ctl
    m = P.ling_vs_special(pr)
    assert m.value == float("inf") and "no rise" in m.detail
    risen = r.finetuned.ud.per_sentence.copy()
    risen[:, 1, 2, 0] += 0.02  # head 2-3's noun score up in every sentence
    r.finetuned.ud.per_sentence = risen
    m = P.ling_vs_special(pr)
    assert m.value == pytest.approx(0.1) and "1 of them more than the same head's det score: noun 2-3 +0.0" in m.detail


def test_word_match_score_on_planted_maps(tokenizer):
    """[CLS] the cat sat [SEP] a cat ran [SEP]: "cat" occurs in both sentences (the only match; "the"/"a" differ).
    Head 0: every token puts 0.8 on the other sentence's "cat" when it is a "cat" itself, else uniform; head 1:
    uniform. Uniform gives a match 1/n (n = 9): head 1's score is 1, head 0's 0.8 / (1/9) = 7.2."""
    ids = tokenizer.convert_tokens_to_ids(["[CLS]", "the", "cat", "sat", "[SEP]", "a", "cat", "ran", "[SEP]"])
    enc = [Encoded(0, ids, [0] * 5 + [1] * 4, [-1] * 9, 0)]
    batch = make_batch(enc, tokenizer, "cpu", False)

    def to_other_cat(i, q, s):
        if q in (2, 6):
            row = np.full(s.n, 0.2 / (s.n - 1))
            row[8 - q] = 0.8  # 2 -> 6, 6 -> 2
            return row
        return np.ones(s.n)

    probs = torch.cat([_rows(batch, to_other_cat), _rows(batch, uniform)], 1)
    res = _reduce(batch, [probs])
    assert res.n_match_queries == 2
    assert res.word_match[0].tolist() == pytest.approx([0.8 * 9, 1.0], rel=1e-5)


def _sweep(task, harmful):
    """A disable sweep whose most harmful heads (most negative Δ) are ``harmful`` (flat indices, 2 x 4 heads)."""
    delta = np.zeros((1, 2, 4))
    for k, i in enumerate(harmful):
        delta.reshape(1, -1)[0, i] = -5.0 + k
    return SimpleNamespace(result=SimpleNamespace(task=task, head_delta=delta, n_heads=4, n_layers=2))


def test_shared_heads_word_match_metric():
    pr = _result([0.2] * 5, task="sts-b")
    wm = np.ones((2, 4))
    wm[1, 2] = 6.0  # the shared head attends to matching words (6x uniform)
    wm[0, 0] = 3.0
    pr.result.pretrained.glue.word_match, pr.result.pretrained.glue.n_match_queries = wm, 50
    sweeps = [_sweep("sts-b", [6, 0, 1]), _sweep("rte", [6, 3, 4])]  # shared: flat 6 = head 2-3
    m = P.shared_heads_word_match(pr, sweeps, top=3)
    # bar = max(75th percentile (1.5), 2x uniform) = 2 -> 6 / 2
    assert m.value == pytest.approx(3.0) and m.head == "2-3" and m.n == 50
    # a near-uniform model (every head ~1x uniform, e.g. random weights): the shared head is below the 2x bar
    pr.result.pretrained.glue.word_match = np.full((2, 4), 1.0) + np.arange(8).reshape(2, 4) * 0.01
    assert P.shared_heads_word_match(pr, sweeps, top=3).value < 1
    # no head shared by the two sweeps: 0
    assert P.shared_heads_word_match(pr, [_sweep("sts-b", [0, 1, 2]), _sweep("rte", [5, 6, 7])], top=3).value == 0
