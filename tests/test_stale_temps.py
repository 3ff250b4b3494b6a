"""Issue 45: what a SIGKILL leaves (an atomic write's ``*.tmp<PID>`` beside its target) is removed by the next run
that writes there; another running process's temporary is left alone."""
import os
import subprocess
import sys

from bertattn_bench.base.documents import remove_stale_temps, write_json
from bertattn_bench.training import checkpoints


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_dead_process_temporaries_are_removed_a_live_ones_kept(tmp_path):
    dead, live = _dead_pid(), os.getppid()
    (tmp_path / f"partial-state.tmp{dead}").write_bytes(b"x")
    (tmp_path / f".claims.json.tmp{dead}").write_text("{")
    (tmp_path / f".report.tmp{dead}").mkdir()
    (tmp_path / f"weights.tmp{live}").write_bytes(b"y")
    (tmp_path / "model.tmpl").write_text("not ours")
    removed = remove_stale_temps(tmp_path)
    assert sorted(p.name for p in removed) == sorted([f"partial-state.tmp{dead}", f".claims.json.tmp{dead}",
                                                      f".report.tmp{dead}"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"weights.tmp{live}", "model.tmpl"])


def test_a_checkpoint_and_a_written_document_clean_their_folder(tmp_path):
    dead = _dead_pid()
    ckpt = tmp_path / "finetune" / "m" / "mrpc-seed0-abc"
    ckpt.mkdir(parents=True)
    (ckpt / f"partial-state.tmp{dead}").write_bytes(b"x")
    with checkpoints.locked(ckpt):
        pass
    assert not list(ckpt.glob("*.tmp*"))
    (tmp_path / f".doc.json.tmp{dead}").write_text("{")
    write_json(tmp_path / "doc.json", {"a": 1})
    assert not list(tmp_path.glob(".*.tmp*"))
