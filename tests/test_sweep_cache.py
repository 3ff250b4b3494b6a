"""A seed's sweep kept with its checkpoint (issue 61: more seeds must not mean a longer wait): the regression tier's
seeds 0-2 and a seed-flip check's 1-3 share two seeds' sweeps. A found sweep equals the computed one, reports the
computing run's seconds, and any change of what the logits depend on (the examples, the configurations, the kind, the
pass shape) is another file; a torn file is computed again."""
import numpy as np
import pytest
from toy_glue import write_mrpc

from bertattn_bench.data import glue
from bertattn_bench.training import glue_finetune as finetune
from bertattn_bench.training import sweeps

RECIPE = finetune.Recipe(epochs=1, batch_size=8, lr=1e-3)


@pytest.fixture
def setup(tiny, tmp_path_factory):
    glue_dir = tmp_path_factory.mktemp("glue")
    write_mrpc(glue_dir, 16, 20)
    model = finetune.finetuned(tiny, "mrpc", 0, glue_dir, None, RECIPE).model
    dev = finetune.encode_split(tiny.tokenizer, glue.load_split(glue_dir, "mrpc", "dev"), 128)
    n_l, n_h = tiny.info.n_layers, tiny.info.n_heads
    configs = [[]] + [[(l, h)] for l in range(n_l) for h in range(n_h)]
    return tiny, model, dev, configs


def test_a_found_sweep_is_the_computed_one(setup, tmp_path, monkeypatch):
    tiny, model, dev, configs = setup
    first, secs, found = sweeps.cached_sweep(tmp_path, model, dev, tiny.tokenizer, configs, "uniform", 24, 6)
    assert not found and secs > 0 and len(list((tmp_path / "sweeps").glob("*.npz"))) == 1
    np.testing.assert_array_equal(first, sweeps.sweep(model, dev, tiny.tokenizer, configs, "uniform", 24, 6))
    calls = []
    monkeypatch.setattr(sweeps, "sweep", lambda *a, **k: calls.append(1) or first * 0)
    again, secs2, found2 = sweeps.cached_sweep(tmp_path, model, dev, tiny.tokenizer, configs, "uniform", 24, 6)
    assert found2 and not calls and secs2 == pytest.approx(secs)  # the computing run's time, not the read's
    np.testing.assert_array_equal(again, first)
    # what the logits depend on besides the weights: each is another file (computed, here by the planted sweep)
    for other in (dict(configs=configs[:-1]), dict(kind="mask"), dict(rows=12), dict(dev=dev.__class__(
            dev.examples[:-1], dev.labels[:-1], dev.n_truncated, dev.max_tokens))):
        calls.clear()
        sweeps.cached_sweep(tmp_path, model, other.get("dev", dev), tiny.tokenizer, other.get("configs", configs),
                            other.get("kind", "uniform"), other.get("rows", 24), 6)
        assert calls == [1], other
    assert len(list((tmp_path / "sweeps").glob("*.npz"))) == 5


def test_no_directory_keeps_nothing_and_a_torn_file_is_computed_again(setup, tmp_path):
    tiny, model, dev, configs = setup
    logits, _, found = sweeps.cached_sweep(None, model, dev, tiny.tokenizer, configs, "mask", 24, 6)
    assert not found and not (tmp_path / "sweeps").exists()
    sweeps.cached_sweep(tmp_path, model, dev, tiny.tokenizer, configs, "mask", 24, 6)
    (path,) = (tmp_path / "sweeps").glob("*.npz")
    path.write_bytes(path.read_bytes()[:100])  # a killed writer's file (the writer replaces atomically; a copy may not)
    again, _, found = sweeps.cached_sweep(tmp_path, model, dev, tiny.tokenizer, configs, "mask", 24, 6)
    assert not found
    np.testing.assert_array_equal(again, logits)
    assert sweeps.cached_sweep(tmp_path, model, dev, tiny.tokenizer, configs, "mask", 24, 6)[2]


def test_the_sweep_key_follows_the_code_of_the_logits_only():
    """The key's code part covers the sweep, the task model and the attention engine (an edit there computes the
    sweeps again), and leaves out what cannot change a logit: the timer and the model loader behind it, the settings
    reader with its help texts, the error messages (stop 68: an edited help text recomputed every kept sweep)."""
    from bertattn_bench.base.hashing import KEY_ONLY_MODULES, module_closure

    pkg = "bertattn_bench"
    closure = set(module_closure(f"{pkg}.training.sweeps", exclude=KEY_ONLY_MODULES + sweeps.NOT_IN_SWEEP_KEY))
    for kept in ("training.sweeps", "training.task_model", "engine.attention.interventions",
                 "engine.attention.core", "engine.batching"):
        assert f"{pkg}.{kept}" in closure, kept
    for left in ("base.settings", "base.errors", "engine.passes", "engine.model", "engine.model_info",
                 "base.hashing"):
        assert f"{pkg}.{left}" not in closure, left


def test_pieces_digest_reads_pieces_token_types_and_labels():
    """The one digest of an encoded split (the sweep key's data part, the head-importance memo's rows): each of the
    pieces, their order, the token types and, where given, the labels changes it."""
    from types import SimpleNamespace

    from bertattn_bench.base.hashing import pieces_digest

    a, b = SimpleNamespace(input_ids=[101, 7, 102], token_type_ids=[0, 0, 0]), \
        SimpleNamespace(input_ids=[101, 8, 102], token_type_ids=[0, 0, 0])
    base = pieces_digest([a, b])
    assert pieces_digest([a, b]) == base and len(base) == 64
    assert pieces_digest([b, a]) != base
    assert pieces_digest([a, SimpleNamespace(input_ids=[101, 8, 102], token_type_ids=[0, 1, 1])]) != base
    assert pieces_digest([a, b], [0, 1]) != base and pieces_digest([a, b], [0, 1]) != pieces_digest([a, b], [1, 0])
    assert pieces_digest([a, b], [0, 1]) == pieces_digest([a, b], np.array([0.0, 1.0]))
