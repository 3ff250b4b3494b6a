"""The data fetch's sources beyond one raw file (issue 43): FrameNet's exemplar file rebuilt from LU files (the two
order choices), a per-commit archive streamed from a loopback server in the archive host's URL layout (a corrupted,
a truncated and a tampered archive), many downloads at once interrupted and resumed, a fallback source, every
corpus's licence said before its download, and a run that fetches what the default data folder lacks (and one that
may not). Loopback only (127.0.0.1)."""
from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from shared_data import prepared_data
from test_data_fetch import Mirror, leftovers

from bertattn_bench.base.errors import DataError
from bertattn_bench.data import fetch as fetch_mod
from bertattn_bench.data import manifest as manifest_mod
from bertattn_bench.data.framenet_exemplars import ExemplarBuilder, exemplar_records
from bertattn_bench.data.manifest import Hosts, load_manifest, members_digest, parse_manifest

ROOT = Path(__file__).resolve().parent.parent
COMMIT = "0" * 40
ARCHIVE_PATH = f"example/repo/tar.gz/{COMMIT}"  # the archive host's layout: owner/name/tar.gz/COMMIT


def data_dir() -> Path:
    return prepared_data("framenet_v15/raw_xml_samples/lu/lu675.xml")  # FrameNet's sample LU files


# --- the FrameNet rule ------------------------------------------------------------------------------------------

def lu_xml(lu_id: int, sentences: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?><lexUnit xmlns="http://framenet.icsi.berkeley.edu" ID="{lu_id}" '
            f'name="go.v" POS="V" frame="Motion" frameID="7"><header><frame>'
            f'<FE type="Core" name="Theme"/><FE type="Peripheral" name="Time"/></frame></header>'
            f'{sentences}</lexUnit>').encode("utf-8")


SENTENCE = ('<sentence ID="{sid}"><text>{text}</text><annotationSet status="MANUAL" ID="{aid}">'
            '<layer rank="1" name="Target">{targets}</layer><layer rank="1" name="FE">{fes}</layer>'
            '<layer rank="2" name="FE"><label start="0" end="1" name="Time"/></layer></annotationSet></sentence>')


def test_the_rule_sorts_target_spans_and_fes_by_start_and_keeps_what_source_md_says():
    xml = lu_xml(5, "".join([
        SENTENCE.format(sid=1, aid=11, text="He went back home . ",
                        targets='<label start="8" end="11" name="Target"/><label start="3" end="6" name="Target"/>',
                        fes='<label start="13" end="16" name="Time"/><label start="0" end="1" name="Theme"/>'
                            '<label itype="INI" name="Goal"/>'),
        SENTENCE.format(sid=2, aid=12, text="only peripheral here . ", targets='<label start="0" end="3" name="Target"/>',
                        fes='<label start="5" end="14" name="Time"/>'),  # no Core FE: dropped
        SENTENCE.format(sid=3, aid=13, text=" ".join(["w"] * 16) + " ", targets='<label start="0" end="0" name="Target"/>',
                        fes='<label start="2" end="2" name="Theme"/>'),  # 16 tokens: dropped
        SENTENCE.format(sid=4, aid=14, text="no fe span . ", targets='<label start="0" end="1" name="Target"/>',
                        fes='<label itype="DNI" name="Theme"/>'),  # no spanned FE: dropped
    ]))
    [rec] = exemplar_records(xml, "lu5.xml")
    assert rec["target"] == [[3, 7], [8, 12]]  # sorted by start, end made exclusive
    assert [(f["name"], f["start"], f["end"], f["type"]) for f in rec["fes"]] == [
        ("Theme", 0, 2, "Core"), ("Time", 13, 17, "Peripheral")]
    assert rec["null_instantiated"] == [{"name": "Goal", "type": None, "itype": "INI"}]
    assert (rec["lu_id"], rec["pos"], rec["frame_id"], rec["sent_id"], rec["annoset_id"]) == (5, "V", 7, 1, 11)
    assert list(rec) == ["lu_id", "lu", "pos", "frame", "frame_id", "sent_id", "annoset_id", "annoset_status",
                         "text", "target", "fes", "null_instantiated"]  # the JSONL's key order


def test_the_rule_orders_lu_files_as_a_directory_listing_does():
    one = lambda i: lu_xml(i, SENTENCE.format(sid=i, aid=i, text="a b . ", targets='<label start="0" end="0" name="Target"/>',
                                              fes='<label start="2" end="2" name="Theme"/>'))  # noqa: E731
    b = ExemplarBuilder()
    for i in (100, 2, 10):  # any order in; out: lu10, lu100, lu2 (names sorted as strings, not as numbers)
        b.add(f"fndata-1.5/lu/lu{i}.xml", one(i))
    assert [json.loads(line)["lu_id"] for line in b.result().decode().splitlines()] == [10, 100, 2]


def test_the_rule_on_real_lu_files_gives_the_shipped_jsonl_lines():
    data = data_dir()
    lus = sorted((data / "framenet_v15/raw_xml_samples/lu").glob("lu*.xml"))
    b = ExemplarBuilder()
    for p in reversed(lus):
        b.add(f"fndata-1.5/lu/{p.name}", p.read_bytes())
    ids = [int(p.stem[2:]) for p in sorted(lus, key=lambda p: p.name)]  # 6543, 675, 8776
    shipped = {}
    with open(data / "framenet_v15/lu_exemplars_max15tok.jsonl", "rb") as fh:
        for line in fh:
            lu_id = json.loads(line)["lu_id"]
            if lu_id in ids:
                shipped.setdefault(lu_id, []).append(line)
    assert b.result() == b"".join(line for i in ids for line in shipped[i])  # byte for byte, in this order
    assert len(b.result().splitlines()) == 19


def test_a_broken_lu_file_is_named():
    with pytest.raises(DataError, match=r"fndata-1.5/lu/lu9.xml: not well-formed XML"):
        ExemplarBuilder().add("fndata-1.5/lu/lu9.xml", b"<lexUnit><header>")


# --- archives from the archive host -----------------------------------------------------------------------------

def make_archive(members: dict[str, bytes], top: str = f"repo-{COMMIT}") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        header = tarfile.TarInfo("pax_global_header")  # as git archive writes (the commit id), skipped
        header.size = 0
        tar.addfile(header, io.BytesIO(b""))
        for name, data in members.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def lu_files():
    data = data_dir()
    return {f"fndata-1.5/lu/{p.name}": p.read_bytes() for p in (data / "framenet_v15/raw_xml_samples/lu").glob("*.xml")}


@pytest.fixture
def archive_host(tmp_path, monkeypatch, lu_files):
    """A loopback server in the archive host's layout serving an archive of the three LU files, a README and a file
    outside the members; a manifest whose corpus 'delta' takes the README from the archive and builds its exemplar
    file from the LU members."""
    members = {**lu_files, "fndata-1.5/README.txt": b"FrameNet 1.5 readme\n", "other/x.txt": b"not wanted\n",
               "fndata-1.5/lu/lexUnit.xsl": b"<xsl/>"}
    expected = ExemplarBuilder()
    for name, data in lu_files.items():
        expected.add(name, data)
    jsonl = expected.result()
    root = tmp_path / "host"
    (root / ARCHIVE_PATH).parent.mkdir(parents=True)
    (root / ARCHIVE_PATH).write_bytes(make_archive(members))
    readme = members["fndata-1.5/README.txt"]
    manifest = {"format": 1, "corpora": {"delta": {
        "title": "delta", "repo": "example/repo", "commit": COMMIT, "licence": "test", "restricted": None,
        "citation": "none", "needed_by": {"fam": ["x"]},
        "archives": {"lu": {"members": "fndata-1.5/lu/lu*.xml", "count": len(lu_files),
                            "members_sha256": members_digest((n, hashlib.sha256(d).hexdigest())
                                                             for n, d in lu_files.items()),
                            "member_bytes": sum(map(len, lu_files.values())), "size_hint": 1000}},
        "files": [
            {"path": "delta/README.txt", "size": len(readme), "sha256": hashlib.sha256(readme).hexdigest(),
             "archive": "lu", "member": "fndata-1.5/README.txt"},
            {"path": "delta/exemplars.jsonl", "size": len(jsonl), "sha256": hashlib.sha256(jsonl).hexdigest(),
             "derived": {"rule": "framenet_lu_exemplars", "inputs": [], "archive": "lu", "step": "the rule"}}]}}}
    parsed = parse_manifest(manifest)
    monkeypatch.setattr(manifest_mod, "load_manifest", lambda: parsed)
    monkeypatch.setattr(fetch_mod, "load_manifest", lambda: parsed)
    monkeypatch.setattr(fetch_mod.time, "sleep", lambda s: None)
    with Mirror(root) as m:
        m.jsonl, m.archive = jsonl, (root / ARCHIVE_PATH).read_bytes()
        yield m


def archive_opts(m: Mirror, **kw) -> fetch_mod.Options:
    return fetch_mod.Options(hosts=Hosts(raw=m.url, archive=m.url), progress=False, log=lambda s: None, **kw)


def test_an_archive_is_streamed_once_its_member_extracted_and_the_rule_built(archive_host, tmp_path):
    dest = tmp_path / "data"
    summary = fetch_mod.fetch(dest, None, archive_opts(archive_host))
    assert not summary.failed, summary.failed
    assert summary.fetched == ["delta/README.txt"] and summary.rebuilt == ["delta/exemplars.jsonl"]
    assert (dest / "delta/exemplars.jsonl").read_bytes() == archive_host.jsonl
    assert leftovers(dest) == ["delta/README.txt", "delta/exemplars.jsonl"]  # the archive itself is not kept
    assert [r for r, _ in archive_host.requests] == [ARCHIVE_PATH]  # one request for both files
    assert summary.corpora["delta"].files == 2 and summary.corpora["delta"].bytes == len(archive_host.archive)


def test_a_corrupted_archive_is_retried_then_fails_leaving_nothing(archive_host, tmp_path):
    archive_host.always[ARCHIVE_PATH] = "corrupt"  # a byte flipped inside the gzip stream, on every try
    summary = fetch_mod.fetch(tmp_path / "data", None, archive_opts(archive_host, retries=2))
    [error] = summary.failed
    assert isinstance(error, fetch_mod.FetchError) and "archive lu" in str(error) and "after 3 tries" in str(error)
    assert [r for r, _ in archive_host.requests].count(ARCHIVE_PATH) == 3
    assert leftovers(tmp_path / "data") == []


def test_a_truncated_archive_restarts_cleanly(archive_host, tmp_path):
    archive_host.faults[ARCHIVE_PATH] = ["truncate", "drop"]  # two broken streams, then the whole archive
    summary = fetch_mod.fetch(tmp_path / "data", None, archive_opts(archive_host))
    assert not summary.failed and (tmp_path / "data/delta/exemplars.jsonl").read_bytes() == archive_host.jsonl
    assert [r for r, _ in archive_host.requests].count(ARCHIVE_PATH) == 3
    assert summary.corpora["delta"].bytes == len(archive_host.archive) * 2  # one half + one half + the whole


def test_an_archive_whose_members_differ_is_refused(archive_host, tmp_path, lu_files):
    name = sorted(lu_files)[0]
    changed = {**lu_files, name: lu_files[name].replace(b"</text>", b" </text>", 1)}
    (archive_host.root / ARCHIVE_PATH).write_bytes(make_archive(changed))
    summary = fetch_mod.fetch(tmp_path / "data", None, archive_opts(archive_host))
    [error] = summary.failed
    assert isinstance(error, fetch_mod.ChecksumError) and "members matching fndata-1.5/lu/lu*.xml" in str(error)
    assert leftovers(tmp_path / "data") == []


def test_fetch_archive_requires_every_member_the_manifest_counts(archive_host, tmp_path, lu_files):
    fewer = dict(list(lu_files.items())[1:])
    (archive_host.root / ARCHIVE_PATH).write_bytes(make_archive({**fewer, "fndata-1.5/README.txt": b"x"}))
    summary = fetch_mod.fetch(tmp_path / "data", None, archive_opts(archive_host))
    assert "2 members matching" in str(summary.failed[0])


# --- many downloads at once, interrupted and resumed; a fallback source ------------------------------------------

FILES = {f"many/f{i}.bin": os.urandom(40_000 + i) for i in range(8)}


@pytest.fixture
def many(tmp_path, monkeypatch):
    root = tmp_path / "host"
    for rel, data in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)  # the server strips RAW_PREFIX, the first source's
        (root / rel).write_bytes(data)
        (root / "second/copy" / COMMIT / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "second/copy" / COMMIT / rel).write_bytes(data)
    files = [{"path": p, "size": len(d), "sha256": hashlib.sha256(d).hexdigest(), "source_path": p,
              "fallbacks": [{"repo": "second/copy", "commit": COMMIT, "source_path": p}]} for p, d in FILES.items()]
    parsed = parse_manifest({"format": 1, "corpora": {"many": {
        "title": "many", "repo": "example/repo", "commit": COMMIT, "licence": "CC BY-SA 4.0", "restricted": None,
        "citation": "none", "needed_by": {"fam": ["x"]}, "notice": "share alike", "files": files}}})
    monkeypatch.setattr(manifest_mod, "load_manifest", lambda: parsed)
    monkeypatch.setattr(fetch_mod, "load_manifest", lambda: parsed)
    monkeypatch.setattr(fetch_mod.time, "sleep", lambda s: None)
    with Mirror(root) as m:
        yield m


def test_parallel_downloads_interrupted_then_resumed(many, tmp_path):
    dest = tmp_path / "data"
    for rel in list(FILES)[:5]:
        many.always[rel] = "drop"  # half the file, then the connection reset, on every try
        many.always["second/copy/" + COMMIT + "/" + rel] = "drop"
    first = fetch_mod.fetch(dest, None, archive_opts(many, retries=0, connections=4))
    assert len(first.failed) == 5 and len(first.fetched) == 3
    parts = sorted(p.name for p in dest.rglob("*.part"))
    assert len(parts) == 5  # the halves are kept
    many.always.clear()
    many.requests.clear()
    second = fetch_mod.fetch(dest, None, archive_opts(many, connections=4))
    assert not second.failed and len(second.fetched) == 5 and len(second.present) == 3
    resumed = [rng for _, rng in many.requests if rng]
    assert len(resumed) == 5 and all(rng.startswith("bytes=") and rng != "bytes=0-" for rng in resumed)
    _, problems = manifest_mod.verify(dest)
    assert problems == [] and not list(dest.rglob("*.part"))


def test_the_fallback_source_serves_when_the_first_fails_and_is_named(many, tmp_path, capsys):
    rel = "many/f3.bin"
    (many.root / rel).unlink()  # the first source lost the file (404)
    many.always["many/f5.bin"] = "corrupt"  # the first source serves wrong bytes
    summary = fetch_mod.fetch(tmp_path / "data", None, archive_opts(many))
    assert not summary.failed
    assert summary.served == {rel: "second/copy@000000000000", "many/f5.bin": "second/copy@000000000000"}
    assert any("f3.bin: served by the fallback source second/copy" in line
               for line in fetch_mod.summary_lines(summary))
    # without the fallback (the guard), the same file fails
    (many.root / "second/copy" / COMMIT / rel).unlink()
    summary = fetch_mod.fetch(tmp_path / "other", None, archive_opts(many))
    [error] = summary.failed
    assert str(error).startswith(f"{rel}: every source failed (2)") and "HTTP 404" in str(error)


# --- licences ---------------------------------------------------------------------------------------------------

def test_every_corpus_licence_is_said_before_any_download(many, tmp_path):
    events = []
    original = many.server.RequestHandlerClass.do_GET
    many.server.RequestHandlerClass.do_GET = lambda h: (events.append("request"), original(h))
    opts = archive_opts(many)
    opts.log = lambda s: events.append(s)
    fetch_mod.fetch(tmp_path / "data", None, opts)
    assert events[0] == "NOTE: many (8 files, 0.3 MB): licence: CC BY-SA 4.0; share alike"
    assert events[1:] == ["request"] * 8


def test_the_real_manifest_says_share_alike_no_licence_and_framenet_s_origin():
    m = load_manifest()
    notes = {c.name: fetch_mod.licence_note(c) for c in m.corpora.values()}
    assert all("licence: " in n for n in notes.values())
    assert "share alike" in notes["ud_english_ewt"].lower() and "share alike" in notes["wikitext2_raw"].lower()
    assert "no licence stated" in notes["arct_adversarial"].lower()
    assert "ICSI" in notes["framenet_v15"] and "unofficial redistribution" in notes["framenet_v15"]
    assert "non-commercial" in notes["glue"] and "non-commercial" in notes["gum"]


def test_the_real_manifest_rebuilds_framenet_from_the_pinned_archive():
    fn = load_manifest().corpora["framenet_v15"]
    [entry] = [f for f in fn.files if f.derived]
    archive = fn.archives[entry.derived["archive"]]
    assert entry.derived["rule"] == "framenet_lu_exemplars" and archive.count == 11829
    assert archive.commit == fn.commit and archive.url(Hosts()) == (
        "https://codeload.github.com/dasmith/FrameNet-python/tar.gz/" + fn.commit)
    assert "lu10 before lu100" in entry.derived["step"] and "sorted by start" in entry.derived["step"]


def test_corpora_no_family_reads_leave_the_default_fetch():
    m = load_manifest()
    default = {c.name for c in m.select(None, everything=False)}
    assert "gap_coreference" not in default and "glue" in default and "framenet_v15" in default
    assert {c.name for c in m.select(None)} == set(m.corpora)


# --- a run that fetches what the default data folder lacks ------------------------------------------------------

def test_ensure_data_fetches_into_the_default_folder_and_only_there(many, tmp_path, monkeypatch):
    monkeypatch.setattr(manifest_mod, "family_needs", lambda fam, corpus, paths=None: ["many/f0.bin", "many/f1.bin"])
    home = tmp_path / "home"
    said = []
    opts = archive_opts(many)
    opts.log = said.append
    fetch_mod.ensure_data(home, [("fam", "x")], opts, may_fetch=True)
    assert (home / "many/f0.bin").read_bytes() == FILES["many/f0.bin"] and len(leftovers(home)) == 8
    assert said[0].startswith("data: many not in the data folder") and "--offline" in said[0]
    # offline (or a folder named with --data-dir): never written, one line naming the fetch command
    other = tmp_path / "given"
    other.mkdir()
    with pytest.raises(DataError, match=r"missing corpus many .* fetch it with: python -m bertattn_bench data fetch"):
        fetch_mod.ensure_data(other, [("fam", "x")], opts, may_fetch=False)
    assert leftovers(other) == []
    # a fetch that fails is one error naming what could not be fetched
    many.always["many/f0.bin"] = many.always["second/copy/" + COMMIT + "/many/f0.bin"] = "500"
    with pytest.raises(fetch_mod.FetchError, match=r"could not fetch many into"):
        fetch_mod.ensure_data(tmp_path / "third", [("fam", "x")], archive_opts(many, retries=0), may_fetch=True)


def test_the_real_manifest_gives_glue_files_a_second_source():
    glue = load_manifest().corpora["glue"]
    with_source = [f for f in glue.files if f.source_path]
    assert len(with_source) == 19 and all(f.fallbacks for f in with_source)
    assert all(s.repo not in (f.repo,) and len(s.commit) == 40 for f in with_source for s in f.fallbacks)
    urls = with_source[0].sources()
    assert urls[0][1].startswith("https://raw.githubusercontent.com/") and len(urls) == 1 + len(with_source[0].fallbacks)


def test_two_runs_starting_together_fetch_once(many, tmp_path, monkeypatch):
    """pytest-xdist workers start together: one fetches under the folder's lock, the other waits and finds it."""
    import threading

    monkeypatch.setattr(manifest_mod, "family_needs", lambda fam, corpus, paths=None: ["many/f0.bin"])
    home, errors = tmp_path / "home", []

    def start():
        try:
            fetch_mod.ensure_data(home, [("fam", "x")], archive_opts(many), may_fetch=True)
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    workers = [threading.Thread(target=start) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors and len(leftovers(home)) == 8
    assert len(many.requests) == 8  # each file once
