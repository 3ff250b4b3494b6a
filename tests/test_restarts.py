"""Random restarts of a fine-tune the learned-model guard finds at the majority class (training.glue_pass.
model_finetune): a new run per restart, the first that learned is read, the guard's subject names the restart."""
from types import SimpleNamespace

import pytest

from bertattn_bench.claims import learned
from bertattn_bench.training import glue_finetune, glue_pass


@pytest.fixture
def planted(monkeypatch):
    """Fine-tunes that learn from a planted training seed on; records every training seed run and every guard
    subject."""
    state = {"trained": [], "subjects": [], "learns_from": 0}

    def fake_finetuned(loaded, task, seed, data_dir, cache_dir, recipe, progress=False, precision=None):
        state["trained"].append(seed)
        return glue_finetune.FineTuned(model=None, meta={"path": f"ckpt-{seed}", "seed": seed}, cached=False)

    def fake_check(loaded, t, ft, dev, seed, batch_size=64):
        assert ft.meta["seed"] == seed  # the guard tests the run it is told about
        state["subjects"].append(glue_pass.guard_subject(loaded, t, ft, seed))
        ok = seed >= state["learns_from"]
        return learned.Check(state["subjects"][-1], ok, f"dev acc {80 if ok else 70} vs majority 68.38 (n=408)",
                             1e-5 if ok else 0.3, 80.0 if ok else 70.0, 68.38, 408)

    monkeypatch.setattr(glue_pass.finetune, "finetuned", fake_finetuned)
    monkeypatch.setattr(glue_pass, "guard_dev", lambda *a, **k: None)
    monkeypatch.setattr(glue_pass, "learning_check", fake_check)
    return state


LOADED = SimpleNamespace(info=SimpleNamespace(name="m"))


def _run(seed):
    return glue_pass.model_finetune(LOADED, "mrpc", seed, "data", "cache", glue_finetune.Recipe())


def test_a_run_that_learned_is_read_as_it_is(planted):
    ft = _run(3)
    assert planted["trained"] == [3]
    assert "restart" not in ft.meta
    assert planted["subjects"] == ["m fine-tuned on mrpc (seed 3)"]


def test_restarts_until_one_learns(planted):
    planted["learns_from"] = 2001
    ft = _run(1)
    assert planted["trained"] == [1, 1001, 2001]
    assert (ft.meta["restart"], ft.meta["restart_of"], ft.meta["seed"]) == (2, 1, 2001)
    assert len(ft.meta["restarts_failed"]) == 2 and "seed 1 did not learn" in ft.meta["restarts_failed"][0]
    assert planted["subjects"][-1].startswith("m fine-tuned on mrpc (seed 1, restart 2 of 3: training seed 2001; "
                                              "before it seed 1 did not learn (dev acc 70")
    # a pass asking again with the seed it was given (GluePass.learning) gets the same name for the run read
    from bertattn_bench.data import glue

    assert glue_pass.guard_subject(LOADED, glue.task("mrpc"), ft, 1) == planted["subjects"][-1]


def test_none_learns_the_last_is_read(planted):
    planted["learns_from"] = 10**9
    ft = _run(5)
    assert planted["trained"] == [5 + glue_pass.RESTART_STRIDE * r for r in range(glue_pass.RESTARTS + 1)]
    assert ft.meta["restart"] == glue_pass.RESTARTS  # its claims are then not judged (the guard's check fails)

