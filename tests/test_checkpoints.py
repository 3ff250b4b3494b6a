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
