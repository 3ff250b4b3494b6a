"""GLUE reading and metrics, fine-tuning (seeded, resumable, cached) and the batched sweep, on a tiny model."""
import json

import numpy as np
import pytest
import torch
from toy_glue import MRPC_HEADER, write_mrpc

from bertattn_bench.base.errors import DataError
from bertattn_bench.base.settings import from_environment
from bertattn_bench.data import glue
from bertattn_bench.engine import attention
from bertattn_bench.training import glue_finetune as finetune
from bertattn_bench.training import precision, sweeps, train_loop


@pytest.fixture()
def glue_dir(tmp_path):
    write_mrpc(tmp_path, 48, 20, bare_quote=True)
    q = tmp_path / "glue" / "QNLI"
    q.mkdir()
    (q / "dev.tsv").write_text("index\tquestion\tsentence\tlabel\n0\tWhy?\tBecause.\tentailment\n", encoding="utf-8")
    return tmp_path


def test_reader_keeps_quotes_bom_and_lines(glue_dir):
    rows = glue.load_split(glue_dir, "mrpc", "dev")
    assert len(rows) == 20
    assert rows[0].text_b.startswith('"') and rows[0].source.endswith("dev.tsv:2")
    assert set(r.label for r in rows) <= {0.0, 1.0}


@pytest.mark.parametrize("bad, match", [
    ("1\t1\t2\tonly four fields\n", r"dev.tsv:3: 4 tab-separated fields, the header has 5"),
    ("7\t1\t2\ta\tb\n", r"dev.tsv:3: label '7' is not one of"),
    ("1\t1\t2\t\tb\n", r"dev.tsv:3: empty sentence"),
])
def test_malformed_rows_name_file_and_line(tmp_path, bad, match):
    d = tmp_path / "glue" / "MRPC"
    d.mkdir(parents=True)
    (d / "dev.tsv").write_text(MRPC_HEADER + "1\t1\t2\ta b\tc d\n" + bad, encoding="utf-8")
    with pytest.raises(DataError, match=match):
        glue.load_split(tmp_path, "mrpc", "dev")


def test_missing_column_and_empty_file(tmp_path):
    d = tmp_path / "glue" / "RTE"
    d.mkdir(parents=True)
    (d / "dev.tsv").write_text("index\tsentence1\tlabel\n0\ta\tentailment\n")
    with pytest.raises(DataError, match=r"dev.tsv:1: header lacks column\(s\) \['sentence2'\]"):
        glue.load_split(tmp_path, "rte", "dev")
    (d / "dev.tsv").write_text("")
    with pytest.raises(DataError, match="empty file"):
        glue.load_split(tmp_path, "rte", "dev")
    with pytest.raises(DataError, match="unknown GLUE task 'cola'"):
        glue.task("cola")


def test_metrics_by_hand():
    t = glue.task("mrpc")
    labels = np.array([1, 1, 1, 0, 0])
    preds = np.array([1, 0, 1, 1, 0])
    s = glue.scores(t, preds, labels)
    assert s["acc"] == pytest.approx(60.0)
    assert s["f1"] == pytest.approx(100 * 2 * (2 / 3) * (2 / 3) / (4 / 3))  # precision 2/3, recall 2/3
    assert glue.majority_score(t, labels) == ("1", pytest.approx(60.0))
    assert glue.constant_scores(t, labels)["0"]["acc"] == pytest.approx(40.0)
    assert glue.constant_scores(t, labels)["0"]["f1"] == 0.0
    sts = glue.task("sts-b")
    r = glue.scores(sts, np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 4.0, 6.0, 8.5]))
    assert r["spearman"] == pytest.approx(100.0) and 99 < r["pearson"] < 100
    assert glue.one_example_step(t, 408) == pytest.approx(100 / 408)


def test_epoch_batches_cover_every_example_once(tokenizer):
    enc = [finetune.Encoded(i, [0] * (1 + i % 17), [0] * (1 + i % 17), [-1] * (1 + i % 17), 0) for i in range(103)]
    batches = finetune.epoch_batches(enc, 8, seed=3, pool=4)
    assert sorted(i for b in batches for i in b) == list(range(103))
    assert batches == finetune.epoch_batches(enc, 8, seed=3, pool=4)
    assert batches != finetune.epoch_batches(enc, 8, seed=4, pool=4)


RECIPE = finetune.Recipe(epochs=2, batch_size=8, lr=1e-3)


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_finetune_is_seeded_and_resumes_exactly(tiny, glue_dir, tmp_path, monkeypatch):
    """Same seed → same weights; a run interrupted after epoch 1 and resumed equals an uninterrupted one."""
    a = finetune.finetuned(tiny, "mrpc", 0, glue_dir, None, RECIPE).model
    b = finetune.finetuned(tiny, "mrpc", 0, glue_dir, None, RECIPE).model
    other = finetune.finetuned(tiny, "mrpc", 1, glue_dir, None, RECIPE).model
    wa, wb = _weights(a), _weights(b)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not all(torch.equal(wa[k], v) for k, v in _weights(other).items())
    assert not any(p.requires_grad is False for p in tiny.model.parameters())
    assert all(torch.equal(x, y) for x, y in zip(tiny.model.state_dict().values(),
                                                 finetune.task_model(tiny, glue.task("mrpc"), 0).encoder.state_dict().values()))

    real_train = finetune.train
    calls = {"n": 0}

    def interrupted(model, t, data, tok, recipe, seed, state_path=None, progress=False, desc=""):
        calls["n"] += 1  # run epoch 1 of the 2-epoch schedule (its state saved), then "crash"
        real_train(model, t, data, tok, recipe, seed, state_path, False, desc, stop_after_epoch=1)
        raise KeyboardInterrupt

    cache = tmp_path / "cache"
    monkeypatch.setattr(finetune, "train", interrupted)
    with pytest.raises(KeyboardInterrupt):
        finetune.finetuned(tiny, "mrpc", 0, glue_dir, cache, RECIPE)
    monkeypatch.setattr(finetune, "train", real_train)
    resumed = finetune.finetuned(tiny, "mrpc", 0, glue_dir, cache, RECIPE)
    assert resumed.meta["log"]["resumed_from_epoch"] == 1 and not resumed.cached
    wr = _weights(resumed.model)
    assert all(torch.allclose(wa[k], wr[k], atol=1e-6) for k in wa)
    hit = finetune.finetuned(tiny, "mrpc", 0, glue_dir, cache, RECIPE)
    assert hit.cached and all(torch.equal(wr[k], v) for k, v in _weights(hit.model).items())
    assert not list(cache.rglob("partial-state.pt"))
    meta = json.loads((cache.rglob("meta.json").__next__()).read_text())
    assert meta["n_train"] == 48 and meta["seed"] == 0


def test_the_cpu_optimiser_trains_bit_for_bit_as_the_per_parameter_loop(tiny, glue_dir, monkeypatch):
    """On the CPU the fine-tune's AdamW runs the foreach implementation (faster); its weights equal, bit for bit,
    those of torch's per-parameter loop, the CPU default the recorded baselines were trained with (the fused CPU
    kernel would not: it rounds differently)."""
    opt, _ = train_loop._optimizer(finetune.task_model(tiny, glue.task("mrpc"), 0), RECIPE, 10)
    assert opt.defaults["foreach"] is True and not opt.defaults["fused"]
    ours = _weights(finetune.finetuned(tiny, "mrpc", 0, glue_dir, None, RECIPE).model)
    real = torch.optim.AdamW

    def per_parameter(*args, **kwargs):
        return real(*args, **{**kwargs, "foreach": False, "fused": None})

    monkeypatch.setattr(torch.optim, "AdamW", per_parameter)
    loop = _weights(finetune.finetuned(tiny, "mrpc", 0, glue_dir, None, RECIPE).model)
    assert ours.keys() == loop.keys() and all(torch.equal(ours[k], loop[k]) for k in ours)


def test_checkpoint_key_changes_with_data_recipe_seed(tiny, glue_dir, tmp_path):
    key = lambda **kw: finetune.checkpoint_dir(tmp_path, tiny, "mrpc", kw.get("recipe", RECIPE), kw.get("seed", 0),
                                               glue_dir)
    base = key()
    assert key(seed=1) != base and key(recipe=finetune.Recipe(epochs=3)) != base
    train = glue_dir / "glue" / "MRPC" / "train.tsv"
    train.write_text(train.read_text().replace("\tthe", "\tThe", 1))
    assert key() != base


def test_dev_only_task_is_refused_with_reason(tiny, glue_dir):
    with pytest.raises(DataError, match="QNLI has no train.tsv"):
        finetune.finetuned(tiny, "qnli", 0, glue_dir, None, RECIPE)


def test_sweep_equals_one_configuration_at_a_time(tiny, glue_dir):
    """The batched sweep gives exactly the logits of evaluating each configuration alone (uniform and mask)."""
    from bertattn_bench.engine import attention

    model = finetune.finetuned(tiny, "mrpc", 0, glue_dir, None, RECIPE).model
    dev = finetune.encode_split(tiny.tokenizer, glue.load_split(glue_dir, "mrpc", "dev"), 128)
    n_l, n_h = tiny.info.n_layers, tiny.info.n_heads
    configs = [[]] + [[(l, h)] for l in range(n_l) for h in range(n_h)] + [[(l, h) for h in range(n_h)] for l in range(n_l)]
    for kind in ("uniform", "mask"):
        swept = sweeps.sweep(model, dev, tiny.tokenizer, configs, kind, rows_per_pass=24, examples_per_batch=6)
        assert swept.shape == (len(configs), 20, 2)
        for c in (0, 1, n_h + 2, len(configs) - 2, len(configs) - 1):
            heads = configs[c]
            if kind == "uniform":
                ivs = [attention.Intervention("probs", attention.uniform_attention(heads))]
            else:
                ivs = [attention.gate_heads(attention.zero_heads(n_l, n_h, heads))]
            alone = finetune.predict(model, dev, tiny.tokenizer, batch_size=7, interventions=ivs)
            np.testing.assert_allclose(swept[c], alone, atol=2e-5, rtol=1e-4)
            assert (swept[c].argmax(-1) == alone.argmax(-1)).all()
        assert not np.allclose(swept[1], swept[0])  # disabling a head changes something
        # the device's default pass shape (20 examples: one 16-example batch + a 4-example one) gives the same logits
        np.testing.assert_allclose(sweeps.sweep(model, dev, tiny.tokenizer, configs, kind), swept, atol=2e-5, rtol=1e-4)


def test_mcnemar_exact_by_hand():
    from bertattn_bench.families.disable import mcnemar_exact

    base = np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 1], dtype=bool)
    other = np.array([1, 1, 1, 0, 1, 1, 1, 0, 1, 1], dtype=bool)
    p, lost, gained = mcnemar_exact(base, other)
    assert (lost, gained) == (1, 3)
    assert p == pytest.approx(2 * (1 + 4) / 16)  # two-sided binomial: P(X <= 1 | n=4) * 2
    assert mcnemar_exact(base, base) == (1.0, 0, 0)


@pytest.fixture(scope="module")
def three_layers(tokenizer):
    """A 3-layer, 2-head BERT (random weights, seed 1) with a seeded random task head: configurations first
    intervening in layers 1, 2 and 3 have different plain prefixes to share."""
    from transformers import BertConfig

    from bertattn_bench.engine.model import model_from_config

    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, initializer_range=0.5)
    loaded = model_from_config(config, tokenizer, "tiny3", "tiny3", seed=1, device="cpu")
    return loaded, finetune.task_model(loaded, glue.task("mrpc"), seed=3)


def _rows_per_layer(model):
    """Rows each layer's self-attention computes (a served layer never reaches its attention)."""
    from bertattn_bench.engine import attention

    mods = attention.attention_modules(model)
    rows = [0] * len(mods)
    hooks = [mod.register_forward_hook(lambda m, a, o, i=i: rows.__setitem__(i, rows[i] + o[0].shape[0]))
             for i, mod in enumerate(mods)]
    return rows, hooks


@pytest.mark.parametrize("kind", ["uniform", "mask"])
def test_prefix_shared_sweep_equals_each_configuration_alone(three_layers, glue_dir, kind):
    """Every configuration of the prefix-shared sweep (heads, layers, and multi-layer ones whose first layer
    differs) gives the logits of evaluating it alone through the whole model, and each layer runs only for the
    configurations that intervene at or below it (plus the one plain pass per batch)."""
    from bertattn_bench.engine import attention

    loaded, model = three_layers
    tok = loaded.tokenizer
    dev = finetune.encode_split(tok, glue.load_split(glue_dir, "mrpc", "dev"), 128)
    n_l, n_h = 3, 2
    configs = ([[]] + [[(l, h)] for l in range(n_l) for h in range(n_h)] + [[(l, h) for h in range(n_h)] for l in range(n_l)]
               + [[(2, 1), (1, 0)], [(0, 1), (2, 0)], [(1, 1), (2, 0), (2, 1)]])
    layers = sweeps.encoder_layers(model)
    assert layers is not None and len(layers) == n_l
    rows, hooks = _rows_per_layer(model)
    try:
        swept = sweeps.sweep(model, dev, tok, configs, kind, rows_per_pass=15, examples_per_batch=5)
    finally:
        for h in hooks:
            h.remove()
    whole = sweeps.sweep(model, dev, tok, configs, kind, rows_per_pass=15, examples_per_batch=5, share_prefix=False)
    for c, heads in enumerate(configs):
        if kind == "uniform":
            ivs = [attention.Intervention("probs", attention.uniform_attention(heads))]
        else:
            ivs = [attention.gate_heads(attention.zero_heads(n_l, n_h, heads))]
        alone = finetune.predict(model, dev, tok, batch_size=7, interventions=ivs)
        np.testing.assert_allclose(swept[c], alone, atol=1e-5, rtol=1e-5, err_msg=f"configuration {c}: {heads}")
        np.testing.assert_allclose(whole[c], alone, atol=1e-5, rtol=1e-5, err_msg=f"configuration {c}: {heads}")
        if heads:  # every configuration changes the logits: a skipped intervention would show
            assert np.abs(alone - swept[0]).max() > 1e-2, f"configuration {c} {heads} changes nothing"
    n = len(dev.examples)
    firsts = [min(l for l, _ in c) if c else n_l for c in configs]
    assert rows == [n + n * sum(f <= j for f in firsts) for j in range(n_l)]  # layer j: plain + configs from <= j
    assert sum(rows) == n * sweeps.sweep_layer_passes(configs, n_l)
    assert sweeps.sweep_layer_passes(configs, n_l, share_prefix=False) == len(configs) * n_l


def test_sweep_layers_found_per_architecture(tokenizer, glue_dir):
    """DistilBERT's blocks are found (and its shared sweep equals the whole-model one); ALBERT's shared layer is
    not (its sweep runs every configuration whole)."""
    import architecture_matrix as architectures

    by_label = {a.label: a for a in architectures.MATRIX}
    distil = architectures.build(by_label["DistilBERT"], tokenizer)
    assert len(sweeps.encoder_layers(distil.model)) == distil.info.n_layers
    model = finetune.task_model(distil, glue.task("mrpc"), 0)
    dev = finetune.encode_split(tokenizer, glue.load_split(glue_dir, "mrpc", "dev"), 128)
    configs = [[], [(1, 0)], [(0, 2)], [(1, 0), (1, 3)]]
    for kind in ("uniform", "mask"):
        shared = sweeps.sweep(model, dev, tokenizer, configs, kind, rows_per_pass=16, examples_per_batch=8)
        whole = sweeps.sweep(model, dev, tokenizer, configs, kind, rows_per_pass=16, examples_per_batch=8,
                             share_prefix=False)
        np.testing.assert_allclose(shared, whole, atol=1e-5, rtol=1e-5)
    albert = architectures.build(by_label["ALBERT"], tokenizer)
    assert sweeps.encoder_layers(albert.model) is None
    with pytest.raises(ValueError, match="'uniform' or 'mask'"):
        sweeps.sweep(finetune.task_model(albert, glue.task("mrpc"), 0), None, tokenizer, [[]], "zero")


def test_training_precision_choice(monkeypatch):
    """bf16 autocast only where it pays (a CPU with AMX or AVX512-BF16, by default), an explicit choice wins, and a
    bad value names the variable."""
    r = finetune.Recipe()
    cpu = torch.device("cpu")
    monkeypatch.delenv(precision.PRECISION_ENV, raising=False)
    monkeypatch.setattr(precision, "_cpu_flags", lambda: {"avx512f", "avx2"})
    auto, why = precision.with_precision(r, cpu)  # default: auto
    assert auto.bf16_autocast is False and why.startswith("auto") and "without" in why  # no bf16 units: fp32
    assert precision.with_precision(r, cpu, "recipe")[0] == r  # the recipe's (the recorded baselines' bf16)
    monkeypatch.setattr(precision, "_cpu_flags", lambda: {"avx512f", "avx512_bf16"})
    assert precision.with_precision(r, cpu)[0] == r  # AVX512-BF16 (this project's AMD EPYC): bf16, the same key
    monkeypatch.setattr(precision, "_cpu_flags", lambda: {"amx_bf16", "amx_tile"})
    assert precision.with_precision(r, cpu, "auto")[0].bf16_autocast is True
    monkeypatch.setenv(precision.PRECISION_ENV, "fp32")
    fp32, why = precision.with_precision(r, cpu, from_environment()["precision"])
    assert fp32.bf16_autocast is False and "fp32" in why and fp32.key() != r.key()  # the precision is in the key
    monkeypatch.setenv(precision.PRECISION_ENV, "half")
    with pytest.raises(DataError, match="BERTATTN_FT_PRECISION='half'"):
        precision.with_precision(r, cpu, from_environment()["precision"])


def test_meta_records_precision(tiny, glue_dir, monkeypatch):
    monkeypatch.setenv(precision.PRECISION_ENV, "fp32")
    ft = finetune.finetuned(tiny, "mrpc", 0, glue_dir, None, finetune.Recipe(epochs=1, batch_size=16),
                            precision=from_environment()["precision"])
    assert ft.meta["precision"] == "fp32" and ft.meta["recipe"]["bf16_autocast"] is False


def test_sweep_pass_shape_by_device():
    """A CPU sweep runs narrow passes (16 examples x 4 configurations: 0.93x a plain batch-32 pass per configuration
    on 2 cores, against 1.12x for 256 rows), a GPU wide ones; explicit values win."""
    assert sweeps.pass_shape(torch.device("cpu"), None, None) == (64, 16)
    assert sweeps.pass_shape(torch.device("cuda"), None, None) == (256, 32)
    assert sweeps.pass_shape(torch.device("cpu"), 24, 6) == (24, 6)
    assert sweeps.pass_shape(torch.device("cpu"), None, 8) == (64, 8)


def test_a_model_whose_code_fails_under_bf16_trains_in_fp32(tokenizer, tiny, glue_dir, monkeypatch):
    """transformers' DeBERTa v1 fills masked scores with float32's minimum, which overflows bfloat16 under autocast
    (a fine-tune crashed there): the trainer checks one batch first and falls back to fp32, saying why in the meta.
    A model that runs under bf16 keeps it."""
    import architecture_matrix as architectures

    deberta = architectures.build(next(a for a in architectures.MATRIX if a.model_type == "deberta"), tokenizer)
    t = glue.task("mrpc")
    assert "bfloat16" in finetune.bf16_failure(finetune.task_model(deberta, t, 0), tokenizer).lower()
    assert finetune.bf16_failure(finetune.task_model(tiny, t, 0), tokenizer) is None
    monkeypatch.setenv(precision.PRECISION_ENV, "bf16")
    recipe = finetune.Recipe(epochs=1, batch_size=16)
    chosen = from_environment()["precision"]
    ft = finetune.finetuned(deberta, "mrpc", 0, glue_dir, None, recipe, precision=chosen)
    assert ft.meta["precision"] == "fp32" and "fails in this model's code" in ft.meta["precision_why"]
    assert finetune.finetuned(tiny, "mrpc", 0, glue_dir, None, recipe,
                              precision=chosen).meta["precision"] == "bf16 autocast"


def test_no_step_of_the_training_loop_waits_for_the_device(tiny, glue_dir, monkeypatch):
    """Issue 47 (GPU path): a training step reads nothing back from the device; the epoch's loss is summed there in
    float64 and read once an epoch (the only synchronising operation this package asks for: bb9587e's parent read
    ``float(loss)`` every step). The sum equals Python's float sum of every step's loss exactly (the logged losses
    of the recorded baselines' fine-tunes are unchanged)."""
    import os
    from pathlib import Path

    from bertattn_bench.engine.opcount import OpCount

    t = glue.task("mrpc")
    recipe = finetune.Recipe(epochs=2, batch_size=8, lr=1e-3, bf16_autocast=False)
    data = finetune.encode_split(tiny.tokenizer, glue.load_split(glue_dir, "mrpc", "train"), recipe.max_tokens)
    model = finetune.task_model(tiny, t, 0)
    steps: list = []
    real = finetune.loss_per_example

    def recorded(task, logits, y):
        out = real(task, logits, y)
        steps.append((out.detach(), len(y)))
        return out

    monkeypatch.setattr(train_loop, "loss_per_example", recorded)
    with OpCount() as counted:
        log = finetune.train(model, t, data, tiny.tokenizer, recipe, 0)
    source = Path(train_loop.__file__).read_text().splitlines()
    sites: dict[str, int] = {}  # the source line of each synchronising operation our code asked for -> how many
    for (_, where), n in counted.where.items():
        if f"{os.sep}bertattn_bench{os.sep}" in where:
            file, line = where.rsplit(":", 1)
            assert file == train_loop.__file__, where
            text = source[int(line) - 1].strip()
            sites[text] = sites.get(text, 0) + n
    # allowed: the host generator's order (a CPU tensor by construction), torch's own clipping and optimiser on
    # the CPU (their CUDA paths, fused AdamW included, read nothing back), and the epoch's loss, once an epoch
    allowed = ("torch.randperm(", "clip_grad_norm_(", "opt.step()")
    end = [text for text in sites if "float(total_loss)" in text]
    assert len(end) == 1 and sites[end[0]] == 2 * recipe.epochs, sites  # __float__ and its _local_scalar_dense
    assert all(any(a in text for a in allowed) for text in sites if text not in end), sites
    per_epoch = len(steps) // recipe.epochs
    for epoch in range(recipe.epochs):
        total, seen = 0.0, 0
        for loss, n in steps[epoch * per_epoch:(epoch + 1) * per_epoch]:
            total += float(loss.mean()) * n
            seen += n
        assert log["loss_per_epoch"][epoch] == total / seen  # exactly: the same float64 operations


def test_a_training_epoch_copies_to_the_device_twice_and_no_step_pads_or_asks(tiny, glue_dir, monkeypatch):
    """Issue 47 (GPU path, host time per step): an epoch's batches are padded on the host and copied to the device
    in two copies (the pieces' fields, the labels), not seven per step as padding each batch at its step did
    (6512b3c); a step computes no model signature (the answer is kept per model class). The inputs are, value for
    value and dtype for dtype, the batches padded at their step."""
    from bertattn_bench.engine import batching

    t = glue.task("mrpc")
    recipe = finetune.Recipe(epochs=2, batch_size=8, lr=1e-3, bf16_autocast=False)
    data = finetune.encode_split(tiny.tokenizer, glue.load_split(glue_dir, "mrpc", "train"), recipe.max_tokens)
    model = finetune.task_model(tiny, t, 0)
    copies, asked = [], []
    real_copy, real_asked = batching.to_device, batching._forward_takes_types
    monkeypatch.setattr(batching, "to_device", lambda a, d: copies.append(a.shape) or real_copy(a, d))
    monkeypatch.setattr(train_loop, "to_device", lambda a, d: copies.append(a.shape) or real_copy(a, d))
    batching.takes_token_types(model.encoder)  # the class's answer kept before training
    monkeypatch.setattr(batching, "_forward_takes_types", lambda f: asked.append(f) or real_asked(f))
    log = finetune.train(model, t, data, tiny.tokenizer, recipe, 0)
    assert log["steps"] >= 2 * 3
    assert len(copies) == 2 * recipe.epochs, copies
    assert asked == []  # no signature computed at any step
    batches = finetune.epoch_batches(data.examples, recipe.batch_size, train_loop._epoch_seed(0, 1))
    sent = finetune.epoch_on_device(data, batches, tiny.tokenizer.pad_token_id, "cpu")
    assert len(sent) == len(batches)
    for (inputs, y), idx in zip(sent, batches):
        ref = batching.make_batch([data.examples[i] for i in idx], tiny.tokenizer, "cpu", False)
        for name, want in ref.model_inputs().items():
            assert inputs[name].dtype == want.dtype and torch.equal(inputs[name], want), name
        assert y.dtype == torch.float32 and torch.equal(y, torch.from_numpy(data.labels[idx]))


def test_training_attention_switches_to_fused_attention_on_a_gpu_and_back(tiny):
    """On a GPU the encoder trains with torch's fused attention (transformers' sdpa function under the project's
    name) and is switched back to the project's eager
    attention afterwards, also when training fails; on the CPU nothing changes."""
    model = finetune.task_model(tiny, glue.task("mrpc"), 0)
    ours = model.encoder.config._attn_implementation
    with train_loop._training_attention(model):
        assert model.encoder.config._attn_implementation == ours  # CPU: unchanged
    with train_loop._training_attention(model, on_gpu=True):
        assert model.encoder.config._attn_implementation == attention.TRAINING_ATTN_IMPLEMENTATION
    assert model.encoder.config._attn_implementation == ours
    with pytest.raises(KeyboardInterrupt), train_loop._training_attention(model, on_gpu=True):
        raise KeyboardInterrupt
    assert model.encoder.config._attn_implementation == ours


def test_the_pass_draws_its_importance_subsample_and_owns_its_token_budget(tiny, glue_dir):
    """Issue 62: a family asks the pass for its head-importance examples (GluePass.importance_split): n of the
    fine-tune's training rows drawn without replacement by numpy's generator seeded 10,000 + seed, in file order,
    encoded within the pass's token budget (the recipe's 128 pieces, cut to the model's positions)."""
    from bertattn_bench.training.glue_pass import GluePass, recipe_for

    p = GluePass("prune", "mrpc", "toy", tiny, glue.task("mrpc"), None, (0, 1), "quick", glue_dir, None, [])
    assert p.max_tokens == min(128, tiny.info.max_positions) == finetune.token_budget(tiny) == 64
    rows = glue.load_split(glue_dir, "mrpc", "train")
    assert [r.source for r in p.importance_rows(1)] == [r.source for r in rows]  # 48 rows: all fine-tuned on
    assert recipe_for("mrpc", "quick").max_train is None
    for seed in (0, 1):
        want = sorted(np.random.default_rng(10_000 + seed).choice(len(rows), 10, replace=False))
        got = p.importance_split(seed, 10)
        assert got.sources == [rows[i].source for i in want] and got.max_tokens == 64
        assert got.labels.tolist() == [rows[i].label for i in want]
    assert p.importance_split(0, 10).sources != p.importance_split(1, 10).sources
    assert p.importance_split(0, 100).sources == [r.source for r in rows]  # n over the rows: every row
    assert finetune.seeded_subset(rows, None, 0) == rows and finetune.seeded_subset(rows, 48, 0) == rows
