"""Clark §3 statistics on planted attention maps with known answers (no model)."""
import math
from types import SimpleNamespace

import pytest
import torch

from bertattn_bench.engine.batching import encode_pair, make_batch
from bertattn_bench.families import surface
from bertattn_bench.families.surface import SurfaceReducer, SurfaceResult
from tests.conftest import planted


@pytest.fixture
def pair_batch(tokenizer):
    enc = [encode_pair(tokenizer, 0, "the cat sat .", "it was , happy"),
           encode_pair(tokenizer, 1, "short", "pair")]
    return make_batch(enc, tokenizer, "cpu", with_words=False)


def _reduce(batch, layers):
    n_layers, n_heads = len(layers), layers[0].shape[1]
    red = SurfaceReducer(n_layers, n_heads, "cpu")
    red.start_batch(batch)
    for layer, probs in enumerate(layers):
        red.update(layer, probs)
    return red.finalize()


def _uniform(batch, heads=2):
    mask = batch.token_mask.float()
    probs = (mask / mask.sum(-1, keepdim=True))[:, None, None, :]
    return probs.expand(-1, heads, batch.input_ids.shape[1], -1).contiguous()


def test_previous_token_head(pair_batch):
    """Clark's denominator is n, every query (General_Analysis.ipynb: denom = n_tokens), so a perfect
    previous-token head scores (n - 1) / n per segment: its first token has no previous token."""
    t = pair_batch.input_ids.shape[1]
    lengths = pair_batch.token_mask.sum(-1).tolist()
    res = _reduce(pair_batch, [planted(2, 2, t, lambda q: max(q - 1, 0))])
    expected = sum((n - 1) / n for n in lengths) / 2
    assert lengths == [11, 5] and expected == pytest.approx((10 / 11 + 4 / 5) / 2)  # by hand
    assert float(res.stats["prev"][0, 0]) == pytest.approx(expected)
    assert float(res.stats["next"][0, 0]) == pytest.approx(0.0)


def test_next_token_head_denominator_and_padding(pair_batch):
    """A perfect next-token head: (n - 1) / n per segment. In the padded short segment the last real query points
    at a padding key (a planted map; a real model gives padding 0): it must count as 0, not as 'next'."""
    t = pair_batch.input_ids.shape[1]
    lengths = pair_batch.token_mask.sum(-1).tolist()
    res = _reduce(pair_batch, [planted(2, 2, t, lambda q: min(q + 1, t - 1))])
    assert float(res.stats["next"][0, 0]) == pytest.approx(sum((n - 1) / n for n in lengths) / 2)
    assert float(res.stats["prev"][0, 0]) == pytest.approx(0.0)
    assert float(res.stats["entropy"][0, 0]) == pytest.approx(0.0, abs=1e-6)
    assert float(res.stats["max_weight"][0, 0]) == pytest.approx(1.0)


def test_uniform_attention_known_values(pair_batch):
    """Uniform over real tokens: entropy ln L per segment, [SEP] share 2/L, no padding leaks in."""
    res = _reduce(pair_batch, [_uniform(pair_batch)])
    lengths = pair_batch.token_mask.sum(-1).tolist()
    assert lengths[0] != lengths[1]  # padding is present in the short segment
    assert float(res.stats["entropy"][0, 0]) == pytest.approx(sum(math.log(n) for n in lengths) / 2, rel=1e-5)
    assert float(res.stats["to_sep"][0, 1]) == pytest.approx(sum(2 / n for n in lengths) / 2, rel=1e-5)
    assert float(res.stats["to_cls"][0, 1]) == pytest.approx(sum(1 / n for n in lengths) / 2, rel=1e-5)
    assert res.sep_chance == pytest.approx(sum(2 / n for n in lengths) / 2)
    assert float(res.stats["cls_entropy"][0, 0]) == pytest.approx(float(res.stats["entropy"][0, 0]), rel=1e-5)


def test_sep_queries_to_sep(pair_batch, tokenizer):
    """[SEP] queries attend to the first [SEP]; others attend to [CLS]: sep_to_sep = 1, other_to_sep = 0."""
    t = pair_batch.input_ids.shape[1]
    probs = torch.zeros(2, 1, t, t)
    for b in range(2):
        seps = pair_batch.is_sep[b].nonzero().flatten().tolist()
        for q in range(t):
            probs[b, 0, q, seps[0] if q in seps else 0] = 1.0
    res = _reduce(pair_batch, [probs])
    assert float(res.stats["sep_to_sep"][0, 0]) == pytest.approx(1.0)
    assert float(res.stats["other_to_sep"][0, 0]) == pytest.approx(0.0)
    punct = tokenizer.convert_tokens_to_ids([".", ","])
    assert pair_batch.is_punct[0].sum() == 2 and set(pair_batch.input_ids[0][pair_batch.is_punct[0]].tolist()) == set(punct)


def _result(**stats):
    return SimpleNamespace(result=SurfaceResult(stats={k: torch.tensor(v) for k, v in stats.items()}, n_segments=10,
                                                n_tokens=100, sep_chance=0.02))


def test_claim_metrics_on_known_results():
    # 3 layers x 2 heads
    pr = _result(prev=[[0.9, 0.1], [0.2, 0.6], [0.0, 0.1]], next=[[0, 0], [0, 0], [0.7, 0]],
                 to_sep=[[0.1, 0.1], [0.8, 0.6], [0.2, 0.2]], entropy=[[3.0, 2.9], [1.0, 1.0], [2.0, 0.5]],
                 max_weight=[[0.05, 0.07], [0.5, 0.5], [0.2, 0.9]])
    m = surface.count_heads_above(pr, stat="prev", threshold=0.5)
    assert m.value == 2 and "1-1" in m.detail and "2-2" in m.detail and m.n == 10
    assert surface.peak_layer_depth(pr, stat="to_sep").value == pytest.approx(2 / 3)
    assert surface.peak_layer_value(pr, stat="to_sep").value == pytest.approx(0.7)
    assert surface.sep_peak_over_chance(pr).value == pytest.approx(35.0)
    assert surface.offset_heads_in_band(pr, threshold=0.5, band="first_half").value == pytest.approx(1 / 3)
    assert surface.top_heads_in_band(pr, stat="entropy", k=2, band="early").value == 1.0
    assert surface.median_of_top_heads(pr, stat="max_weight", by="entropy", k=3).value == pytest.approx(0.07)
    assert surface.fraction_heads_above(pr, stat="to_sep", threshold=0.5).value == pytest.approx(2 / 6)


def test_sep_chance_counts_the_separators_of_the_input(tiny, tokenizer):
    """Chance for [SEP] is n_sep / L from the input: 2/L for [CLS] A [SEP] B [SEP], 3/L with a RoBERTa-style
    doubled separator (never a hard-coded 2/L)."""
    from bertattn_bench.engine.attention import run_reducers
    from bertattn_bench.engine.batching import Encoded, iter_batches
    from bertattn_bench.families.surface import SurfaceReducer

    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    word = tokenizer.convert_tokens_to_ids("cat")
    two = Encoded(0, [cls, word, word, sep, word, sep], [0] * 6, [-1] * 6, 0)
    three = Encoded(1, [cls, word, word, sep, sep, word, sep, word], [0] * 8, [-1] * 8, 0)
    for ex, want in ((two, 2 / 6), (three, 3 / 8)):
        red = SurfaceReducer(tiny.info.n_layers, tiny.info.n_heads, "cpu")
        (res,) = run_reducers(tiny.model, iter_batches([ex], tokenizer, "cpu", 1), [red])
        assert res.sep_chance == pytest.approx(want)


def test_per_segment_statistics_and_the_bootstrap(pair_batch):
    """The pass keeps every statistic per segment (its mean is ``stats``); a claim's standard error is the sd of the
    metric over seeded resamples of the segments: 0 for a head far from its bar, > 0 for one that crosses it when
    the segments are redrawn; an SE of 0 never makes a claim inconclusive."""
    from bertattn_bench.claims.registry import METRICS, load_all_metrics

    res = _reduce(pair_batch, [_uniform(pair_batch), _uniform(pair_batch)])
    assert res.per_segment["entropy"].shape == (2, 2, 2)
    for k, v in res.stats.items():
        torch.testing.assert_close(res.per_segment[k].mean(0), v.float(), rtol=1e-6, atol=1e-6)
    both = res.resample(torch.tensor([1, 1]))
    torch.testing.assert_close(both.stats["to_sep"], res.per_segment["to_sep"][1])
    assert both.sep_chance == pytest.approx(float(res.sep_chance_per_segment[1]))
    load_all_metrics()
    n = 40  # 1 layer, 2 heads: head 1 at 0.9 in every segment, head 2 at 0.6 / 0.42 alternately (mean 0.51)
    seg = torch.zeros(n, 1, 2)
    seg[:, 0, 0] = 0.9
    seg[:, 0, 1] = torch.tensor([0.6, 0.42] * (n // 2))
    per = {k: seg.clone() for k in res.per_segment}
    surf = SurfaceResult(stats={k: v.mean(0) for k, v in per.items()}, n_segments=n, n_tokens=400, sep_chance=0.1,
                         per_segment=per, sep_chance_per_segment=torch.full((n,), 0.1))
    m = METRICS["fraction_heads_above"](SimpleNamespace(result=surf), stat="to_special", threshold=0.5)
    assert m.value == 1.0 and 0.2 < m.standard_error < 0.5 and "bootstrap over the 40 segments" in m.detail
    far = METRICS["fraction_heads_above"](SimpleNamespace(result=surf), stat="to_special", threshold=0.3)
    assert far.value == 1.0 and far.standard_error == 0.0
