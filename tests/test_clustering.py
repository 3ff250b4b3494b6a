"""Clark §6 head clustering (JS distances, permutation test, behaviour silhouette) and the §3/§4/§6 figures, on
planted attention maps and distance matrices with known answers, and the tiny model."""
import math

import numpy as np
import pytest
import torch

from bertattn_bench.engine.attention import run_reducers
from bertattn_bench.engine.batching import Skipped, encode_pair, iter_batches, make_batch
from bertattn_bench.engine.model import ModelInfo
from bertattn_bench.engine.passes import PassResult
from bertattn_bench.families import clustering as C
from bertattn_bench.families.dependency import DependencyResult, OffsetBaseline
from bertattn_bench.families.surface import FIELDS, SurfaceResult

LN2 = math.log(2.0)


def js_naive(p: np.ndarray, q: np.ndarray) -> float:
    """JS divergence in nats, the textbook way."""
    m = (p + q) / 2

    def kl(a, b):
        nz = a > 0
        return float((a[nz] * np.log(a[nz] / b[nz])).sum())

    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


# ---- the kernel ---------------------------------------------------------------------------------------------

def test_js_pair_sums_matches_textbook_with_zero_keys():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(5, 7, 9, generator=g) * 2, -1)
    p[..., -2:] = 0  # padded keys: probability 0
    p = p / p.sum(-1, keepdim=True)
    got = C.js_pair_sums(p, chunk_elements=20).numpy()  # tiny chunks: the chunking path is exercised
    want = np.zeros((5, 5))
    for i in range(5):
        for j in range(5):
            want[i, j] = sum(js_naive(p[i, r].double().numpy(), p[j, r].double().numpy()) for r in range(7))
    np.testing.assert_allclose(got, want, atol=2e-5)
    assert np.allclose(got, got.T) and np.all(np.diag(got) == 0)


def test_js_known_values():
    """Identical heads: 0; one-hot on different keys: ln 2 per row; one-hot vs uniform over n: closed form."""
    n = 4
    onehot_a = torch.zeros(3, n); onehot_a[:, 0] = 1
    onehot_b = torch.zeros(3, n); onehot_b[:, 1] = 1
    uniform = torch.full((3, n), 1 / n)
    got = C.js_pair_sums(torch.stack([onehot_a, onehot_a.clone(), onehot_b, uniform]))
    assert float(got[0, 1]) == pytest.approx(0.0, abs=1e-6)
    assert float(got[0, 2]) == pytest.approx(3 * LN2, rel=1e-5)
    hi, lo = 0.5 + 0.5 / n, 0.5 / n
    mixture = -(hi * math.log(hi) + (n - 1) * lo * math.log(lo))
    assert float(got[0, 3]) == pytest.approx(3 * (mixture - 0.5 * math.log(n)), rel=1e-5)


# ---- the reducer on planted maps ------------------------------------------------------------------------------

@pytest.fixture
def pair_batch(tokenizer):
    enc = [encode_pair(tokenizer, 0, "the cat sat on the mat .", "it was , happy"),
           encode_pair(tokenizer, 1, "short", "pair")]
    return make_batch(enc, tokenizer, "cpu", with_words=False)


def _planted_layers(batch):
    """2 layers x 2 heads. L1: previous token, next token; L2: previous token again, uniform over real keys.
    Padded query rows point at a padded key (garbage that must never count)."""
    b, t = batch.input_ids.shape
    lengths = batch.token_mask.sum(-1).tolist()
    prev, nxt, uni = (torch.zeros(b, t, t) for _ in range(3))
    for i, n in enumerate(lengths):
        for q in range(t):
            if q >= n:
                for m in (prev, nxt, uni):
                    m[i, q, t - 1] = 1.0
                continue
            prev[i, q, max(q - 1, 0)] = 1.0
            nxt[i, q, min(q + 1, n - 1)] = 1.0
            uni[i, q, :n] = 1.0 / n
    return [torch.stack([prev, nxt], 1), torch.stack([prev.clone(), uni], 1)], lengths


def _expected(layers, lengths):
    heads = [(0, 0), (0, 1), (1, 0), (1, 1)]
    d = np.zeros((4, 4))
    rows = 0
    for b, n in enumerate(lengths):
        rows += n
        for q in range(n):
            for i, (li, hi) in enumerate(heads):
                for j, (lj, hj) in enumerate(heads):
                    d[i, j] += js_naive(layers[li][b, hi, q, :n].double().numpy(), layers[lj][b, hj, q, :n].double().numpy())
    return d / rows


def test_reducer_planted_maps_padding_never_counts(pair_batch):
    layers, lengths = _planted_layers(pair_batch)
    assert lengths[0] != lengths[1]
    red = C.ClusteringReducer(2, 2, "cpu", query_fraction=None)
    red.start_batch(pair_batch)
    for layer, probs in enumerate(layers):
        red.update(layer, probs)
    res = red.finalize()
    assert res.n_tokens == sum(lengths) and res.n_segments == 2
    np.testing.assert_allclose(res.distance, _expected(layers, lengths), atol=1e-5)
    assert res.distance[0, 2] == pytest.approx(0.0, abs=1e-6)  # the same previous-token head in both layers
    # previous vs next point at different keys from every real token (also the clamped first and last): ln 2
    assert res.distance[0, 1] == pytest.approx(LN2, rel=1e-5)
    assert res.head_names() == ["1-1", "1-2", "2-1", "2-2"]
    assert res.layers().tolist() == [0, 0, 1, 1]
    # §3 statistics from the same pass; Clark's denominator n: the first token has no previous token
    assert float(res.surface.stats["prev"][0, 0]) == pytest.approx(sum((n - 1) / n for n in lengths) / 2)


def test_query_sample_is_seeded_per_segment():
    a = C.sample_queries(100, 7, 0.25)
    assert np.array_equal(a, C.sample_queries(100, 7, 0.25))
    assert not np.array_equal(a, C.sample_queries(100, 8, 0.25))
    assert 10 < len(a) < 45 and np.all(np.diff(a) > 0) and a.max() < 100
    assert np.array_equal(C.sample_queries(5, 0, None), np.arange(5))


def test_tiny_model_batched_equals_one_by_one(tiny, tokenizer):
    """The sample and the JS sums do not depend on the batching (padding never enters)."""
    texts = [("The cat sat on the mat.", "It was happy, very happy."), ("Short.", "Pair."),
             ("A much longer first paragraph with several words in it again.", "And a second one.")]
    enc = [encode_pair(tokenizer, i, a, b) for i, (a, b) in enumerate(texts)]
    out = []
    for bs in (3, 1):
        red = C.ClusteringReducer(2, 4, "cpu", query_fraction=0.5)
        (res,) = run_reducers(tiny.model, iter_batches(enc, tokenizer, "cpu", bs), [red])
        out.append(res)
    assert out[0].n_tokens == out[1].n_tokens > 0
    np.testing.assert_allclose(out[0].distance, out[1].distance, atol=1e-6)
    d = out[0].distance
    assert d.shape == (8, 8) and np.allclose(d, d.T) and np.all(np.diag(d) == 0)
    # issue 61: the per-batch sums the jackknife resamples add back up to the pooled distances
    one = out[1]
    assert one.batch_segments.tolist() == [1, 1, 1] and one.batch_tokens.sum() == one.n_tokens
    np.testing.assert_allclose(one.batch_js.sum(0) / one.batch_tokens.sum(), one.distance, atol=1e-9)
    assert np.all(d >= 0) and np.all(d <= LN2 + 1e-6)


# ---- permutation test, labels, silhouette --------------------------------------------------------------------

def _block_distance(layers, within=0.1, between=0.5, noise=0.0, seed=0):
    same = layers[:, None] == layers[None, :]
    d = np.where(same, within, between) + noise * np.random.default_rng(seed).random((len(layers),) * 2)
    d = (d + d.T) / 2
    np.fill_diagonal(d, 0)
    return d


def test_permutation_test_known_answers():
    layers = np.repeat(np.arange(4), 5)
    ratio, p, null = C.layer_permutation_test(_block_distance(layers), layers, 1000, 0)
    assert ratio == pytest.approx(0.2) and p == pytest.approx(1 / 1001) and len(null) == 1000
    ratio, p, _ = C.layer_permutation_test(_block_distance(layers, within=0.5, between=0.1), layers, 1000, 0)
    assert ratio > 1 and p == pytest.approx(1.0)  # the comparison can fail
    noise = _block_distance(layers, 0.3, 0.3, noise=0.2, seed=1)  # no layer structure (seed 0: a 1-in-500 draw)
    _, p, _ = C.layer_permutation_test(noise, layers, 1000, 0)
    assert p > 0.05
    assert C.layer_permutation_test(noise, layers, 1000, 0)[1] == p  # seeded


def _stats(n_layers, n_heads, **planted):
    """Per-head §3 statistics, all 0.05 with entropy 1.0, and planted values {stat: {(l, h): value}}."""
    stats = {f: torch.full((n_layers, n_heads), 0.05) for f in FIELDS}
    stats["entropy"] = torch.ones(n_layers, n_heads)
    for stat, heads in planted.items():
        for (l, h), v in heads.items():
            stats[stat][l, h] = v
    return stats


def test_behavior_labels():
    """> 0.5 on a target wins; else the top quartile of heads by entropy (here the 2 of 8 highest) is broad."""
    stats = _stats(2, 4, to_cls={(0, 0): 0.8}, to_sep={(0, 1): 0.6, (0, 0): 0.1}, next={(1, 0): 0.55},
                   prev={(1, 1): 0.5})  # exactly 0.5 is not > 0.5
    stats["entropy"] = torch.tensor([[5.0, 1.0, 2.0, 1.5], [4.0, 1.2, 3.0, 0.5]])
    labels = C.behavior_labels(stats)
    # 5.0 and 4.0 are the top quartile (2 of 8) but belong to labelled heads: the behaviour wins, none is broad
    assert labels == ["[CLS]", "[SEP]", "other", "other", "next", "other", "other", "other"]
    assert C.behavior_labels(stats, broad_quantile=0.5).count("broad") == 2


def _clustering_result(labels_stats, distance, n_layers, n_heads):
    surface = SurfaceResult(stats=labels_stats, n_segments=10, n_tokens=500, sep_chance=0.04)
    return C.ClusteringResult(distance, n_layers, n_heads, 10, 400, surface)


def _info(n_layers, n_heads):
    return ModelInfo(name="fake-model", slug="fake-model", n_layers=n_layers, n_heads=n_heads, max_positions=512,
                     has_mlm_head=False, attn_implementation="bertattn_eager", device="cpu", cls_token_id=101,
                     sep_token_id=102, pad_token_id=0)


def _pass(family, result, n_layers, n_heads, corpus="fake_corpus"):
    return PassResult(family, corpus, "fake data", _info(n_layers, n_heads), result, 10, Skipped())


def test_behavior_silhouette_metric_clusters_and_no_behaviours():
    # 3 layers x 4 heads; [CLS] heads 1-1, 2-1, 3-1, broad heads 1-4, 2-4, 3-4 (by entropy quartile), rest other
    n_layers, n_heads = 3, 4
    stats = _stats(n_layers, n_heads, to_cls={(l, 0): 0.9 for l in range(3)}, entropy={(l, 3): 4.0 for l in range(3)})
    labels = C.behavior_labels(stats)
    assert labels.count("[CLS]") == 3 and labels.count("broad") == 3
    group = np.array([{"[CLS]": 0, "broad": 1}.get(g, 2) for g in labels])
    d = _block_distance(group, within=0.05, between=0.6)
    m = C.behavior_silhouette_metric(_pass("clustering", _clustering_result(stats, d, n_layers, n_heads),
                                           n_layers, n_heads))
    assert m.value > 0.8 and m.n == 400 and m.n_unit == "query tokens"
    # one behaviour only (broad) → 0, "no clusters to find"
    flat = _stats(n_layers, n_heads, entropy={(l, 3): 4.0 for l in range(3)})
    m = C.behavior_silhouette_metric(_pass("clustering", _clustering_result(flat, d, n_layers, n_heads),
                                           n_layers, n_heads))
    assert m.value == 0.0 and "no clusters" in m.detail
    # labels that do not match the distances: silhouette <= 0.1
    shuffled = _block_distance(np.array([0, 1, 2, 0] * 3), within=0.05, between=0.6)
    m = C.behavior_silhouette_metric(_pass("clustering", _clustering_result(stats, shuffled, n_layers, n_heads),
                                           n_layers, n_heads))
    assert m.value < 0.1


def test_layer_permutation_metric():
    n_layers, n_heads = 3, 4
    layers = np.repeat(np.arange(n_layers), n_heads)
    res = _clustering_result(_stats(n_layers, n_heads), _block_distance(layers, 0.1, 0.3), n_layers, n_heads)
    m = C.js_layer_permutation_p(_pass("clustering", res, n_layers, n_heads))
    assert m.value == pytest.approx(1 / 1001) and "ratio 0.333" in m.detail
    # its Monte Carlo bounds: Wilson on 1 of 1001 (by hand: centre 0.0029067, half 0.0027304)
    assert m.bounds == pytest.approx((0.0001764, 0.0056371), abs=2e-7)


def test_the_silhouette_s_jackknife_over_batches():
    """Batches that all give the same distances: the jackknife SE is exactly 0; one batch whose distances blur the
    behaviours: a positive SE (and the value is the pooled one's)."""
    n_layers, n_heads = 3, 4
    stats = _stats(n_layers, n_heads, to_cls={(l, 0): 0.9 for l in range(3)}, entropy={(l, 3): 4.0 for l in range(3)})
    group = np.array([{"[CLS]": 0, "broad": 1}.get(g, 2) for g in C.behavior_labels(stats)])
    d = _block_distance(group, within=0.05, between=0.6)
    per_segment = {k: v[None].repeat(4, 1, 1) for k, v in stats.items()}  # 4 batches of one segment each
    surface = SurfaceResult(stats=stats, n_segments=4, n_tokens=400, sep_chance=0.04, per_segment=per_segment,
                            sep_chance_per_segment=torch.full((4,), 0.04))

    def result(batches):
        js = np.stack(batches) * 100  # 100 query tokens per batch
        return C.ClusteringResult(js.sum(0) / 400, n_layers, n_heads, 4, 400, surface, batch_js=js,
                                  batch_tokens=np.full(4, 100), batch_segments=np.ones(4, int))

    same = C.behavior_silhouette_metric(_pass("clustering", result([d] * 4), n_layers, n_heads))
    assert same.standard_error == pytest.approx(0.0, abs=1e-12) and "jackknife over the 4 batches" in same.detail
    blurred = _block_distance(group, within=0.3, between=0.35)
    mixed = C.behavior_silhouette_metric(_pass("clustering", result([d, d, d, blurred]), n_layers, n_heads))
    assert mixed.standard_error > 0.01


def test_mds_is_seeded():
    d = _block_distance(np.repeat(np.arange(3), 3), 0.1, 0.5, noise=0.05)
    a, b = C.mds_embedding(d, 0), C.mds_embedding(d, 0)
    assert a.shape == (9, 2) and np.allclose(a, b)


# ---- figures ------------------------------------------------------------------------------------------------

def _surface_result(n_layers=3, n_heads=4):
    g = torch.Generator().manual_seed(0)
    stats = {f: torch.rand(n_layers, n_heads, generator=g) * 0.5 for f in FIELDS}
    stats["entropy"] = torch.rand(n_layers, n_heads, generator=g) * 4
    return SurfaceResult(stats=stats, n_segments=10, n_tokens=800, sep_chance=0.025)


def _dependency_result(n_layers=3, n_heads=4):
    relations = ("All", "det", "nsubj", "poss_s")
    n_arcs = torch.tensor([200, 40, 30, 0])
    g = torch.Generator().manual_seed(1)
    correct = torch.floor(torch.rand(n_layers, 2, len(relations), n_heads, generator=g) * n_arcs.view(1, 1, -1, 1))
    baselines = {"All": OffsetBaseline(30.0, 1, 200, 30.0), "det": OffsetBaseline(50.0, 1, 40, 50.0),
                 "nsubj": OffsetBaseline(40.0, 1, 30, 20.0)}
    return DependencyResult(relations, correct.double(), n_arcs, baselines, n_sentences=12, n_words=300, n_split_words=20)


def _assert_pngs(paths, n):
    assert len(paths) == n
    for p in paths:
        assert p.suffix == ".png" and p.stat().st_size > 1000
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_figure_writers_registered_and_write_pngs(tmp_path):
    from bertattn_bench.claims.registry import FIGURES, load_all_metrics

    load_all_metrics()
    assert {"surface", "dependency", "clustering"} <= set(FIGURES)
    surface = [_pass("surface", _surface_result(), 3, 4, corpus)
               for corpus in ("wikitext2", "gum_paragraphs")]
    paths = FIGURES["surface"](surface + [_pass("surface", object(), 3, 4)], tmp_path)
    _assert_pngs(paths, 4)  # 2 figures x 2 corpora; a foreign result is ignored
    assert {p.name for p in paths} >= {"surface-special-fake-model-wikitext2.png",
                                        "surface-entropy-fake-model-gum_paragraphs.png"}
    paths = FIGURES["dependency"]([_pass("dependency", _dependency_result(), 3, 4, "ewt_dev")], tmp_path)
    _assert_pngs(paths, 2)
    assert {p.name for p in paths} == {"dependency-best-heads-fake-model-ewt_dev.png",
                                       "dependency-layers-fake-model-ewt_dev.png"}
    n_layers, n_heads = 3, 4
    stats = _stats(n_layers, n_heads, to_cls={(l, 0): 0.9 for l in range(3)}, entropy={(l, 3): 4.0 for l in range(3)})
    d = _block_distance(np.repeat(np.arange(n_layers), n_heads), 0.1, 0.4, noise=0.05)
    paths = FIGURES["clustering"]([_pass("clustering", _clustering_result(stats, d, n_layers, n_heads),
                                         n_layers, n_heads, "wikitext2")], tmp_path)
    _assert_pngs(paths, 1)
    assert paths[0].name == "clustering-mds-fake-model-wikitext2.png"
