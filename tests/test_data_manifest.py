"""The data manifest: complete and well-formed, in step with what the family modules read, ``verify`` catching a
changed byte, a truncated or a missing file, the default data folder, and a missing corpus stopping a run at
start-up with one line (exit 4). The checks against the real data folder run where it is (../shared/data or
$BERTATTN_DATA_DIR) and are skipped elsewhere; the rest needs no data."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from shared_data import prepared_data

from bertattn_bench.base.errors import DataError
from bertattn_bench.base.settings import DATA_DIR_ENV, DATA_HOME_ENV, default_data_home, resolve_data_dir
from bertattn_bench.claims.registry import families
from bertattn_bench.data import manifest as manifest_mod
from bertattn_bench.data.manifest import (
    FileEntry,
    family_needs,
    load_manifest,
    missing_files,
    parse_manifest,
    rebuild,
    require_data,
    verify,
)
from bertattn_bench.faces.data_cli import main as data_main

ROOT = Path(__file__).resolve().parent.parent


def real_data() -> Path:
    return prepared_data("glue/")


# --- the manifest itself ------------------------------------------------------------------------------------------

def test_every_entry_is_complete():
    m = load_manifest()
    paths = [f.path for f in m.files]
    assert len(paths) == len(set(paths)) and len(paths) > 1000
    for f in m.files:
        assert f.path.split("/")[0] == f.corpus
        assert re.fullmatch(r"[0-9a-f]{64}", f.sha256) and f.size > 0 and f.checked
        if f.derived:
            assert f.derived["step"] and f.source_url() is None
        else:
            assert f.repo and re.fullmatch(r"[0-9a-f]{40}", f.commit) and f.source_path
    for c in m.corpora.values():
        assert c.licence and c.citation and c.files
    assert "non-commercial" in m.corpora["framenet_v15"].restricted


def test_source_url_is_the_pinned_raw_file_or_the_mirror_layout():
    entry = FileEntry("framenet_v15/frame/Employee's_scenario.xml", 1, "0" * 64, "framenet_v15",
                      repo="dasmith/FrameNet-python", commit="b" * 40,
                      source_path="fndata-1.5/frame/Employee's_scenario.xml")
    assert entry.source_url() == ("https://raw.githubusercontent.com/dasmith/FrameNet-python/" + "b" * 40
                                  + "/fndata-1.5/frame/Employee%27s_scenario.xml")
    assert entry.source_url("http://127.0.0.1:8000/data/") == \
        "http://127.0.0.1:8000/data/framenet_v15/frame/Employee%27s_scenario.xml"


def test_the_families_needs_are_manifest_files_or_folders_of_them():
    """Every path a family's corpus reads (from the family modules' constants) is in the manifest: a family that
    starts reading a new file fails here until the manifest lists it."""
    paths = {f.path for f in load_manifest().files}
    checked = 0
    for fam in families().values():
        for corpus in fam.corpora:
            for need in family_needs(fam.name, corpus):
                checked += 1
                if need.endswith("/"):
                    assert any(p.startswith(need) for p in paths), (fam.name, corpus, need)
                else:
                    assert need in paths, (fam.name, corpus, need)
    assert checked > 100


def test_needed_by_is_what_the_code_reads_now():
    """The manifest's ``needed_by`` (written by scripts/build_data_manifest.py) equals the needs computed today."""
    m = load_manifest()
    now: dict[str, dict[str, list[str]]] = {}
    for fam in sorted(families().values(), key=lambda f: f.name):
        for corpus in fam.corpora:
            for need in family_needs(fam.name, corpus):
                entry = now.setdefault(need.split("/")[0], {}).setdefault(fam.name, [])
                if corpus not in entry:
                    entry.append(corpus)
    assert {n: c.needed_by for n, c in m.corpora.items() if c.needed_by} == now, \
        "the families read other data now: python scripts/build_data_manifest.py --needs-only"


def test_mrpc_train_rule_known_answer():
    train = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n1\t1\t2\tA\tB\r\n0\t3\t4\tC\tD\r\n".encode()
    out = manifest_mod.REBUILD_RULES["glue_mrpc_train"]([train, b"3\t4\n"])
    assert out == "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA\tB\n".encode()


def test_mrpc_train_is_rebuilt_byte_for_byte():
    data = real_data()
    entry = next(f for f in load_manifest().files if f.derived and f.derived["rule"])
    got = rebuild(entry.derived["rule"], data, entry.derived["inputs"])
    assert hashlib.sha256(got).hexdigest() == entry.sha256 and len(got) == entry.size


# --- verify -------------------------------------------------------------------------------------------------------

def test_the_real_data_folder_verifies():
    entries, problems = verify(real_data())
    assert problems == [] and len(entries) == len(load_manifest().files)


def small(tmp_path, monkeypatch) -> Path:
    """A data folder of three files and a manifest naming them (plus one that is missing)."""
    data = tmp_path / "data"
    files = {"c/a.txt": b"alpha\n" * 100, "c/b.txt": b"beta\n" * 100, "c/d.txt": b"delta\n"}
    for rel, content in files.items():
        (data / rel).parent.mkdir(parents=True, exist_ok=True)
        (data / rel).write_bytes(content)
    entries = [{"path": p, "size": len(b), "sha256": hashlib.sha256(b).hexdigest(), "source_path": p}
               for p, b in {**files, "c/missing.txt": b"x"}.items()]
    parsed = parse_manifest({"corpora": {"c": {"title": "c", "licence": "l", "citation": "c", "repo": "o/r",
                                               "commit": "0" * 40, "files": entries}}})
    monkeypatch.setattr(manifest_mod, "load_manifest", lambda: parsed)
    return data


def test_verify_names_a_changed_byte_a_short_file_and_a_missing_one(tmp_path, monkeypatch, capsys):
    data = small(tmp_path, monkeypatch)
    raw = bytearray((data / "c/a.txt").read_bytes())
    raw[3] ^= 1
    (data / "c/a.txt").write_bytes(bytes(raw))
    (data / "c/b.txt").write_bytes((data / "c/b.txt").read_bytes()[:-1])
    _, problems = verify(data)
    assert [(p.path, p.what) for p in problems] == [("c/a.txt", "sha256"), ("c/b.txt", "size"),
                                                    ("c/missing.txt", "missing")]
    assert problems[0].actual == hashlib.sha256(bytes(raw)).hexdigest()
    assert data_main(["verify", str(data)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"ERROR: c/a.txt: sha256 mismatch: expected {problems[0].expected}, got {problems[0].actual}"
    assert len(err) == 3


def test_verify_command_passes_on_good_files_and_refuses_bad_input(tmp_path, monkeypatch, capsys):
    data = small(tmp_path, monkeypatch)
    (data / "c/missing.txt").write_bytes(b"x")
    assert data_main(["verify", str(data)]) == 0
    assert "verified 4 files" in capsys.readouterr().out
    assert data_main(["verify", str(tmp_path / "nope")]) == 4
    assert data_main(["verify", str(data), "--only", "zzz"]) == 4
    assert "ERROR: unknown corpus zzz; known: c" in capsys.readouterr().err


def test_list_shows_present_and_missing(tmp_path, monkeypatch, capsys):
    data = small(tmp_path, monkeypatch)
    assert data_main(["list", "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^c\s+4\s+.*partial 3/4", out, re.M)


# --- the default data folder and the start-up check ---------------------------------------------------------------

def test_default_data_home_and_its_use_by_resolve_data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.delenv(DATA_HOME_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_data_home() == tmp_path / "xdg" / "bertattn-bench" / "data"
    # not there yet: still the folder a run reads (and fills, unless offline); never an error by itself
    assert resolve_data_dir(None) == (tmp_path / "xdg" / "bertattn-bench" / "data").resolve()
    home = tmp_path / "home"
    monkeypatch.setenv(DATA_HOME_ENV, str(home))
    (home / "wikitext2_raw").mkdir(parents=True)
    (home / "wikitext2_raw" / "wiki.test.raw").write_text("x")
    assert resolve_data_dir(None) == home.resolve()
    other = tmp_path / "other"
    other.mkdir()
    (other / "f").write_text("x")
    assert resolve_data_dir(str(other)) == other.resolve()  # --data-dir still wins
    monkeypatch.setenv(DATA_DIR_ENV, str(other))
    assert resolve_data_dir(None) == other.resolve()


def test_missing_corpus_is_one_line_naming_corpus_folder_and_command(tmp_path):
    data = tmp_path / "data"
    (data / "ud_english_ewt").mkdir(parents=True)
    (data / "ud_english_ewt" / "en_ewt-ud-dev.conllu").write_text("x")
    require_data(data, [("dependency", "ewt_dev")])  # present: no error
    with pytest.raises(DataError) as err:
        require_data(data, [("dependency", "ewt_dev"), ("coref", "litbank"), ("framenet", "notebook")])
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("missing corpus litbank_coref, framenet_v15 (e.g. litbank_coref/conll/)")
    assert f"in the data folder {data};" in msg
    assert msg.endswith(f"python -m bertattn_bench data fetch --dest {data} --only litbank_coref framenet_v15")


def test_an_empty_folder_counts_as_missing(tmp_path):
    (tmp_path / "litbank_coref" / "conll").mkdir(parents=True)
    assert missing_files(tmp_path, [("coref", "litbank")]) == {"litbank_coref": ["litbank_coref/conll/"]}


def test_every_family_default_corpus_is_present_in_the_real_data_folder():
    data = real_data()
    targets = [(f.name, c) for f in families().values() for c in f.corpora]
    assert missing_files(data, targets) == {}


BENCH_MODULE = """
FAMILY = "coref"

def test_claim(bench, target):
    raise AssertionError("must not run: the corpus is missing")
"""


def test_a_run_without_its_corpus_stops_at_startup_with_exit_4(pytester, monkeypatch, tmp_path):
    data = tmp_path / "data"
    (data / "wikitext2_raw").mkdir(parents=True)
    (data / "wikitext2_raw" / "wiki.test.raw").write_text("x")
    monkeypatch.setenv(DATA_DIR_ENV, str(data))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pytester.makeconftest('pytest_plugins = ["bertattn_bench.faces.pytest_plugin", "bertattn_bench.faces.short_options"]')
    pytester.makepyfile(test_bench=BENCH_MODULE)
    result = pytester.runpytest_inprocess("--corpus", "coref=litbank")
    lines = [ln for ln in result.outlines + result.errlines if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR: ")]
    assert result.ret == 4, lines
    assert errors == [f"ERROR: missing corpus litbank_coref (e.g. litbank_coref/conll/) in the data folder "
                      f"{data.resolve()}; fetch it with: python -m bertattn_bench data fetch --dest {data.resolve()} "
                      f"--only litbank_coref"], lines
    assert not any("Traceback" in ln for ln in lines)


def test_fetch_refuses_bad_input_with_exit_4(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert data_main(["fetch", "--dest", str(tmp_path / "file"), "--only", "glue"]) == 4
    assert data_main(["fetch", "--only", "nope"]) == 4
    assert data_main(["fetch", "--retries", "-1"]) == 4
    assert data_main(["frobnicate"]) == 4
    errs = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(errs) == 4 and all(ln.startswith("ERROR: ") for ln in errs)


def test_manifest_is_package_data():
    text = (ROOT / "pyproject.toml").read_text()
    assert '"bertattn_bench.data" = ["manifest.json"]' in text
    assert json.loads((ROOT / "bertattn_bench" / "data" / "manifest.json").read_text())["format"] == 1


def test_the_readme_and_docs_totals_are_the_manifest_s():
    m = load_manifest()
    n, mb = len(m.files), f"{sum(f.size for f in m.files) / 1e6:.1f} MB"
    readme = (ROOT / "README.md").read_text()
    assert f"{n:,} files, {mb}" in readme
    assert f"{n} files, {mb}" in (ROOT / "docs" / "data.md").read_text()


def test_claims_by_family_is_the_catalog_s():
    from bertattn_bench.claims.catalog import load_claims

    catalog: dict[str, list[str]] = {}
    for c in load_claims():
        catalog.setdefault(c.family, []).append(c.id)
    written = json.loads((ROOT / "bertattn_bench" / "data" / "manifest.json").read_text())["claims_by_family"]
    assert written == {f: sorted(ids) for f, ids in sorted(catalog.items())}, \
        "the claims catalog changed: python scripts/build_data_manifest.py --needs-only"
