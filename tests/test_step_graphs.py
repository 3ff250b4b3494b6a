"""The fine-tune's step replayed per batch shape (issue 47's GPU path, ``training/step_graphs.py``). A CUDA capture
needs a GPU; everything around it (the first eager step, the persistent gradients zeroed in place, the per-shape
input buffers and their copies, the epoch's loss sum, the fallback) is checked on the CPU with a stand-in capture
whose replay runs the recorded step again: training through it must equal plain training exactly."""
import contextlib

import numpy as np
import pytest
import torch
from toy_glue import write_mrpc

from bertattn_bench.data import glue
from bertattn_bench.engine.batching import padded
from bertattn_bench.training import glue_finetune as finetune
from bertattn_bench.training import step_graphs, train_loop


@pytest.fixture()
def glue_dir(tmp_path):
    return write_mrpc(tmp_path, 48, 20, bare_quote=True)


def _trained(tiny, glue_dir, **recipe_fields):
    t = glue.task("mrpc")
    recipe = finetune.Recipe(epochs=2, batch_size=8, lr=1e-3, bf16_autocast=False, **recipe_fields)
    data = finetune.encode_split(tiny.tokenizer, glue.load_split(glue_dir, "mrpc", "train"), recipe.max_tokens)
    model = finetune.task_model(tiny, t, 0)
    log = finetune.train(model, t, data, tiny.tokenizer, recipe, 0)
    return model, log, data, recipe


def _same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return set(sa) == set(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_replayed_steps_train_exactly_as_plain_steps(tiny, glue_dir, monkeypatch):
    """With a capture that replays by running the step again, the shape graphs' training (first step eager, the
    rest through each shape's buffers) gives the plain loop's weights and losses exactly: a batch not copied into
    its shape's buffers, gradients accumulated across steps, or a loss sum not reset per epoch would not."""
    plain, plain_log, data, recipe = _trained(tiny, glue_dir)
    captures, warmups = [], []

    class Recording:  # the CUDA capture's interface: a call per capture, the first step inside warmup()
        def __call__(self, fn):
            captures.append(fn)
            return step_graphs.eager_capture(fn)

        @contextlib.contextmanager
        def warmup(self):
            warmups.append(("in", len(captures)))
            yield
            warmups.append("out")

    monkeypatch.setattr(step_graphs, "capture_for", lambda device: Recording())
    graphed, log, _, _ = _trained(tiny, glue_dir, step_graphs=True)
    assert warmups == [("in", 0), "out"]  # once, around the first step, before any capture
    assert _same_weights(plain, graphed)
    assert log["loss_per_epoch"] == plain_log["loss_per_epoch"]
    shapes = {tuple(inputs["input_ids"].shape)
              for epoch in range(recipe.epochs)
              for inputs, _ in finetune.epoch_on_device(
                  data, finetune.epoch_batches(data.examples, recipe.batch_size, train_loop._epoch_seed(0, epoch)),
                  tiny.tokenizer.pad_token_id, "cpu")}
    g = log["step_graphs"]
    assert g["eager_steps"] == 1 and g["replays"] == log["steps"] - 1 and g["fallback"] is None
    assert g["graphs"] == len(captures) and 1 < g["graphs"] <= len(shapes)  # one capture per shape, none again
    assert all(p.grad is None for p in graphed.parameters())  # the persistent gradients are let go


def test_a_capture_that_fails_leaves_the_step_eager_and_says_why(tiny, glue_dir, monkeypatch):
    plain, plain_log, _, _ = _trained(tiny, glue_dir)

    def refuses(fn):
        raise RuntimeError("operation not permitted when stream is capturing\nmore")

    monkeypatch.setattr(step_graphs, "capture_for", lambda device: refuses)
    graphed, log, _, _ = _trained(tiny, glue_dir, step_graphs=True)
    assert _same_weights(plain, graphed) and log["loss_per_epoch"] == plain_log["loss_per_epoch"]
    g = log["step_graphs"]
    assert g["fallback"] == "RuntimeError: operation not permitted when stream is capturing"
    assert g["graphs"] == 0 and g["replays"] == 0 and g["eager_steps"] == log["steps"]


def test_on_a_cpu_the_step_stays_eager_and_the_defaults_leave_the_key(tiny, glue_dir):
    assert step_graphs.capture_for(torch.device("cpu")) is None
    plain, _, _, _ = _trained(tiny, glue_dir)
    same, log, _, _ = _trained(tiny, glue_dir, step_graphs=True)
    assert _same_weights(plain, same) and "step_graphs" not in log
    assert "step_graphs" not in finetune.Recipe().key() and "pad_to_multiple" not in finetune.Recipe().key()
    assert finetune.Recipe(step_graphs=True, pad_to_multiple=16).key()["pad_to_multiple"] == 16


def test_padding_to_a_multiple_rounds_up_within_the_cap_and_changes_no_logit(tiny, glue_dir):
    data = finetune.encode_split(tiny.tokenizer, glue.load_split(glue_dir, "mrpc", "dev"), 128)
    examples = data.examples[:5]
    longest = max(len(e.input_ids) for e in examples)
    ids, types, mask = padded(examples, tiny.tokenizer.pad_token_id)
    ids16, types16, mask16 = padded(examples, tiny.tokenizer.pad_token_id, 16, 200)
    assert ids.shape[1] == longest and ids16.shape[1] == -(-longest // 16) * 16 > longest
    assert padded(examples, 0, 16, longest + 1)[0].shape[1] == longest + 1  # never beyond the cap ...
    assert padded(examples, 0, 16, longest - 3)[0].shape[1] == longest  # ... nor below the longest
    assert np.array_equal(ids16[:, :longest], ids) and np.array_equal(mask16[:, :longest], mask)
    assert (ids16[:, longest:] == tiny.tokenizer.pad_token_id).all() and not mask16[:, longest:].any()
    assert not types16[:, longest:].any()
    model = finetune.task_model(tiny, glue.task("mrpc"), 0).eval()
    with torch.inference_mode():
        short = model(torch.from_numpy(ids), torch.from_numpy(mask.astype(np.int64)), torch.from_numpy(types))
        long = model(torch.from_numpy(ids16), torch.from_numpy(mask16.astype(np.int64)), torch.from_numpy(types16))
    torch.testing.assert_close(long, short, rtol=0, atol=1e-5)


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
def test_a_capturable_optimiser_keeps_one_learning_rate_tensor_per_group_that_the_schedule_fills(tiny):
    """A captured step reads the learning rate from a tensor (a float would be frozen into the graph): each group
    has its own, and after every scheduler step it holds the float schedule's value."""
    model = finetune.task_model(tiny, glue.task("mrpc"), 0)
    recipe = finetune.Recipe(lr=1e-3)
    opt_t, sched_t = train_loop._optimizer(model, recipe, 20, capturable=True)
    opt_f, sched_f = train_loop._optimizer(model, recipe, 20)
    lrs = [g["lr"] for g in opt_t.param_groups]
    assert all(isinstance(x, torch.Tensor) for x in lrs) and lrs[0] is not lrs[1]
    assert opt_t.defaults["capturable"] and not opt_f.defaults["capturable"]
    for _ in range(20):
        sched_t.step()
        sched_f.step()
        assert [g["lr"] for g in opt_t.param_groups] == lrs  # the same tensors, filled in place
        for gt, gf in zip(opt_t.param_groups, opt_f.param_groups):
            assert float(gt["lr"]) == pytest.approx(gf["lr"], rel=1e-6, abs=1e-12)


def test_an_underlying_error_is_quoted_in_one_line_even_without_a_message():
    from bertattn_bench.base.errors import one_line

    assert one_line(RuntimeError("first\nsecond")) == "RuntimeError: first"
    assert one_line(ValueError("x" * 500), 10) == "ValueError: " + "x" * 10
    assert one_line(EOFError()) == "EOFError"  # str(exc).splitlines()[0] raised IndexError here
