"""Michel §4.3's speed-up figure is named from the model's file-name-safe slug, not its readable name: a hub name
``org/x`` in the file name would put the figure in a folder that does not exist (and the matrix report assigns a
figure to a model by the slug in its file name)."""
from pathlib import Path
from types import SimpleNamespace

from bertattn_bench.engine.model import ModelInfo
from bertattn_bench.families.speedup import SpeedResult, speedup_figures


def test_speedup_figure_file_is_named_by_slug(tmp_path: Path):
    info = ModelInfo(name="org/some-model", slug="org--some-model", n_layers=2, n_heads=2, max_positions=64,
                     has_mlm_head=False, attn_implementation="bertattn_eager", device="cpu", cls_token_id=1,
                     sep_token_id=2, pad_token_id=0)
    r = SpeedResult(task="mrpc", n_examples=8, n_layers=2, n_heads=2, pruned=["1-1"], heads_per_layer=[1, 2],
                    emptied_layers=[], params_before=100, params_after=90, max_logit_diff=0.0, rounds=2,
                    seconds={16: {"full": [1.0, 1.1], "pruned": [0.8, 0.9]}}, device="cpu", threads=1, tier="regression")
    (path,) = speedup_figures([SimpleNamespace(result=r, model=info)], tmp_path)
    assert path == tmp_path / "speedup-org--some-model-mrpc.png" and path.is_file()
