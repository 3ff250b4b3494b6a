"""scripts/kill_test.py's own logic on known answers: the reference timeline, where a kill moment falls, and the
report comparison that takes out timings and nothing else."""
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("kill_test", ROOT / "scripts" / "kill_test.py")
kt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kt)


def test_a_moment_falls_in_the_test_running_then():
    tl = kt.timeline([(2.0, "b::test_attention_core[x]"), (6.0, "b::test_claim[x-c]")], end=10.0)
    assert tl == [("(start-up: collection, model load)", 0.0, 2.0), ("b::test_attention_core[x]", 2.0, 4.0),
                  ("b::test_claim[x-c]", 6.0, 4.0)]
    assert kt.at(tl, 1.0) == ("(start-up: collection, model load)", 0.5)
    assert kt.at(tl, 5.0) == ("b::test_attention_core[x]", 0.75)
    assert kt.at(tl, 9.0) == ("b::test_claim[x-c]", 0.75)
    assert kt.inside_pass("b::test_attention_core[x]") and not kt.inside_pass("b::test_claim[x-c]")


def test_reports_compare_equal_but_for_timings(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d, date, secs in ((a, "2026-01-01", 1.5), (b, "2026-01-02", 9.25)):
        d.mkdir()
        (d / "run.json").write_text(json.dumps({"date": date, "passes": [{"seconds": secs, "n": 3}]}))
        (d / "claims.md").write_text(f"x: 40 examples in {secs}s = {40 / secs:.1f}/s\nvalue 0.5\n")
    assert kt.compare(a, b) == []
    (b / "claims.md").write_text("x: 40 examples in 9.25s = 4.3/s\nvalue 0.6\n")  # a value moved: found
    (b / "extra.png").write_bytes(b"x")
    assert kt.compare(a, b) == ["only after the kills: extra.png", "differs: claims.md"]
