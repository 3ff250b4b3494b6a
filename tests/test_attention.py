"""The attention core: same probabilities as transformers' eager attention, padding-invariant, interventions."""
import pytest
import torch

from bertattn_bench.engine import attention
from bertattn_bench.engine.batching import encode_words, iter_batches
from bertattn_bench.families.surface import SurfaceReducer


def _inputs(tokenizer, texts):
    return tokenizer(texts, padding=True, return_tensors="pt")


def test_probabilities_match_output_attentions(tiny, tokenizer):
    """Observed maps equal the model's own output_attentions (eager), padding included."""
    import copy

    from transformers import AutoModel

    ref = AutoModel.from_config(copy.deepcopy(tiny.model.config), attn_implementation="eager")
    ref.load_state_dict(tiny.model.state_dict())
    ref.eval()
    batch = _inputs(tokenizer, ["a short one", "a somewhat longer sentence than the first one"])
    seen = {}
    with torch.no_grad(), attention.attention_run(tiny.model, observe=lambda l, p: seen.__setitem__(l, p.clone())):
        ours = tiny.model(**batch)
    with torch.no_grad():
        theirs = ref(**batch, output_attentions=True)
    assert len(seen) == tiny.info.n_layers == len(theirs.attentions)
    for layer, probs in seen.items():
        torch.testing.assert_close(probs, theirs.attentions[layer], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(ours.last_hidden_state, theirs.last_hidden_state, atol=1e-5, rtol=1e-5)


def test_padding_mask_reaches_the_attention_function(tiny, tokenizer):
    """transformers 5 drops the mask for unregistered custom attention; padded keys must get zero weight."""
    batch = _inputs(tokenizer, ["x", "a much longer sentence with padding for the first"])
    seen = {}
    with torch.no_grad(), attention.attention_run(tiny.model, observe=lambda l, p: seen.__setitem__(l, p.clone())):
        tiny.model(**batch)
    pad = batch["attention_mask"][0] == 0
    assert pad.any()
    assert float(seen[0][0, :, :, pad].abs().max()) == 0.0


def _surface_stats(tiny, tokenizer, sentences, batch_size):
    enc = [encode_words(tokenizer, i, s) for i, s in enumerate(sentences)]
    red = SurfaceReducer(tiny.info.n_layers, tiny.info.n_heads, "cpu")
    (res,) = attention.run_reducers(tiny.model, iter_batches(enc, tokenizer, "cpu", batch_size), [red])
    return res


def test_batched_equals_one_by_one(tiny, tokenizer, sentences):
    """Statistics do not depend on batching or padding (Clark: no padded positions in any statistic)."""
    batched = _surface_stats(tiny, tokenizer, sentences, batch_size=4)
    single = _surface_stats(tiny, tokenizer, sentences, batch_size=1)
    assert batched.n_segments == single.n_segments == len(sentences)
    for name in batched.stats:
        torch.testing.assert_close(batched.stats[name], single.stats[name], atol=1e-5, rtol=1e-4)


def test_uniform_attention_intervention(tiny, tokenizer):
    """Kovaleva §4.6: a disabled head attends 1/L to every real token, others are untouched."""
    batch = _inputs(tokenizer, ["one two", "one two three four five"])
    seen = {}
    edit = attention.uniform_attention([(1, 2)])
    with torch.no_grad(), attention.attention_run(tiny.model, observe=lambda l, p: seen.__setitem__(l, p.clone()),
                                                  edit_probs=edit):
        tiny.model(**batch)
    lengths = batch["attention_mask"].sum(-1)
    for b, n in enumerate(lengths.tolist()):
        row = seen[1][b, 2, 0]
        torch.testing.assert_close(row[:n], torch.full((n,), 1.0 / n))
        assert float(row[n:].sum()) == 0.0
    assert not torch.allclose(seen[1][:, 1], seen[1][:, 2])


def test_zero_heads_is_distinct_from_uniform(tiny, tokenizer):
    """Michel §3: ξ_h = 0 removes a head's output; all-zero gates in a layer equal removing its attention output."""
    batch = _inputs(tokenizer, ["the cat sat on the mat"])
    with torch.no_grad():
        base = tiny.model(**batch).last_hidden_state
        gates = attention.zero_heads(tiny.info.n_layers, tiny.info.n_heads, [(0, 1)])
        with attention.attention_run(tiny.model, head_gates=gates):
            zeroed = tiny.model(**batch).last_hidden_state
        with attention.attention_run(tiny.model, edit_probs=attention.uniform_attention([(0, 1)])):
            uniform = tiny.model(**batch).last_hidden_state
        after = tiny.model(**batch).last_hidden_state  # the run ended: back to the plain model
    assert not torch.allclose(base, zeroed)
    assert not torch.allclose(zeroed, uniform)
    torch.testing.assert_close(after, base)


def test_model_loaded_elsewhere_is_refused(tokenizer):
    from transformers import BertConfig, BertModel

    from bertattn_bench.base.errors import ModelLoadError

    config = BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16)
    model = BertModel(config, add_pooling_layer=False)
    with pytest.raises(ModelLoadError, match="attention implementation"):
        attention.attention_modules(model)


def test_head_names_are_one_based():
    assert attention.head_name(0, 0) == "1-1"
    assert attention.head_name(7, 9) == "8-10"
    assert attention.parse_head_name("8-10") == (7, 9)
    assert attention.parse_head_name(attention.head_name(4, 3)) == (4, 3)
    for bad in ("0-1", "5", "a-b", "5-4-1"):
        with pytest.raises(ValueError, match="layer-head|from 1"):
            attention.parse_head_name(bad)


@pytest.mark.parametrize("model_type, ok", [("bert", True), ("roberta", True), ("electra", True),
                                            ("megatron-bert", True), ("roformer", True), ("mpnet", True),
                                            ("fnet", False), ("nystromformer", False)])
def test_attention_is_observed_or_the_model_is_refused(tokenizer, model_type, ok):
    """MegatronBERT/RoFormer/MPNet compute attention in their own code: the registered function is never called, so
    they are read at the module that outputs their probabilities (issue 25), every layer observed at load. FNet has
    no attention, Nystromformer no exact map: refused."""
    import torch
    from transformers import AutoConfig

    from bertattn_bench.base.errors import ModelLoadError
    from bertattn_bench.engine.model import model_from_config

    cfg = AutoConfig.for_model(model_type, vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    if ok:
        loaded = model_from_config(cfg, tokenizer, model_type, model_type, device="cpu")
        assert loaded.info.n_layers == 2
        seen = []
        with torch.no_grad(), attention.attention_run(loaded.model, observe=lambda l, p: seen.append(l)):
            loaded.model(input_ids=torch.tensor([[5, 6, 7]]))
        assert seen == [0, 1]
    else:
        with pytest.raises(ModelLoadError, match="Fourier|Nystrom"):
            model_from_config(cfg, tokenizer, model_type, model_type, device="cpu")


def test_own_code_maps_equal_output_attentions_and_never_pile_up(tokenizer):
    """MPNet (own code): the observed maps equal its own output_attentions on a padded batch, and a run keeps no
    maps (the model is not asked for output_attentions)."""
    import architecture_matrix as A
    import torch

    from bertattn_bench.engine.batching import model_inputs

    loaded = A.build(next(a for a in A.MATRIX if a.label == "MPNet"), tokenizer)
    enc = model_inputs(loaded.model, _inputs(tokenizer, ["the cat sat on the mat", "a dog"]))
    seen = {}
    with torch.no_grad(), attention.attention_run(loaded.model, observe=lambda l, p: seen.__setitem__(l, p.clone())):
        out = loaded.model(**enc)
    assert out.attentions is None
    with torch.no_grad():
        theirs = loaded.model(**enc, output_attentions=True).attentions
    assert sorted(seen) == [0, 1]
    for layer in (0, 1):
        torch.testing.assert_close(seen[layer], theirs[layer], rtol=0, atol=1e-6)
    assert float(seen[1][1, :, :, enc["attention_mask"][1] == 0].abs().max()) < 1e-6  # padding masked


def _tiny_bert(tokenizer, layers: int, seed: int):
    from transformers import BertConfig

    from bertattn_bench.engine.model import model_from_config

    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    return model_from_config(config, tokenizer, "tiny", "tiny", seed=seed, device="cpu").model


def _self_attentions(model):
    """The modules that call the attention function, by their class (BERT's self-attention), in layer order."""
    return [m for m in model.modules() if type(m).__name__ == "BertSelfAttention"]


def _discover_during_first_layer(outer, inner_discovery):
    """discover(outer) while ``inner_discovery()`` runs between its first and second layer's attention calls."""
    first_layer = next(m for m in outer.modules() if type(m).__name__ == "BertLayer")
    handle = first_layer.register_forward_hook(lambda mod, args, out: inner_discovery() and None)  # output kept
    try:
        return attention.discover(outer)
    finally:
        handle.remove()


def test_a_nested_discover_keeps_each_model_its_own_modules(tokenizer):
    """The modules calling the attention function are collected per discover (issue 44: no module global): a
    discover of another model inside this one's forward pass (a hook, a wrapper) leaves both sites right, and a
    repeated discover finds the same modules."""
    outer, inner = _tiny_bert(tokenizer, 3, 0), _tiny_bert(tokenizer, 2, 1)
    found = {}
    site = _discover_during_first_layer(outer, lambda: found.setdefault("inner", attention.discover(inner)))
    assert site.path == attention.INTERFACE and site.calls == 3
    assert site.modules == _self_attentions(outer)
    assert found["inner"].path == attention.INTERFACE and found["inner"].calls == 2
    assert found["inner"].modules == _self_attentions(inner)
    again = attention.discover(outer)
    assert again.modules == site.modules and again.calls == 3


def test_a_discover_in_another_thread_keeps_each_model_its_own_modules(tokenizer):
    """Two threads discovering at once each collect their own model's modules: the other thread's discover is
    half-way through its forward pass (held after its first layer) while this one's runs its remaining layers."""
    import threading

    outer, inner = _tiny_bert(tokenizer, 3, 0), _tiny_bert(tokenizer, 2, 1)
    inner_half_done, outer_done, found = threading.Event(), threading.Event(), {}

    def hold():  # inside the inner discover's forward pass, between its layers
        inner_half_done.set()
        outer_done.wait(30)

    thread = threading.Thread(target=lambda: found.setdefault(
        "inner", _discover_during_first_layer(inner, hold)))
    try:
        site = _discover_during_first_layer(outer, lambda: thread.start() or inner_half_done.wait(30))
    finally:
        outer_done.set()
        thread.join(30)
    assert inner_half_done.is_set()
    assert site.modules == _self_attentions(outer) and site.calls == 3
    assert found["inner"].modules == _self_attentions(inner) and found["inner"].calls == 2
