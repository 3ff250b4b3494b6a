"""Interventions pinned to their exact (layer, head) by hand computation on a tiny model: head masking, per-row
gates, Kovaleva's uniform attention per row, nesting, and the gate gradient (Michel's importance)."""
import math

import pytest
import torch

from bertattn_bench.engine import attention


def _inputs(tokenizer, texts):
    return tokenizer(texts, padding=True, return_tensors="pt")


OWN_CODE = ("MPNet", "DeBERTa-v2/v3", "XLNet", "XLM")  # attention in their own code (issue 25): the probability
# module path; XLM at the seam (each head's context at the output projection's input)


@pytest.fixture(scope="module", params=("BERT (interface)",) + OWN_CODE + ("ModernBERT",))
def tiny_any(request, tiny, tokenizer):
    """The tiny BERT (attention interface), own-code models read at their probability module, and ModernBERT
    (interface, found by its calls): every intervention must behave the same on each."""
    if request.param.startswith("BERT"):
        return tiny
    import architecture_matrix as A

    return A.build(next(a for a in A.MATRIX if a.label == request.param), tokenizer)


def _model_inputs(model):
    """The tokenizer's batch as ``model`` takes it (the project's one input builder: no token types without them)."""
    from bertattn_bench.engine.batching import model_inputs

    return lambda tokenizer, texts: model_inputs(model, _inputs(tokenizer, texts))


def _self_attention_outputs(model, batch, **run_kwargs):
    """Each layer's self-attention context (B, T, H*D) and its input hidden states, via forward hooks."""
    mods = attention.attention_modules(model)
    ctx, inp = {}, {}
    hooks = []
    for layer, mod in enumerate(mods):
        hooks.append(mod.register_forward_hook(
            lambda m, args, kwargs, out, layer=layer: ctx.__setitem__(layer, out[0].detach().clone()), with_kwargs=True))
        hooks.append(mod.register_forward_pre_hook(
            lambda m, args, kwargs, layer=layer: inp.__setitem__(layer, (args[0] if args else kwargs["hidden_states"]).detach().clone()),
            with_kwargs=True))
    try:
        with torch.no_grad(), attention.attention_run(model, **run_kwargs):
            model(**batch)
    finally:
        for h in hooks:
            h.remove()
    return ctx, inp


def _hand_context(mod, hidden, mask, gates_row):
    """Hand computation of one BERT self-attention layer: per head softmax(q k^T / sqrt(d) + mask) v, times ξ_h."""
    b, t, _ = hidden.shape
    h = mod.num_attention_heads
    d = mod.attention_head_size
    q = mod.query(hidden).view(b, t, h, d).transpose(1, 2)
    k = mod.key(hidden).view(b, t, h, d).transpose(1, 2)
    v = mod.value(hidden).view(b, t, h, d).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    scores = scores.masked_fill(~mask[:, None, None, :].bool(), float("-inf"))
    out = torch.softmax(scores, -1) @ v  # (B, H, T, D)
    out = out * gates_row.view(-1 if gates_row.dim() == 2 else 1, h, 1, 1) if gates_row.dim() == 2 else out * gates_row.view(1, h, 1, 1)
    return out.transpose(1, 2).reshape(b, t, h * d)


@pytest.mark.parametrize("masked", [[(1, 2)], [(0, 3), (1, 0)], [(0, 0), (0, 1), (0, 2), (0, 3)]])
def test_zero_heads_equals_hand_computation(tiny, tokenizer, masked):
    """ξ_h = 0 zeroes exactly head h of layer l (and nothing else): every layer's context equals a hand computation
    with those gates. Catches masking the wrong head, layer 0's gates in every layer, and scaling instead of 0."""
    batch = _inputs(tokenizer, ["the cat sat on the mat", "a dog"])
    n_l, n_h = tiny.info.n_layers, tiny.info.n_heads
    gates = attention.zero_heads(n_l, n_h, masked)
    ctx, inp = _self_attention_outputs(tiny.model, batch, head_gates=gates)
    mods = attention.attention_modules(tiny.model)
    d = mods[0].attention_head_size
    with torch.no_grad():
        for layer, mod in enumerate(mods):
            want = _hand_context(mod, inp[layer], batch["attention_mask"], gates[layer])
            real = batch["attention_mask"].bool()
            torch.testing.assert_close(ctx[layer][real], want[real], atol=1e-5, rtol=1e-5)
            for head in range(n_h):
                part = ctx[layer][..., head * d:(head + 1) * d][real]
                if (layer, head) in masked:
                    assert float(part.abs().max()) == 0.0
                else:
                    assert float(part.abs().max()) > 1e-4


def test_row_gates_equal_one_configuration_at_a_time(tiny_any, tokenizer):
    """(B, L, H) gates: row b gets its own configuration; each row equals running that configuration alone."""
    tiny = tiny_any
    _inputs = _model_inputs(tiny.model)
    texts = ["the cat sat on the mat", "the cat sat on the mat", "a dog barked"]
    batch = _inputs(tokenizer, texts)
    n_l, n_h = tiny.info.n_layers, tiny.info.n_heads
    configs = [[(0, 1)], [(1, 3)], []]
    rows = torch.stack([attention.zero_heads(n_l, n_h, c) for c in configs])
    with torch.no_grad(), attention.attention_run(tiny.model, head_gates=rows):
        together = tiny.model(**batch).last_hidden_state
    for i, c in enumerate(configs):
        one = {k: v[i:i + 1] for k, v in batch.items()}
        with torch.no_grad(), attention.attention_run(tiny.model, head_gates=attention.zero_heads(n_l, n_h, c)):
            alone = tiny.model(**one).last_hidden_state
        n = int(one["attention_mask"].sum())
        torch.testing.assert_close(together[i, :n], alone[0, :n], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(together[0], together[1])  # same text, different heads masked


def test_uniform_rows_equal_uniform_attention(tiny_any, tokenizer):
    """Kovaleva's disabling per row (the sweep's trick) equals uniform_attention of that row's heads alone,
    padding included (uniform over each example's real tokens)."""
    tiny = tiny_any
    _inputs = _model_inputs(tiny.model)
    texts = ["one two three four five six", "one two", "one two three four five six"]
    batch = _inputs(tokenizer, texts)
    n_l, n_h = tiny.info.n_layers, tiny.info.n_heads
    configs = [[(1, 2)], [(0, 0), (0, 1), (0, 2), (0, 3)], []]
    mask = torch.zeros(len(texts), n_l, n_h, dtype=torch.bool)
    for i, c in enumerate(configs):
        for l, h in c:
            mask[i, l, h] = True
    rows = attention.UniformRows().set(mask)
    seen = {}
    with torch.no_grad(), attention.attention_run(tiny.model, interventions=[rows.intervention()],
                                                  observe=lambda l, p: seen.__setitem__(l, p.clone())):
        together = tiny.model(**batch).last_hidden_state
    for i, c in enumerate(configs):
        n = int(batch["attention_mask"][i].sum())
        one = {k: v[i:i + 1, :n] for k, v in batch.items()}  # the example alone, unpadded
        with torch.no_grad(), attention.attention_run(tiny.model, edit_probs=attention.uniform_attention(c)):
            alone = tiny.model(**one).last_hidden_state
        torch.testing.assert_close(together[i, :n], alone[0, :n], atol=1e-5, rtol=1e-5)
    n1 = int(batch["attention_mask"][1].sum())
    torch.testing.assert_close(seen[0][1, :, :n1, :n1], torch.full((n_h, n1, n1), 1.0 / n1))
    torch.testing.assert_close(seen[1][0, 2, 0, :], torch.full((seen[1].shape[-1],), 1.0 / seen[1].shape[-1]))
    assert not torch.allclose(seen[1][0, 1, 0], seen[1][0, 2, 0])  # only head 3 of layer 2 is uniform
    assert not torch.allclose(together[0], together[2])


def test_nested_runs_stack_and_restore(tiny_any, tokenizer):
    """An inner run adds its interventions after the outer ones and removes only its own on exit (also on error)."""
    tiny = tiny_any
    _inputs = _model_inputs(tiny.model)
    batch = _inputs(tokenizer, ["the cat sat on the mat"])
    outer_seen, inner_seen = [], []
    gates = attention.zero_heads(tiny.info.n_layers, tiny.info.n_heads, [(0, 0)])
    with torch.no_grad():
        base = tiny.model(**batch).last_hidden_state
        with attention.attention_run(tiny.model, observe=lambda l, p: outer_seen.append(l)):
            with attention.attention_run(tiny.model, head_gates=gates, observe=lambda l, p: inner_seen.append(l)):
                both = tiny.model(**batch).last_hidden_state
            assert len(outer_seen) == len(inner_seen) == tiny.info.n_layers
            after_inner = tiny.model(**batch).last_hidden_state  # outer run still active, inner gates gone
            assert len(outer_seen) == 2 * tiny.info.n_layers and len(inner_seen) == tiny.info.n_layers
            with pytest.raises(RuntimeError):
                with attention.attention_run(tiny.model, head_gates=gates):
                    raise RuntimeError("boom")
            tiny.model(**batch)
            assert len(outer_seen) == 3 * tiny.info.n_layers
        for mod in attention.attention_modules(tiny.model):
            assert "_bertattn_stack" not in mod.__dict__
        plain = tiny.model(**batch).last_hidden_state
    torch.testing.assert_close(after_inner, base)
    torch.testing.assert_close(plain, base)
    assert not torch.allclose(both, base)


def test_nested_probs_edits_compose_in_order(tiny_any, tokenizer):
    """Outer frame first: an outer edit that doubles and an inner one that observes see the doubled values."""
    tiny = tiny_any
    _inputs = _model_inputs(tiny.model)
    if attention.site(tiny.model).path == attention.SEAM:  # only uniform attention and gates reach the seam
        with pytest.raises(ValueError, match="uniform attention and head gates"):
            with attention.attention_run(tiny.model, edit_probs=lambda l, p, m: p * 2):
                pass
        return
    batch = _inputs(tokenizer, ["a b c"])
    got = {}
    with torch.no_grad(), attention.attention_run(tiny.model, edit_probs=lambda l, p, m: p * 2):
        with attention.attention_run(tiny.model, edit_probs=lambda l, p, m: (got.setdefault(l, p.sum(-1)), p)[1]):
            tiny.model(**batch)
    torch.testing.assert_close(got[0], torch.full_like(got[0], 2.0))


def test_gate_gradient_equals_finite_difference(tiny_any, tokenizer):
    """∂L/∂ξ_h from head_gate_gradients equals (L(ξ_h=1+ε) - L(ξ_h=1-ε)) / 2ε, per example, for several heads."""
    tiny = tiny_any
    _inputs = _model_inputs(tiny.model)
    model = tiny.model.double()
    try:
        batch = _inputs(tokenizer, ["the cat sat on the mat", "dogs bark loudly at night"])
        n_l, n_h = tiny.info.n_layers, tiny.info.n_heads
        torch.manual_seed(0)
        target = torch.randn(2, tiny.model.config.hidden_size, dtype=torch.float64)

        def losses(m, b):  # a per-example loss on the first token's final state
            return ((m(**b).last_hidden_state[:, 0] - target) ** 2).sum(-1)

        class B(dict):
            input_ids = property(lambda self: self["input_ids"])

        grads, n = attention.head_gate_gradients(model, [B(batch)], lambda m, b: losses(m, dict(b)), n_l, n_h)
        assert n == 2
        eps = 1e-5
        for layer, head in [(0, 0), (1, 2), (1, 3)]:
            fd = torch.zeros(2, dtype=torch.float64)
            for sign in (1, -1):
                g = torch.ones(n_l, n_h, dtype=torch.float64)
                g[layer, head] += sign * eps
                with torch.no_grad(), attention.attention_run(model, head_gates=g):
                    fd += sign * losses(model, batch)
            fd /= 2 * eps
            # XLM computes its softmax in float32 even in a float64 model: finite differences carry ~1e-7/eps noise
            rtol = 5e-3 if model.config.model_type in ("xlm", "flaubert") else 1e-5
            torch.testing.assert_close(grads[layer, head], fd.abs().sum(), rtol=rtol, atol=1e-8)
        assert all(p.requires_grad for p in model.parameters())
    finally:
        tiny.model.float()


def test_own_code_path_refuses_the_scores_point(tokenizer):
    """The pre-softmax scores are inside an own-code model's attention: asking for them is an error, not a no-op."""
    import architecture_matrix as A

    loaded = A.build(next(a for a in A.MATRIX if a.label == "MPNet"), tokenizer)
    with pytest.raises(ValueError, match="'scores' point"):
        with attention.attention_run(loaded.model, interventions=[attention.Intervention("scores", lambda *a: a[1])]):
            pass


def test_forward_loop_leaves_its_run_when_a_reducer_raises(tiny, tokenizer):
    """attention.forward's run ends as soon as the loop over it stops: a reducer that raises in run_reducers' loop
    leaves no frame on the model, even while the exception (and so the loop's frame) is still held."""
    from bertattn_bench.engine.batching import encode_words, iter_batches

    class Boom(attention.Reducer):
        def start_batch(self, batch):
            pass

        def update(self, layer, probs):
            pass

        def end_batch(self, hidden_states):  # raised in the loop's body, outside the generator
            raise RuntimeError("boom")

        def finalize(self):
            return None

    enc = [encode_words(tokenizer, i, ["the", "cat", "sat"]) for i in range(3)]
    with pytest.raises(RuntimeError, match="boom"):
        attention.run_reducers(tiny.model, iter_batches(enc, tokenizer, "cpu", 2), [Boom()])
    for mod in attention.attention_modules(tiny.model):
        assert "_bertattn_stack" not in mod.__dict__
