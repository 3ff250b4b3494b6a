"""Real head removal (Michel et al. §4.3's speed-up): the pruned model computes exactly what the masked model does,
with the expected smaller weights, on a tiny BERT and a tiny DistilBERT built from configs."""
import copy

import numpy as np
import pytest
import torch

from bertattn_bench.base.errors import ModelLoadError
from bertattn_bench.data import glue
from bertattn_bench.engine import attention
from bertattn_bench.engine import head_removal as head_pruning
from bertattn_bench.training import glue_finetune as finetune

SENTS = [("the cat sat on the mat", "a dog ran"), ("red blue", "quickly slowly under the big log today"),
         ("one", "two three four five six seven eight nine ten")]


def _data(tok):
    rows = [glue.Example(a, b, i % 2, f"x:{i}") for i, (a, b) in enumerate(SENTS * 3)]
    return finetune.encode_split(tok, rows, 64)


def _task_model(loaded, seed=0):
    m = finetune.task_model(loaded, glue.task("mrpc"), seed)
    torch.manual_seed(seed)
    with torch.no_grad():  # an informative head (the seeded init is small): logits move with every head
        for p in m.head.parameters():
            p.normal_(0, 1.0)
        for name, p in m.encoder.named_parameters():  # BERT's init zeroes biases: a bias mix-up would go unseen
            if name.endswith("bias") and "LayerNorm" not in name:
                p.normal_(0, 0.5)
    return m.eval()


def _masked(model, tok, data, heads):
    n_l, n_h = int(model.config.num_hidden_layers), int(model.config.num_attention_heads)
    ivs = [attention.gate_heads(attention.zero_heads(n_l, n_h, heads))]
    return finetune.predict(model, data, tok, batch_size=4, interventions=ivs)


HEAD_SETS = [[(0, 1)], [(0, 0), (0, 3), (1, 2)], [(1, 0), (1, 1), (1, 2), (1, 3), (0, 2)]]


@pytest.mark.parametrize("heads", HEAD_SETS)
def test_pruned_equals_masked(tiny, heads):
    model = _task_model(tiny)
    data = _data(tiny.tokenizer)
    want = _masked(model, tiny.tokenizer, data, heads)
    plain = finetune.predict(model, data, tiny.tokenizer)
    assert np.abs(want - plain).max() > 1e-3  # masking these heads changes the logits: the comparison is not vacuous
    pruned = copy.deepcopy(model)
    summary = head_pruning.prune_heads(pruned, heads)
    got = finetune.predict(pruned, data, tiny.tokenizer, batch_size=4)
    np.testing.assert_allclose(got, want, atol=1e-5)
    per_layer = [4 - sum(1 for l, _ in heads if l == layer) for layer in range(2)]
    emptied = [layer for layer, n in enumerate(per_layer) if n == 0]
    assert summary["emptied_layers"] == emptied
    assert summary["heads_per_layer"] == [max(n, 1) for n in per_layer]
    # each removed head takes d rows (+ bias) of Q, K, V and d columns of the output projection (hidden 32, d = 8)
    removed = sum(4 - max(n, 1) for n in per_layer)
    assert summary["params_before"] - summary["params_after"] == removed * (3 * (8 * 32 + 8) + 8 * 32)
    # the unpruned model is untouched
    np.testing.assert_allclose(finetune.predict(model, data, tiny.tokenizer), plain, atol=0)


def test_pruned_keeps_the_right_heads(tiny):
    """The kept rows are the kept heads' own: pruning head 1 of layer 1 leaves Q rows of heads 0, 2, 3."""
    model = _task_model(tiny)
    q = model.encoder.encoder.layer[0].attention.self.query.weight.detach().clone()
    pruned = copy.deepcopy(model)
    head_pruning.prune_heads(pruned, [(0, 1)])
    q2 = pruned.encoder.encoder.layer[0].attention.self.query.weight.detach()
    torch.testing.assert_close(q2, torch.cat([q[0:8], q[16:32]]))
    o = model.encoder.encoder.layer[0].attention.output.dense.weight.detach()
    o2 = pruned.encoder.encoder.layer[0].attention.output.dense.weight.detach()
    torch.testing.assert_close(o2, torch.cat([o[:, 0:8], o[:, 16:32]], 1))


def test_errors(tiny):
    model = _task_model(tiny)
    with pytest.raises(ValueError, match="2-5"):
        head_pruning.prune_heads(copy.deepcopy(model), [(1, 4)])
    pruned = copy.deepcopy(model)
    head_pruning.prune_heads(pruned, [(0, 0)])
    with pytest.raises(ValueError, match="already pruned"):
        head_pruning.prune_heads(pruned, [(0, 1)])


def test_distilbert(tokenizer):
    from transformers import DistilBertConfig

    from bertattn_bench.engine.model import model_from_config

    config = DistilBertConfig(vocab_size=tokenizer.vocab_size, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                              max_position_embeddings=64)
    loaded = model_from_config(config, tokenizer, "tiny-distil", "tiny-distil", seed=0, device="cpu")
    x = tokenizer(["the cat sat on the mat", "a dog"], padding=True, return_tensors="pt")
    enc = loaded.model.eval()
    with torch.inference_mode():
        with attention.attention_run(enc, head_gates=attention.zero_heads(2, 4, [(0, 2), (1, 0), (1, 3)])):
            want = enc(input_ids=x.input_ids, attention_mask=x.attention_mask).last_hidden_state
        pruned = copy.deepcopy(enc)
        head_pruning.prune_heads(pruned, [(0, 2), (1, 0), (1, 3)])
        got = pruned(input_ids=x.input_ids, attention_mask=x.attention_mask).last_hidden_state
    mask = x.attention_mask.bool()
    torch.testing.assert_close(got[mask], want[mask], atol=1e-5, rtol=1e-5)
    assert head_pruning.head_counts(pruned) == [3, 2]


def test_albert_is_refused(tokenizer):
    from transformers import AlbertConfig

    from bertattn_bench.engine.model import model_from_config

    config = AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    loaded = model_from_config(config, tokenizer, "tiny-albert", "tiny-albert", seed=0, device="cpu")
    with pytest.raises(ModelLoadError, match="shares one attention module"):
        head_pruning.prune_heads(loaded.model, [(0, 0)])


def test_time_interleaved_alternates_and_warms_up():
    calls = []

    class Fake(torch.nn.Module):
        def __init__(self, name):
            super().__init__()
            self.name = name

        def forward(self, **inputs):
            calls.append((self.name, inputs["b"]))

    from bertattn_bench.families import speedup

    out = speedup.time_interleaved({"full": Fake("full"), "pruned": Fake("pruned")},
                                   {1: [{"b": 1}], 16: [{"b": 16}]}, rounds=2, device="cpu")
    assert calls[:4] == [("full", 1), ("pruned", 1), ("full", 16), ("pruned", 16)]  # warm-up, untimed
    assert calls[4:] == [("full", 1), ("pruned", 1), ("full", 16), ("pruned", 16),
                         ("pruned", 1), ("full", 1), ("pruned", 16), ("full", 16)]
    assert {b: {n: len(v) for n, v in d.items()} for b, d in out.items()} == {1: {"full": 2, "pruned": 2},
                                                                              16: {"full": 2, "pruned": 2}}


def test_speedup_pass_on_a_tiny_model(tiny, tmp_path, monkeypatch):
    """The pass end to end: the least important half of the heads removed, pruned = masked, every batch size timed
    in every round; the claim's metric reads the fastest round of each model."""
    from bertattn_bench.families import prune as pruning
    from bertattn_bench.families import speedup

    d = tmp_path / "glue" / "MRPC"
    d.mkdir(parents=True)
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    rows = [f"{i % 2}\t{i}\t{i + 100}\t{a}\t{b}\n" for i, (a, b) in enumerate(SENTS * 6)]
    for split in ("train", "dev"):
        (d / f"{split}.tsv").write_text(header + "".join(rows), encoding="utf-8")
    model = _task_model(tiny)
    monkeypatch.setattr(finetune, "finetuned", lambda *a, **k: finetune.FineTuned(copy.deepcopy(model), {}, True))
    sp = speedup.prepare_speedup(tiny, tmp_path, "mrpc", options={"tier": "regression", "cache_dir": None})
    sp.reason = None  # the tiny model counts as random-init: the regression tier would skip it
    r = sp.run().result
    imp = pruning.normalize_by_layer(pruning.head_importance(model, glue.task("mrpc"), pruning.importance_data(sp, 0),
                                                             tiny.tokenizer)[0])
    want = pruning.order_from_scores(imp)[:4]
    assert r.pruned == [attention.head_name(l, h) for l, h in want]
    assert sum(r.heads_per_layer) + len(r.emptied_layers) == 8 - 4 + len(r.emptied_layers)
    assert r.max_logit_diff < 1e-5 and r.n_examples == 18 and r.rounds == 3
    assert sorted(r.seconds) == [1, 16, 64]
    assert all(len(v) == 3 and min(v) > 0 for d in r.seconds.values() for v in d.values())
    r.seconds[16] = {"full": [3.0, 2.0, 4.0], "pruned": [2.0, 1.0, 4.0]}  # fastest 2.0 vs 1.0 -> +100% (median ratio +50%)

    class PR:
        result = r

    m = speedup.prune_speedup(PR, batch=16)
    assert m.value == pytest.approx(100.0) and m.n == 18 and "batch 64" in m.detail
