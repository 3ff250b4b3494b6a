"""From nothing to green, small (issue 43): the pytest face on an empty default data folder, with the raw-file and
archive hosts pointed at loopback servers that serve their URL layouts from the prepared data folder
(``scripts/local_hosts.py``), fetches the corpus its selection reads, then runs; its claims equal a run on the
prepared folder; offline, the same run stops at start-up with exit 4 naming the fetch command; a folder named with
``BERTATTN_DATA_DIR`` is never written. The whole run (every corpus, FrameNet rebuilt from its archive) is in
docs/results.md."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from shared_data import prepared_data

ROOT = Path(__file__).resolve().parent.parent
SELECT = ["-k", "dependency and ewt_dev and not negative", "--limit", "40", "--no-cache", "-p", "no:cacheprovider",
          "-q", "--benchmark-disable"]


def prepared() -> Path:
    return prepared_data("ud_english_ewt/en_ewt-ud-dev.conllu")


def local_hosts():
    spec = importlib.util.spec_from_file_location("local_hosts", ROOT / "scripts" / "local_hosts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(tmp: Path, *args: str, **env_extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTATTN_")}
    env.update({"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CI": "1",
                "BERTATTN_DATA_HOME": str(tmp / "home"), "BERTATTN_VALIDATE_OUTPUTS": "1", **env_extra})
    return subprocess.run([sys.executable, "-m", "pytest", "benchmarks", *SELECT, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def values(report: Path) -> list[tuple]:
    records = json.loads((report / "claims.json").read_text())["records"]
    return sorted((r["claim_id"], r["model"], r["corpus"], r["measured"], r["n"], r["verdict"]) for r in records)


def test_an_empty_default_data_folder_is_filled_then_the_run_matches_the_prepared_folder(tmp_path):
    data = prepared()
    with local_hosts().Hosts(data) as hosts:
        fetched = run(tmp_path, "--claims-report", str(tmp_path / "fetched"), **hosts.env())
        served = [path for path, _ in hosts.requests]
    out = fetched.stdout + fetched.stderr
    assert fetched.returncode == 0, out[-3000:]
    assert "data: ud_english_ewt not in the data folder" in out and "NOTE: ud_english_ewt (4 files" in out
    assert "share alike" in out  # its licence, said before the download
    assert sorted(p.relative_to(tmp_path / "home").as_posix() for p in (tmp_path / "home").rglob("*") if p.is_file()) \
        == ["ud_english_ewt/LICENSE.txt", "ud_english_ewt/README.md", "ud_english_ewt/en_ewt-ud-dev.conllu",
            "ud_english_ewt/en_ewt-ud-test.conllu"]  # the corpus the selection reads, nothing else
    assert all(p.startswith("/raw/UniversalDependencies/UD_English-EWT/15d613d8447b3478787d4c278730a1e48a945efb/")
               for p in served) and len(served) == 4
    given = run(tmp_path, "--claims-report", str(tmp_path / "given"), "--offline", BERTATTN_DATA_DIR=str(data))
    assert given.returncode == 0, (given.stdout + given.stderr)[-3000:]
    assert values(tmp_path / "fetched") == values(tmp_path / "given") and len(values(tmp_path / "given")) >= 20


def test_offline_on_an_empty_default_folder_stops_at_start_up_naming_the_fetch_command(tmp_path):
    proc = run(tmp_path, "--offline")
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 4, lines
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    assert len(errors) == 1 and "missing corpus ud_english_ewt" in errors[0], lines
    assert errors[0].endswith("fetch it with: python -m bertattn_bench data fetch --only ud_english_ewt"), lines
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*.conllu"))


def test_a_named_data_folder_is_never_written(tmp_path):
    named = tmp_path / "named"
    (named / "glue").mkdir(parents=True)
    (named / "glue" / "x").write_text("not the corpus this run reads")
    proc = run(tmp_path, BERTATTN_DATA_DIR=str(named),
               BERTATTN_RAW_HOST="http://127.0.0.1:9", BERTATTN_ARCHIVE_HOST="http://127.0.0.1:9")
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 4 and any("missing corpus ud_english_ewt" in ln for ln in lines), lines
    assert sorted(p.name for p in named.rglob("*")) == ["glue", "x"]
