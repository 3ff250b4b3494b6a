"""Clark §3.2 Fig. 3 gradient family: ∂L_MLM/∂α against finite differences, reducer and metrics on known answers,
masking, and refusing a checkpoint without MLM head weights (a tiny BertForMaskedLM built from a config)."""
import os
from types import SimpleNamespace

import pytest
import torch

from bertattn_bench.claims.registry import NotApplicable
from bertattn_bench.engine.batching import encode_pair, make_batch
from bertattn_bench.families import gradient as g

PAIRS = [("the cat sat on the mat .", "it was , happy"), ("short", "pair"),
         ("a much longer first paragraph , with commas .", "and a second one that is long too .")]


@pytest.fixture(scope="module")
def tiny_mlm(tokenizer):
    """2 layers, 2 heads, hidden 16, BertForMaskedLM with random weights (seed 0). Weights drawn 10x wider than
    BERT's default so that attention is peaked and layer 1's weights also act through layer 2's attention."""
    from transformers import BertConfig

    from bertattn_bench.engine.model import model_from_config

    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, initializer_range=0.2)
    lm = model_from_config(config, tokenizer, "tiny-mlm", "tiny-mlm", seed=0, device="cpu", with_mlm_head=True)
    lm.model.requires_grad_(False)
    return lm


@pytest.fixture(scope="module")
def masked(tokenizer):
    return {i: g.mask_pieces(encode_pair(tokenizer, i, a, b), tokenizer) for i, (a, b) in enumerate(PAIRS)}


def _batch(masked, tokenizer, indices):
    return make_batch([masked[i].encoded for i in indices], tokenizer, "cpu", with_words=False)


def test_mask_pieces_deterministic_and_never_special(tokenizer, masked):
    special = set(tokenizer.all_special_ids)
    for i, (a, b) in enumerate(PAIRS):
        enc = encode_pair(tokenizer, i, a, b)
        m = masked[i]
        assert m.positions == g.mask_pieces(enc, tokenizer).positions  # same seed, same pieces
        pieces = [p for p, t in enumerate(enc.input_ids) if t not in special]
        assert len(m.positions) == max(1, round(0.15 * len(pieces)))
        assert all(enc.input_ids[p] not in special for p in m.positions)
        assert m.labels == [enc.input_ids[p] for p in m.positions]
        assert all(m.encoded.input_ids[p] == tokenizer.mask_token_id for p in m.positions)


def test_gradient_matches_finite_differences(tiny_mlm, tokenizer, masked):
    """∂L/∂α_ij from the core equals (L(α+ε) - L(α-ε)) / 2ε, also for layer 1 whose effect passes through layer
    2's attention (detached probabilities would miss that path)."""
    model = tiny_mlm.model.double()
    try:
        batch = _batch(masked, tokenizer, [0, 1])
        labels = g.batch_labels(batch, masked)
        _, _, grads = g.attention_gradients(model, batch, labels, 2)

        def loss_with(layer, index, eps):
            def edit(l, probs, key_mask):
                if l != layer:
                    return probs
                probs = probs.clone()
                probs[index] += eps
                return probs

            from bertattn_bench.engine.attention import attention_run

            with torch.no_grad(), attention_run(model, edit_probs=edit):
                return float(g.mlm_loss(model, batch, labels))

        eps = 1e-5
        n_real = int(batch.token_mask[1].sum())
        for layer, index in [(0, (0, 1, 3, 0)), (0, (1, 0, 2, n_real - 1)), (1, (0, 0, 5, 2)), (1, (1, 1, 0, 1))]:
            fd = (loss_with(layer, index, eps) - loss_with(layer, index, -eps)) / (2 * eps)
            assert float(grads[layer][index]) == pytest.approx(fd, rel=1e-5, abs=1e-9)
        assert float(grads[0][1].abs().sum()) > 0  # segment 1 has its own loss
        # the path through layer 2's attention matters here: detached probabilities give another layer-1 gradient
        leaves = {}

        def detach(layer, probs, key_mask):
            leaves[layer] = probs.detach().requires_grad_()
            return leaves[layer]

        from bertattn_bench.engine.attention import attention_run

        with torch.enable_grad(), attention_run(model, edit_probs=detach):
            value_path_only = torch.autograd.grad(g.mlm_loss(model, batch, labels), [leaves[0]])[0]
        assert float((value_path_only - grads[0]).abs().max()) > 0.05 * float(grads[0].abs().max())
    finally:
        model.float()


def test_batched_equals_one_by_one(tiny_mlm, tokenizer, masked):
    """Segments' losses are summed, means are per segment, padding is masked: batching changes nothing."""
    from bertattn_bench.engine.batching import iter_batches

    encoded = [m.encoded for m in masked.values()]

    def run(bs):
        return g.run_gradients(tiny_mlm.model, iter_batches(encoded, tokenizer, "cpu", bs), masked, 2, 2, "cpu")

    batched, single = run(3), run(1)
    assert batched.n_segments == single.n_segments == 3
    assert batched.n_masked == single.n_masked == sum(len(m.positions) for m in masked.values())
    for c in g.KEY_CLASSES:
        torch.testing.assert_close(batched.grad[c], single.grad[c], rtol=1e-4, atol=1e-9)
    torch.testing.assert_close(batched.to_sep, single.to_sep, rtol=1e-5, atol=1e-7)


def test_reducer_known_answers(tokenizer, masked):
    """Planted gradients: 1 on [SEP] keys, 3 on padding (must not count); uniform attention gives [SEP] 2/L."""
    batch = _batch(masked, tokenizer, [0, 1])
    labels = g.batch_labels(batch, masked)
    b, t = batch.input_ids.shape
    real = batch.token_mask
    assert not real[1].all()  # segment 1 is padded
    grad = batch.is_sep.double()[:, None, None, :].expand(b, 2, t, t).clone()
    grad[~real[:, None, :, None].expand(b, 2, t, t)] = 3.0  # padded queries
    grad[~real[:, None, None, :].expand(b, 2, t, t)] = 3.0  # padded keys
    probs = (real.double() / real.sum(-1, keepdim=True))[:, None, None, :].expand(b, 2, t, t)
    red = g.GradientReducer(1, 2, "cpu")
    red.start_batch(batch, labels)
    red.update(0, probs, grad)
    res = red.finalize()
    assert res.grad["sep"][0].tolist() == pytest.approx([1.0, 1.0])
    assert res.grad["other"][0].tolist() == pytest.approx([0.0, 0.0])
    assert res.grad["punct"][0].tolist() == pytest.approx([0.0, 0.0])  # only segments with '.'/',' count
    lengths = real.sum(-1).tolist()
    sep_share = sum(2 / n for n in lengths) / 2
    assert res.to_sep[0].tolist() == pytest.approx([sep_share] * 2, rel=1e-6)
    assert res.sep_chance == pytest.approx(sep_share)
    unmasked = [n - len(masked[i].positions) for i, n in zip([0, 1], lengths)]
    assert res.grad["unmasked"][0].tolist() == pytest.approx([sum(2 / u for u in unmasked) / 2] * 2, rel=1e-6)
    assert res.n_masked == len(masked[0].positions) + len(masked[1].positions)


def _result(sep, other, share, chance=0.05, unmasked=None):
    L = len(sep)
    col = lambda v: torch.tensor(v, dtype=torch.float32)[:, None].expand(L, 2).clone()  # noqa: E731
    unmasked = other if unmasked is None else unmasked
    res = g.GradientResult(grad={"sep": col(sep), "other": col(other), "punct": col(other), "unmasked": col(unmasked)},
                           to_sep=col(share), n_segments=10, n_masked=40, n_weights={}, sep_chance=chance)
    return SimpleNamespace(result=res)


def test_ratio_metric_relative_depth():
    """From layer 5 of 12 = layer 3 of 6 on, the largest [SEP]/other ratio."""
    pr = _result([2, 2, 0.2, 0.4, 0.1, 0.3], [1] * 6, [0.1] * 6)
    m = g.gradient_ratio_from_depth(pr, from_layer=5, of_layers=12)
    assert m.value == pytest.approx(0.4) and m.n == 10
    assert g.metrics._from_layer0(12, 5, 12) == 4 and g.metrics._from_layer0(6, 5, 12) == 2


def test_comparison_set_is_fig3_all_unmasked_tokens():
    """Fig. 3 compares [SEP] with "All unmasked tokens": the metrics' default and both claims' params."""
    from bertattn_bench.claims.catalog import load_claims

    pr = _result([2, 2, 0.2, 0.4, 0.1, 0.3], [1] * 6, [0.1] * 6, unmasked=[2] * 6)
    assert g.gradient_ratio_from_depth(pr).value == pytest.approx(0.2)  # 0.4 / 2, not 0.4 / 1
    assert g.gradient_ratio_from_depth(pr, versus="other").value == pytest.approx(0.4)
    claims = load_claims(family="gradient")
    assert claims and all(c.params["versus"] == "unmasked" for c in claims)


def test_onset_metric():
    share = [0.05, 0.1, 0.4, 0.6, 0.7, 0.5]  # half of the peak 0.7 first reached at L3
    assert g.gradient_onset_gap(_result([2, 2, 0.2, 0.3, 0.1, 0.3], [1] * 6, share)).value == pytest.approx(0)
    assert g.gradient_onset_gap(_result([2, 2, 2, 0.3, 0.1, 0.3], [1] * 6, share)).value == pytest.approx(1 / 6)
    # a gradient that rises again in the last layer: no onset, counted as after the last layer (L7)
    assert g.gradient_onset_gap(_result([2, 2, 0.2, 0.3, 0.1, 1.3], [1] * 6, share)).value == pytest.approx(4 / 6)
    with pytest.raises(NotApplicable, match="never becomes high"):
        g.gradient_onset_gap(_result([0.1] * 6, [1] * 6, [0.06] * 6))


def test_no_head_checkpoint_is_refused(tmp_path, tokenizer, tiny_mlm):
    """A BertModel checkpoint has no head weights (transformers would initialise one at random): the pass says so
    and the claims skip; a BertForMaskedLM checkpoint passes the check."""
    from bertattn_bench.claims.catalog import evaluate, load_claims
    from bertattn_bench.engine.model import load_model

    config = tiny_mlm.model.config
    tiny_mlm.model.save_pretrained(tmp_path / "mlm")
    tiny_mlm.model.base_model.save_pretrained(tmp_path / "encoder")
    for name in ("mlm", "encoder"):
        tokenizer.save_pretrained(tmp_path / name)
    assert g.missing_head_weights(config, g.checkpoint_keys(str(tmp_path / "mlm"))) == []
    missing = g.missing_head_weights(config, g.checkpoint_keys(str(tmp_path / "encoder")))
    assert "cls.predictions.transform.dense.weight" in missing
    old_names = [k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
                 for k in g.checkpoint_keys(str(tmp_path / "mlm"))]
    assert g.missing_head_weights(config, old_names) == []

    encoder = load_model(str(tmp_path / "encoder"), device="cpu")
    prepared = g.prepare_gradient(encoder, tmp_path / "no-data-needed")
    pr = prepared.run()
    assert isinstance(pr.result, g.NoMLMHead) and "cls.predictions" in pr.result.reason
    for claim in load_claims(family="gradient"):
        out = evaluate(claim, pr)
        assert out.skipped == f"needs a masked-LM head; {encoder.info.name} has none"
    with_head = load_model(str(tmp_path / "mlm"), device="cpu")
    assert g.mlm_head_problem(with_head.info, with_head.model.config) is None


def test_figure_writes_png(tmp_path):
    """Clark Fig. 3's curves, one PNG per pass; a pass without an MLM head draws nothing."""
    pr = _result([2, 2, 0.2, 0.4, 0.1, 0.3], [1] * 6, [0.1] * 6)
    pr.model, pr.corpus = SimpleNamespace(name="tiny", slug="tiny"), "wikitext2"
    no_head = SimpleNamespace(result=g.NoMLMHead("none"))
    paths = g.gradient_figure([pr, no_head], tmp_path)
    assert [p.name for p in paths] == ["gradient-tiny-wikitext2.png"] and paths[0].stat().st_size > 0


def test_no_synchronising_operation_in_the_gradient_loop(tiny_mlm, tokenizer, masked):
    """Issue 47: the masked positions are chosen on the host and read by integer index (8949cf5's loss took them by
    a boolean index and ``nonzero``, whose sizes the host learns from the device); the reducer reads no value back.
    Counted: what this package's code asks for; the model's own (transformers' mask check, ``padding_mask.all()``)
    is the bare forward's too."""
    from bertattn_bench.engine.opcount import OpCount

    batch = _batch(masked, tokenizer, [0, 1, 2])
    red = g.GradientReducer(2, 2, "cpu")
    with OpCount() as counted:
        labels = g.batch_labels(batch, masked)
        red.start_batch(batch, labels)
        _, probs, grads = g.attention_gradients(tiny_mlm.model, batch, labels, 2)
        for layer in range(2):
            red.update(layer, probs[layer], grads[layer])
    ours = {k: v for k, v in counted.where.items() if f"{os.sep}bertattn_bench{os.sep}" in k[1]}
    assert not ours, ours
    assert int(red.n_masked) == sum(len(masked[i].positions) for i in (0, 1, 2))
