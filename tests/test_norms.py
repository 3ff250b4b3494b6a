"""The norms family (Kobayashi et al. 2020/2021) on known answers: the identity sum_h sum_j alpha f + b_O = the
attention block's output on every accepted tiny encoder (others refused in one line), a hand-computed 1-layer,
2-head case, the authors' own dense formulas on a tiny BERT, a planted model whose [SEP] value vectors are zero,
the 12% masking and the frequency table's reader."""
import math
import warnings

import architecture_matrix as A
import numpy as np
import pytest
import torch

from bertattn_bench.engine import attention_norms as N

# refused by the norms family with the reason (the value vectors or the output projection are not modules' tensors)
NORMS_REFUSED = {"ModernBERT", "ModernBERT, local window of 5 tokens", "DeBERTa", "ConvBERT", "I-BERT", "XLNet"}
LOAD_REFUSED = {"ALBERT, inner_group_num 2", "Nystromformer", "BigBird, block-sparse", "Longformer", "FNet",
                "SqueezeBERT", "Funnel", "CANINE", "MRA", "YOSO", "LiLT", "BROS"}
PRE_LN = {"XLM-R XL", "RoBERTa-PreLayerNorm", "MobileBERT", "EuroBERT", "UltraBERT", "MegatronBERT"}  # no residual ratios


def _batch(tokenizer, loaded):
    from bertattn_bench.engine.batching import model_inputs

    enc = tokenizer(["the cat sat on the mat .", "dogs bark"], ["a cat , a mat", "loudly"], padding=True,
                    return_tensors="pt")
    return model_inputs(loaded.model, enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids")), \
        enc["attention_mask"].bool()


@pytest.mark.parametrize("arch", [a for a in A.MATRIX if a.label not in LOAD_REFUSED], ids=lambda a: a.label)
def test_identity_on_every_accepted_encoder_or_one_line_refusal(arch, tokenizer):
    """sum_h sum_j alpha_ij f^h(x_j) + b_O equals the output projection's own output (the attention block's output
    before the residual) to 1e-5 on the real tokens of a padded pair batch; on a post-LN block the LayerNorm's input
    is that plus the layer input."""
    from bertattn_bench.engine.attention import attention_run

    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    loaded = A.build(arch, tokenizer)
    model = loaded.model
    if arch.label in NORMS_REFUSED:
        with pytest.raises(N.NormsRefused) as exc:
            N.norm_site(model)
        msg = str(exc.value)
        assert "\n" not in msg and arch.model_type in msg and "refused by the norms family" in msg
        assert N.REFUSED_WHY[arch.model_type] in msg
        return
    ns = N.norm_site(model)
    assert ns.residual == (arch.label not in PRE_LN), ns.no_residual_reason
    inputs, real = _batch(tokenizer, loaded)
    mine, theirs, ln_in = [], [], []
    hooks = [m.register_forward_hook(lambda mod, a, o: theirs.append(o.detach().clone()))
             for m in dict.fromkeys(nl.output for nl in ns.layers)]
    if ns.residual:
        hooks += [m.register_forward_pre_hook(lambda mod, a: ln_in.append(a[0].detach().clone()))
                  for m in dict.fromkeys(nl.layer_norm for nl in ns.layers)]
    try:
        with N.norm_reading(model) as reader:
            def observe(layer, p):
                nl = ns.layers[layer]
                got = reader.layer(layer, p)
                x = reader.pending[id(nl.value)][0]
                b_o = nl.output.bias.float() if nl.output.bias is not None else 0.0
                mine.append((got.total + b_o, x))

            with torch.no_grad(), attention_run(model, observe=observe):
                model(**inputs)
    finally:
        for h in hooks:
            h.remove()
    assert len(mine) == len(theirs) == loaded.info.n_layers
    for (total, x), out in zip(mine, theirs):
        assert torch.allclose(total[real], out.float()[real], atol=1e-5), (total[real] - out[real]).abs().max()
    if ns.residual:
        for (total, x), s in zip(mine, ln_in):
            assert torch.allclose((total + x.float())[real], s.float()[real], atol=1e-5)


def test_hand_computed_one_layer_two_heads():
    """B=1, 2 tokens, 2 heads of dimension 1, hidden 2: every quantity by hand."""
    values = torch.tensor([[[1.0, 2.0], [3.0, 0.0]]])  # token 0: head 0 -> 1, head 1 -> 2; token 1: 3, 0
    w_out = torch.tensor([[1.0, 0.0], [0.0, 2.0]])  # head 0's slice [1, 0], head 1's [0, 2]
    probs = torch.tensor([[[[0.5, 0.5], [0.25, 0.75]], [[1.0, 0.0], [0.5, 0.5]]]])
    x = torch.tensor([[[1.0, 1.0], [0.0, 1.0]]])
    ln = torch.nn.LayerNorm(2, eps=0.0)
    got = N.layer_norms(probs, values, w_out, x=x, b_out=torch.zeros(2), layer_norm=ln)
    # f^0(x0) = [1, 0], f^1(x0) = [0, 4], f^0(x1) = [3, 0], f^1(x1) = 0
    assert torch.allclose(got.fx, torch.tensor([[[1.0, 3.0], [4.0, 0.0]]]))
    assert torch.allclose(got.head, torch.tensor([[[[0.5, 1.5], [0.25, 2.25]], [[4.0, 0.0], [2.0, 0.0]]]]))
    # layer level: (0,0) 0.5[1,0] + [0,4]; (0,1) 0.5[3,0]; (1,0) 0.25[1,0] + 0.5[0,4]; (1,1) 0.75[3,0]
    expect = torch.tensor([[[math.sqrt(0.25 + 16), 1.5], [math.sqrt(0.0625 + 4), 2.25]]])
    assert torch.allclose(got.summed, expect)
    assert torch.allclose(got.total, torch.tensor([[[2.0, 4.0], [2.5, 2.0]]]))
    r = {k: v[0].tolist() for k, v in got.ratios.items()}
    assert r["attn_w"] == pytest.approx([1 - 0.75, 1 - 0.625])
    assert r["attnres_w"] == pytest.approx([0.125, 0.1875])
    mix0, own0 = 1.5, math.sqrt(16.25)  # query 0: mix [1.5, 0], own [0.5, 4]
    mix1, own1 = math.sqrt(0.0625 + 4), 2.25  # query 1: mix [0.25, 2], own [2.25, 0]
    assert r["attn_n"] == pytest.approx([mix0 / (mix0 + own0), mix1 / (mix1 + own1)])
    assert r["attnres_n"][0] == pytest.approx(mix0 / (mix0 + math.sqrt(1.5 ** 2 + 5 ** 2)))  # own + x = [1.5, 5]
    # query 0's pre-LN vector [3, 5]: sd 1, so mix -> [0.75, -0.75], own + x -> [-1.75, 1.75]: 0.75 / 2.5
    assert r["attnresln_n"][0] == pytest.approx(0.3)


def _authors(probs, values, w_out, x, ln, pre):
    """The authors' BertNormOutput (5dc8fb3 emnlp2021 modeling_bert.py l.299-388), dense, for one batch."""
    b, h, s, _ = probs.shape
    value_layer = values.view(b, s, h, -1).transpose(1, 2)
    dense = w_out.view(w_out.shape[0], h, -1)
    transformed = torch.einsum("bhsv,dhv->bhsd", value_layer, dense)
    weighted = torch.einsum("bhks,bhsd->bhksd", probs, transformed)
    summed = weighted.sum(1)
    residual = torch.einsum("sk,bsd->bskd", torch.eye(s), x)
    rw = summed + residual
    var = (pre - pre.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True).unsqueeze(2)
    post = torch.einsum("bskd,d->bskd", (rw - rw.mean(-1, keepdim=True)) / (var + ln.eps) ** 0.5, ln.weight)

    def ratio(t):
        keep = torch.diagonal(t, dim1=1, dim2=2).permute(0, 2, 1)
        mix = t.sum(2) - keep
        return mix.norm(dim=-1) / (mix.norm(dim=-1) + keep.norm(dim=-1))

    return weighted.norm(dim=-1), summed.norm(dim=-1), {"attn_n": ratio(summed), "attnres_n": ratio(rw),
                                                        "attnresln_n": ratio(post)}


def test_matches_the_authors_dense_formulas_on_a_tiny_bert(tiny, tokenizer):
    from bertattn_bench.engine.attention import attention_run

    model = tiny.model
    ns = N.norm_site(model)
    enc = tokenizer(["the cat sat on the mat ."], ["a dog barked ,"], return_tensors="pt")
    seen = []
    with N.norm_reading(model) as reader, torch.no_grad():
        def observe(layer, p):
            nl = ns.layers[layer]
            x, v = reader.pending[id(nl.value)]
            seen.append((reader.layer(layer, p), p.clone(), v.clone(), x.clone(), nl))

        with attention_run(model, observe=observe):
            model(**enc)
    for got, p, v, x, nl in seen:
        pre = got.total + nl.output.bias + x
        head, summed, ratios = _authors(p, v, nl.output.weight, x, nl.layer_norm, pre)
        assert torch.allclose(got.head, head, atol=1e-5)
        assert torch.allclose(got.summed, summed, atol=1e-5)
        for k, want in ratios.items():
            assert torch.allclose(got.ratios[k], want, atol=1e-5), k
        # the masked sweep's ratios alone: the same numbers, bit for bit
        total, alone = N.mixing_ratios(p, v, nl.output.weight, x, nl.output.bias, nl.layer_norm)
        assert torch.equal(total, got.total) and alone.keys() == got.ratios.keys()
        assert all(torch.equal(alone[k], got.ratios[k]) for k in alone)


def _segments(tokenizer, n=4):
    from bertattn_bench.engine.batching import Encoded

    out = []
    for i in range(n):
        a = tokenizer("the cat sat on the mat ." + " very" * i, "it was tired , so it slept .")
        out.append(Encoded(i, a["input_ids"], a["token_type_ids"], [0] * len(a["input_ids"]), 1))
    return out


def _plain_sweep(loaded, encoded):
    from bertattn_bench.engine.attention import run_reducers
    from bertattn_bench.engine.batching import iter_batches
    from bertattn_bench.families.norms import NormsReducer

    info, tok = loaded.info, loaded.tokenizer
    with N.norm_reading(loaded.model) as reader:
        (out,) = run_reducers(loaded.model, iter_batches(encoded, tok, torch.device("cpu"), 3),
                              [NormsReducer(reader, info.n_layers, info.n_heads, "cpu", tok.all_special_ids)])
    return out


def test_planted_zero_sep_values_give_sep_no_norm_share(tiny, tokenizer):
    """Zero [SEP]'s value vectors (x W_V + b_V = 0 there): alpha still gives [SEP] weight, the norm reading none."""
    model = tiny.model
    ns = N.norm_site(model)
    state = {}
    pre = model.register_forward_pre_hook(lambda m, a, kw: state.update(ids=kw["input_ids"]), with_kwargs=True)

    def zero_sep(mod, args, out):
        return out.masked_fill((state["ids"] == tokenizer.sep_token_id)[..., None], 0.0)

    hooks = [nl.value.register_forward_hook(zero_sep) for nl in ns.layers]
    try:
        res = _plain_sweep(tiny, _segments(tokenizer))
    finally:
        pre.remove()
        for h in hooks:
            h.remove()
    w, n, lay = (res["readings"][k].stats for k in ("weights", "norms", "layer"))
    assert bool((w["to_sep"] > 0.01).all())
    assert float(n["to_sep"].abs().max()) == 0.0 and float(lay["to_sep"].abs().max()) == 0.0
    assert float(n["sep_to_sep"].abs().max()) == 0.0 and float(res["afx"]["sep"].abs().max()) == 0.0
    assert float(res["fx"]["sep"].abs().max()) == 0.0 and float(res["fx"]["other"].min()) > 0
    # unplanted, [SEP] keeps a norm share
    again = _plain_sweep(tiny, _segments(tokenizer))
    assert float(again["readings"]["norms"].stats["to_sep"].min()) > 0.01


def test_reducer_shares_by_hand_on_the_weights_reading(tiny, tokenizer):
    """The weights reading equals Clark's to-[SEP] share computed directly from the model's attentions."""
    encoded = _segments(tokenizer, 1)
    res = _plain_sweep(tiny, encoded)
    ids = torch.tensor([encoded[0].input_ids])
    from bertattn_bench.engine.attention import attention_run

    maps = {}
    with torch.no_grad(), attention_run(tiny.model, observe=lambda l, p: maps.setdefault(l, p.clone())):
        tiny.model(input_ids=ids, token_type_ids=torch.tensor([encoded[0].token_type_ids]))
    sep = (ids[0] == tokenizer.sep_token_id).float()
    for layer, p in maps.items():
        want = (p[0] @ sep).mean(-1)  # (H,): mean over queries of the weight on [SEP]
        assert torch.allclose(res["readings"]["weights"].stats["to_sep"][layer], want, atol=1e-6)


def test_masking_takes_twelve_percent_of_the_non_special_pieces(tokenizer):
    from bertattn_bench.families.norms import mask_segments

    encoded = _segments(tokenizer, 3)
    masked, n = mask_segments(encoded, tokenizer.all_special_ids, tokenizer.mask_token_id)
    special = set(tokenizer.all_special_ids)
    want = sum(max(1, int(0.12 * sum(t not in special for t in e.input_ids))) for e in encoded)
    assert n == want
    for e, m in zip(encoded, masked):
        changed = [i for i, (a, b) in enumerate(zip(e.input_ids, m.input_ids)) if a != b]
        assert all(m.input_ids[i] == tokenizer.mask_token_id and e.input_ids[i] not in special for i in changed)
    again, _ = mask_segments(encoded, tokenizer.all_special_ids, tokenizer.mask_token_id)
    assert [m.input_ids for m in again] == [m.input_ids for m in masked]  # seeded


def test_rank_table_reader(tmp_path):
    from bertattn_bench.base.errors import DataError
    from bertattn_bench.families.norms import read_ranks

    path = tmp_path / "rank_count_ids.txt"
    path.write_text("1 100 5\n2 50 3\n", encoding="utf-8")
    ranks, last = read_ranks(path, 8)
    assert last == 2 and ranks.tolist() == [3, 3, 3, 2, 3, 1, 3, 3]
    path.write_text("1 100 5\n2 x 3\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"rank_count_ids.txt:2:"):
        read_ranks(path, 8)


def test_refused_model_measures_nothing_and_says_why(tokenizer, tmp_path):
    from bertattn_bench.claims.catalog import load_claims
    from bertattn_bench.claims.checks import measure
    from bertattn_bench.engine.passes import NothingToMeasure
    from bertattn_bench.families.norms import mixing_mean, prepare_norms

    arch = next(a for a in A.MATRIX if a.label == "ModernBERT")
    loaded = A.build(arch, tokenizer)
    prepared = prepare_norms(loaded, tmp_path)
    assert "fused" in prepared.nothing_to_measure()
    pr = prepared.run()
    assert isinstance(pr.result, NothingToMeasure)
    # no metric is called on it: the layer that calls metrics skips every claim with the refusal (issue 62)
    claims = load_claims(family="norms")
    assert claims and all("refused by the norms family" in measure(c, pr).outcome.skipped for c in claims)
    with pytest.raises(AttributeError):  # what a metric would do with it
        mixing_mean(pr, ratio="attn_w")


def test_every_paired_norm_reading_is_its_clark_claim_on_the_norms():
    """Both readings side by side: each kob.<x> with metric norm_reading is clark.<x> (same metric, parameters,
    comparison, threshold, learned) and names it in ``pairs``; every Clark §3.1-3.3 claim on the per-head statistics
    (position, special tokens, entropy) has its pair; the norms and surface families measure the same statistics."""
    from bertattn_bench.claims.catalog import claim_pairs, load_claims
    from bertattn_bench.families.norms import SHARE_FIELDS
    from bertattn_bench.families.surface import FIELDS

    claims = {c.id: c for c in load_claims()}
    pairs = [c for c in claims.values() if c.metric == "norm_reading"]
    for kob in pairs:
        clark = claims["clark." + kob.id.split(".", 1)[1]]
        assert kob.pairs == clark.id and claim_pairs()[kob.id] == clark.id
        params = dict(kob.params)
        assert params.pop("metric") == clark.metric and params == clark.params, kob.id
        assert (kob.comparison, kob.threshold, kob.learned) == (clark.comparison, clark.threshold, clark.learned)
        assert kob.family == "norms" and kob.paper == "Kobayashi et al. 2020"
    per_head = {c.id for c in claims.values() if c.family == "surface" and c.inputs == [] and c.metric not in (
        "frequency_rank", "example_heads_bert_base")}  # the data's word frequencies; bert-base's named heads
    assert per_head == {"clark." + k.id.split(".", 1)[1] for k in pairs}
    assert set(SHARE_FIELDS) == set(FIELDS)
    assert set(claim_pairs().values()) <= set(claims)


def test_a_pair_naming_no_claim_is_refused(tmp_path):
    import shutil

    from bertattn_bench.base.errors import BenchError
    from bertattn_bench.claims.catalog import REFERENCE_DIR, load_claims

    for p in REFERENCE_DIR.glob("*.toml"):
        shutil.copy(p, tmp_path / p.name)
    path = tmp_path / "kobayashi2020_norms.toml"
    path.write_text(path.read_text(encoding="utf-8").replace('pairs = "clark.relpos_prev_heads"',
                                                             'pairs = "clark.relpos_prev_headz"'), encoding="utf-8")
    with pytest.raises(BenchError, match=r"kob.relpos_prev_heads: pairs = 'clark.relpos_prev_headz' names no other"):
        load_claims(tmp_path)


def test_the_pass_on_a_toy_corpus_measures_every_claim_and_draws_both_figures(tiny, tokenizer, tmp_path):
    """The family end to end on a tiny BERT: the two sweeps, every claim's metric, the two figures."""
    import shutil
    from pathlib import Path

    from bertattn_bench.claims.catalog import load_claims
    from bertattn_bench.claims.registry import METRICS, NotApplicable
    from bertattn_bench.families.norms import NormsResult, norms_figures, prepare_norms

    data = A.toy_data_dir(tmp_path / "data")
    (data / "kobayashi_norms").mkdir()
    (data / "kobayashi_norms" / "rank_count_ids.txt").write_text("1 100 1996\n2 90 1012\n3 80 1010\n4 70 4937\n",
                                                                encoding="utf-8")
    pr = prepare_norms(tiny, data, max_tokens=60).run()
    res = pr.result
    assert isinstance(res, NormsResult) and res.n_segments == pr.n_examples > 0
    assert res.n_masked > 0 and set(res.mixing_mean) == set(N.RATIOS)
    assert len(res.tokens["fx"]) == len(res.token_ids) == res.n_tokens
    assert int(res.ranks.max()) == 5 and int(res.ranks[res.token_ids == 1996].min()) == 1  # unlisted: bottom rank
    measured = 0
    for claim in load_claims(family="norms"):
        try:
            METRICS[claim.metric](pr, **claim.params)
            measured += 1
        except NotApplicable:
            pass
    assert measured >= 18
    # issue 61: the per-segment sums add back up to the pooled values (every segment once: the whole sample), so the
    # bootstrap over segments resamples the very statistic the claim reads; and each judged value carries bounds
    from bertattn_bench.families.norms.run import CATEGORIES

    whole = res.resample(np.arange(res.n_segments))
    for c in CATEGORIES:
        assert torch.allclose(whole.fx[c], res.fx[c], rtol=1e-5, atol=1e-6), c
    finite = torch.isfinite(res.alpha_fx_r)
    assert torch.allclose(whole.alpha_fx_r[finite], res.alpha_fx_r[finite], atol=1e-5)
    assert whole.mixing_mean == pytest.approx(res.mixing_mean, rel=1e-9)
    # and a resample of one segment is the pass over that segment alone (a resample that ignored its indices, or
    # took another segment's sums, would still add back up on the whole sample): the corpus's first segment, found
    # in the result (which keeps segments in batch order) by its tokens
    alone = prepare_norms(tiny, data, limit=1, max_tokens=60).run().result
    j = [s for s in range(res.n_segments) if res.token_ids[res.token_segment == s].tolist() == alone.token_ids.tolist()]
    assert alone.n_segments == 1 and len(j) == 1 and res.n_segments > 1
    part = res.resample(np.array(j))
    for c in CATEGORIES:
        assert torch.allclose(part.fx[c], alone.fx[c], rtol=1e-4, atol=1e-6), c
    assert torch.allclose(part.alpha_fx_r.nan_to_num(), alone.alpha_fx_r.nan_to_num(), atol=1e-4)
    assert int(res.token_segment.max()) == res.n_segments - 1 and len(res.token_segment) == res.n_tokens
    assert res.token_segment.tolist() == sorted(res.token_segment.tolist())  # occurrences in segment order
    for name, params in (("mixing_mean", {"ratio": "attn_w"}), ("mixing_order", {}), ("fx_ratio", {}),
                         ("alpha_fx_correlation", {})):
        m = METRICS[name](pr, **params)
        assert m.bounds is not None and m.bounds[0] <= m.value <= m.bounds[1], name
    paths = norms_figures([pr], tmp_path / "figs")
    assert [Path(p).name.split("-")[1] for p in paths] == ["readings", "mixing"] and all(Path(p).stat().st_size for p in paths)
    shutil.rmtree(tmp_path / "figs")


def test_weights_reading_repeats_the_surface_familys_statistics(tiny, tokenizer):
    """Clark §3.1-3.3 on the weights reading (self, previous, next, entropy, max weight, [CLS] entropy and the
    special-token shares) are the surface family's own reducer on the same padded batches, exactly (one code since
    issue 47: each reading feeds a SurfaceReducer; the norm readings are checked against the authors' dense formulas
    below)."""
    from bertattn_bench.engine.attention import run_reducers
    from bertattn_bench.engine.batching import iter_batches
    from bertattn_bench.families.norms import SHARE_FIELDS
    from bertattn_bench.families.surface import SurfaceReducer

    encoded = _segments(tokenizer, 5)  # lengths differ: batches of 3 are padded
    res = _plain_sweep(tiny, encoded)
    info = tiny.info
    (surface,) = run_reducers(tiny.model, iter_batches(encoded, tokenizer, torch.device("cpu"), 3),
                              [SurfaceReducer(info.n_layers, info.n_heads, "cpu")])
    mine = res["readings"]["weights"]
    assert mine.n_layers == info.n_layers
    for k in SHARE_FIELDS:
        assert torch.equal(mine.stats[k], surface.stats[k]), k
        assert torch.equal(mine.per_segment[k], surface.per_segment[k]), k
    assert res["readings"]["layer"].stats["entropy"].shape == (info.n_layers, 1)  # one "head" per layer


def test_norm_reading_position_and_entropy_from_the_authors_dense_norms(tiny, tokenizer):
    """The norm reading's Clark §3.1/§3.3 statistics are Clark's (the surface reducer's) on the authors' dense
    ||alpha_ij f^h(x_j)|| (BertNormOutput, 5dc8fb3) normalised per query row, on one padded batch."""
    from bertattn_bench.engine.attention import attention_run
    from bertattn_bench.engine.batching import iter_batches
    from bertattn_bench.families.norms import SHARE_FIELDS
    from bertattn_bench.families.surface import SurfaceReducer

    encoded = _segments(tokenizer, 3)
    res = _plain_sweep(tiny, encoded)
    info, model = tiny.info, tiny.model
    ns = N.norm_site(model)
    (batch,) = list(iter_batches(encoded, tokenizer, torch.device("cpu"), 3))
    want = SurfaceReducer(info.n_layers, info.n_heads, "cpu")
    want.start_batch(batch)
    with N.norm_reading(model) as reader, torch.no_grad():
        def observe(layer, p):
            nl = ns.layers[layer]
            x, v = reader.pending[id(nl.value)]
            reader.layer(layer, p)
            head, _, _ = _authors(p.float(), v.float(), nl.output.weight, x, nl.layer_norm, x)
            want.update(layer, head / head.sum(-1, keepdim=True).clamp_min(1e-30))

        with attention_run(model, observe=observe):
            model(**batch.model_inputs(model))
    want = want.finalize()
    got = res["readings"]["norms"]
    for k in SHARE_FIELDS:
        assert torch.allclose(got.stats[k], want.stats[k], atol=1e-5), k
    assert float(got.stats["prev"].max()) > 0 and float(got.stats["entropy"].min()) > 0  # not vacuous


def test_raw_afx_is_the_authors_re_examine_quantity(tiny, tokenizer):
    """The raw ||alpha f|| a category receives (Kobayashi 2020 Fig. 2, re-examine.py's "afx"): per segment, layer and
    head the mean over real queries of the summed ||alpha_ij f^h(x_j)|| to the category's keys, then over segments;
    computed here from the authors' dense norms, one segment at a time as their script does."""
    from bertattn_bench.engine.attention import attention_run

    encoded = _segments(tokenizer, 3)
    res = _plain_sweep(tiny, encoded)
    model, ns = tiny.model, N.norm_site(tiny.model)
    want = {c: torch.zeros(tiny.info.n_layers, tiny.info.n_heads) for c in ("cls", "sep", "punct", "other")}
    punct = {tokenizer.convert_tokens_to_ids(t) for t in (".", ",")}
    for e in encoded:
        ids = torch.tensor([e.input_ids])
        cat = {"cls": ids[0] == tokenizer.cls_token_id, "sep": ids[0] == tokenizer.sep_token_id,
               "punct": torch.tensor([t in punct for t in e.input_ids])}
        cat["other"] = ~(cat["cls"] | cat["sep"] | cat["punct"])
        with N.norm_reading(model) as reader, torch.no_grad():
            def observe(layer, p):
                nl = ns.layers[layer]
                x, v = reader.pending[id(nl.value)]
                reader.layer(layer, p)
                head, _, _ = _authors(p.float(), v.float(), nl.output.weight, x, nl.layer_norm, x)
                for c, m in cat.items():
                    want[c][layer] += head[0][:, :, m].sum(-1).mean(-1) / len(encoded)

            with attention_run(model, observe=observe):
                model(input_ids=ids, token_type_ids=torch.tensor([e.token_type_ids]))
    for c, w in want.items():
        assert torch.allclose(res["afx"][c], w, rtol=1e-4, atol=1e-7), (c, (res["afx"][c] - w).abs().max())
    assert float(want["other"].min()) > 0


def test_the_jackknife_over_groups_by_hand():
    """Delete-a-group jackknife (claims.stats.jackknife_se): with one unit per group, the SE of a mean is exactly
    sd / sqrt(n) (ddof 1); with 2 groups of the units 1, 2 | 3, 6: the means without each group 4.5 and 1.5, SE
    sqrt(1/2 x (1.5² + 1.5²)) = 1.5."""
    from bertattn_bench.claims.stats import jackknife_se

    x = np.array([1.0, 2.0, 3.0, 6.0])
    se, g = jackknife_se(lambda kept: float(x[kept].mean()), 4, groups=10)
    assert g == 4 and se == pytest.approx(np.std(x, ddof=1) / 2)
    se2, g2 = jackknife_se(lambda kept: float(x[kept].mean()), 4, groups=2)
    assert g2 == 2 and se2 == pytest.approx(1.5)
    assert np.isnan(jackknife_se(lambda kept: 0.0, 1)[0])
