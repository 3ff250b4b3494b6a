"""Issue 47: on an accelerator no forward pass asks the device whether its batch has padding. transformers' mask
builders do (its ``padding_mask.all()``, to skip the mask of a batch without padding): a host synchronisation in
every forward pass, of the core, of the sweeps and of every training step. The project's implementations build the
mask there always; a batch without padding then adds 0 to every score, so the maps are the same, bit for bit. On
the CPU the question costs nothing and they keep it (the recorded values were measured with it: under bf16
autocast an added mask would promote the scores). The accelerator's side is tested on the CPU by saying the device
is one (``asks_about_padding``)."""
from __future__ import annotations

import copy

import pytest
import torch

from bertattn_bench.engine import attention
from bertattn_bench.engine.attention import interface
from bertattn_bench.engine.batching import encode_words, iter_batches
from bertattn_bench.engine.opcount import OpCount

# a `.to` onto the tensor's own device (transformers' cast of the 2-D mask to bool) moves nothing between the host
# and the device; the counter lists it as blocking all the same
SAME_DEVICE_CAST = "to(device) blocking"


def batches(tiny, sentences, padded: bool):
    chosen = sentences if padded else [sentences[0]] * 3
    enc = [encode_words(tiny.tokenizer, i, s) for i, s in enumerate(chosen)]
    return list(iter_batches(enc, tiny.tokenizer, torch.device("cpu"), 8, with_words=False))


def syncs(model, batch) -> dict:
    with OpCount() as counted, torch.inference_mode():
        model(**batch.model_inputs(model))
    return {k: v for k, v in counted.where.items() if k[0] != SAME_DEVICE_CAST}


@pytest.fixture()
def accelerator(monkeypatch):
    monkeypatch.setattr(interface, "asks_about_padding", lambda device: False)


@pytest.mark.parametrize("padded", [True, False])
@pytest.mark.parametrize("impl", [attention.ATTN_IMPLEMENTATION, attention.TRAINING_ATTN_IMPLEMENTATION])
def test_no_forward_pass_asks_the_device_about_padding(tiny, sentences, padded, impl, accelerator):
    model = copy.deepcopy(tiny.model)
    model.set_attn_implementation(impl)
    [batch] = batches(tiny, sentences, padded)
    assert bool((batch.attention_mask == 0).any()) == padded
    assert syncs(model, batch) == {}
    stock = copy.deepcopy(tiny.model)
    stock.set_attn_implementation("sdpa")  # transformers' own builder asks (the test can fail)
    assert syncs(stock, batch)


def test_on_the_cpu_the_question_is_kept(tiny, sentences):
    assert interface.asks_about_padding("cpu") and not interface.asks_about_padding("cuda:0")
    [batch] = batches(tiny, sentences, False)
    assert syncs(tiny.model, batch)  # transformers' own skip, as the recorded values had it


@pytest.mark.parametrize("padded", [True, False])
def test_the_maps_equal_transformers_eager_bit_for_bit(tiny, sentences, padded, accelerator):
    [batch] = batches(tiny, sentences, padded)
    stock = copy.deepcopy(tiny.model)
    stock.set_attn_implementation("eager")
    with torch.inference_mode():
        want = stock(**batch.model_inputs(stock), output_attentions=True).attentions
    got = {}
    for _ in attention.forward(tiny.model, [batch], lambda layer, probs: got.__setitem__(layer, probs.clone())):
        pass
    assert len(got) == len(want) and all(torch.equal(got[i], want[i]) for i in range(len(want)))


def test_training_attention_equals_torch_sdpa(tiny, sentences, accelerator):
    [batch] = batches(tiny, sentences, True)
    ours, stock = copy.deepcopy(tiny.model), copy.deepcopy(tiny.model)
    ours.set_attn_implementation(attention.TRAINING_ATTN_IMPLEMENTATION)
    stock.set_attn_implementation("sdpa")
    with torch.inference_mode():
        a = ours(**batch.model_inputs(ours)).last_hidden_state
        b = stock(**batch.model_inputs(stock)).last_hidden_state
    real = batch.attention_mask.bool()
    assert torch.allclose(a[real], b[real], atol=1e-6)
