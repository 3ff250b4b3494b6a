"""The one checkpoint cache (GLUE and ARCT fine-tunes): complete only with weights and meta, saved atomically."""
import torch

from bertattn_bench.training import checkpoints


def test_checkpoint_round_trip_and_what_counts_as_complete(tmp_path):
    d = checkpoints.checkpoint_dir(tmp_path, "finetune", "tiny", "mrpc-seed0", {"seed": 0, "recipe": {"epochs": 1}})
    assert d.parent == tmp_path / "finetune" / "tiny" and d.name.startswith("mrpc-seed0-")
    assert d != checkpoints.checkpoint_dir(tmp_path, "finetune", "tiny", "mrpc-seed0", {"seed": 1, "recipe": {"epochs": 1}})
    model = torch.nn.Linear(3, 2)
    with checkpoints.locked(d):
        assert checkpoints.complete_meta(d) is None
        checkpoints.start(d, force=False, leftovers=("partial-state.pt",))
        (d / "partial-state.pt").write_text("resumable")
        assert checkpoints.complete_meta(d) is None  # training state alone is not a checkpoint
        checkpoints.save(d, model, {"seed": 0}, ("partial-state.pt",))
    assert checkpoints.complete_meta(d) == {"seed": 0}
    assert not (d / "partial-state.pt").exists() and not list(d.glob("*.tmp*"))
    other = torch.nn.Linear(3, 2)
    checkpoints.load_weights(d, other, "cpu")
    assert torch.equal(other.weight, model.weight) and torch.equal(other.bias, model.bias)
    (d / checkpoints.WEIGHTS).unlink()
    assert checkpoints.complete_meta(d) is None  # meta without weights: incomplete for a GLUE checkpoint
    assert checkpoints.complete_meta(d, need_weights=False) == {"seed": 0}  # an ARCT run is judged by its scores
    (d / "partial-state.pt").write_text("stale")
    checkpoints.start(d, force=True, leftovers=("partial-state.pt",))
    assert not (d / "partial-state.pt").exists()


def test_trained_is_the_whole_sequence_train_once_then_found(tmp_path):
    """Issue 62: the one sequence both fine-tunes go through. Trained once (the trainer sees the folder, where its
    state files are), then found complete without training; a run read without weights (ARCT: ``load`` None) needs no
    weights file; ``force`` trains again, dropping the state files first; ``kept`` survive the save; no cache
    (``directory`` None): trained each time, nothing written."""
    d = checkpoints.checkpoint_dir(tmp_path, "finetune", "tiny", "mrpc-seed0", {"seed": 0})
    calls, loads = [], []

    def train(directory):
        calls.append(directory)
        if directory is not None:
            assert not (directory / "stale.pt").exists() or len(calls) == 1  # force dropped it before training
            for name in (checkpoints.STATE, "epochs.json"):
                (directory / name).write_text("state")
        return torch.nn.Linear(2, 1), {"n": len(calls)}

    def load(directory):
        loads.append(directory)
        model = torch.nn.Linear(2, 1)
        checkpoints.load_weights(directory, model, "cpu")
        return model

    first = checkpoints.trained(d, train, load, state_files=(checkpoints.STATE, "epochs.json"), kept=("epochs.json",))
    assert calls == [d] and not first.cached and first.meta == {"n": 1} and loads == []
    assert not (d / checkpoints.STATE).exists() and (d / "epochs.json").is_file()  # the state dropped, kept kept
    hit = checkpoints.trained(d, train, load)
    assert hit.cached and hit.meta == {"n": 1} and calls == [d] and loads == [d]
    assert torch.equal(hit.model.weight, first.model.weight)
    (d / checkpoints.WEIGHTS).unlink()
    scores_only = checkpoints.trained(d, train, None)  # judged by its meta: no weights needed, none read
    assert scores_only.cached and scores_only.model is None and calls == [d]
    retrained = checkpoints.trained(d, train, load)  # weights needed and missing: trained again
    assert not retrained.cached and retrained.meta == {"n": 2} and (d / checkpoints.WEIGHTS).is_file()
    (d / checkpoints.STATE).write_text("stale")
    forced = checkpoints.trained(d, train, load, force=True)
    assert not forced.cached and forced.meta == {"n": 3} and len(calls) == 3
    none = checkpoints.trained(None, train, load)
    assert not none.cached and calls[-1] is None and none.meta == {"n": 4}


def test_sources_version_follows_the_code_and_an_alias_names_moved_code_only(monkeypatch):
    """The code part of a key: the trainer's version and its modules' hash; an entry of SAME_CODE_AS turns the exact
    version it names (moved code) into the earlier one, and nothing else; the checkpoint module is not in it."""
    from bertattn_bench.base import hashing

    module = "bertattn_bench.training.glue_finetune"
    monkeypatch.setattr(checkpoints, "SAME_CODE_AS", {})
    ours = checkpoints.sources_version(module, "1")
    assert ours.startswith("1-") and checkpoints.sources_version(module, "2") == "2-" + ours.split("-", 1)[1]
    assert checkpoints.__name__ not in hashing.module_closure(
        module, exclude=hashing.KEY_ONLY_MODULES + checkpoints.NOT_IN_KEY)
    monkeypatch.setattr(checkpoints, "SAME_CODE_AS", {ours: "1-earlier"})
    assert checkpoints.sources_version(module, "1") == "1-earlier"
    assert checkpoints.sources_version(module, "2") != "1-earlier"  # another version: not the aliased code
