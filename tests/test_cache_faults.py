"""Cache faults (issue 37): a malformed digest index or entry is recomputed with a warning naming the file; a
read-only cache folder is used read-only (hits read, nothing written); an unusable one is named at start-up."""
import json
import warnings
from pathlib import Path

import pytest

from bertattn_bench.base import hashing
from bertattn_bench.base.errors import BenchError, CacheWarning
from bertattn_bench.base.hashing import INDEX_NAME, DigestIndex
from bertattn_bench.runner import cache as cache_mod
from bertattn_bench.runner.cache import PassCache, check_cache_dir


@pytest.mark.parametrize("content", ["[]", "{not json", '"a string"', '{"/x": 5}', '{"/x": [[1, 2], "ab"]}'])
def test_malformed_digest_index_is_rehashed_with_a_warning(tmp_path, content):
    index_path = tmp_path / "cache" / INDEX_NAME
    index_path.parent.mkdir()
    index_path.write_text(content)
    data = tmp_path / "data.txt"
    data.write_text("hello")
    index = DigestIndex(index_path)
    with pytest.warns(CacheWarning, match=str(index_path)):
        digest = index.digest(data)
    assert digest == hashing.sha256_file(data)
    index.flush()  # rewrites the index as an object of good entries
    doc = json.loads(index_path.read_text())
    assert isinstance(doc, dict) and doc[str(data.resolve())][1] == digest
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DigestIndex(index_path).digest(data) == digest  # now clean: no warning


def test_malformed_entry_is_recomputed_with_a_warning_naming_it(tmp_path):
    cache = PassCache(tmp_path)
    path = cache.path("m", "fam", "c", "k")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not an npz at all")
    with pytest.warns(CacheWarning, match=str(path)):
        result, hit = cache.get_or_compute(path, lambda: {"a": 1})
    assert (result, hit) == ({"a": 1}, False)
    assert cache.get_or_compute(path, lambda: {"a": 2}) == ({"a": 1}, True)


def test_read_only_cache_reads_hits_and_writes_nothing(tmp_path, monkeypatch):
    rw = PassCache(tmp_path)
    hit_path = rw.path("m", "fam", "c", "hit")
    rw.get_or_compute(hit_path, lambda: {"a": 1})
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    monkeypatch.setattr(cache_mod, "_writable", lambda d: False)  # root can write anywhere: the test says it cannot
    with pytest.warns(CacheWarning, match=f"cache folder {tmp_path} is read-only"):
        ro = PassCache(tmp_path)
    assert ro.read_only and check_cache_dir(tmp_path) == "read-only"
    assert ro.get_or_compute(hit_path, lambda: {"a": 9}) == ({"a": 1}, True)
    miss = ro.path("m", "fam", "c", "miss")
    assert ro.get_or_compute(miss, lambda: {"b": 2}) == ({"b": 2}, False)
    ro.digests.digest(hit_path)
    ro.digests.flush()
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written, no lock file


def test_unusable_cache_folder_is_named_at_startup(tmp_path):
    assert check_cache_dir(None) == "off"
    assert check_cache_dir(tmp_path / "new") == "read-write" and (tmp_path / "new").is_dir()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(BenchError, match=f"cache folder {a_file} is not a folder"):
        check_cache_dir(a_file)
    with pytest.raises(BenchError, match=f"cache folder {a_file / 'sub'} cannot be created"):
        check_cache_dir(a_file / "sub")


@pytest.mark.parametrize("content", ["{truncated", "[]"])
def test_malformed_checkpoint_meta_is_retrained_with_a_warning(tmp_path, content):
    from bertattn_bench.training.checkpoints import META, WEIGHTS, complete_meta

    (tmp_path / META).write_text(content)
    (tmp_path / WEIGHTS).write_bytes(b"")
    with pytest.warns(CacheWarning, match=f"checkpoint {tmp_path / META}: malformed"):
        assert complete_meta(tmp_path) is None
    (tmp_path / META).write_text('{"epochs": 3}')
    assert complete_meta(tmp_path) == {"epochs": 3}


# ---- cache entries of the wrong kind (issue 45) --------------------------------------------------------------------

def test_a_folder_named_as_the_digest_index_is_set_aside_and_no_temp_file_stays(tmp_path):
    index_path = tmp_path / INDEX_NAME
    index_path.mkdir()
    (index_path / "inside").write_text("kept")
    data = tmp_path / "data.txt"
    data.write_text("hello")
    index = DigestIndex(index_path)
    with pytest.warns(CacheWarning, match="set aside") as caught:
        assert index.digest(data) == hashing.sha256_file(data)
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    index.flush()
    assert index_path.is_file() and str(data.resolve()) in json.loads(index_path.read_text())
    assert (tmp_path / f"{INDEX_NAME}.set-aside-1" / "inside").read_text() == "kept"  # moved, not deleted
    assert not list(tmp_path.glob("*.tmp*"))


def test_a_failed_index_write_leaves_no_temp_file(tmp_path, monkeypatch):
    index = DigestIndex(tmp_path / INDEX_NAME)
    data = tmp_path / "data.txt"
    data.write_text("hello")
    index.digest(data)

    def broken(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(hashing.os, "replace", broken)
    with pytest.raises(OSError):
        index.flush()
    assert not list(tmp_path.glob("*.tmp*"))


@pytest.mark.parametrize("wrong", ["file for the model's folder", "folder for the entry", "folder for the lock"])
def test_cache_paths_of_the_wrong_kind_are_set_aside_with_one_warning(tmp_path, wrong):
    cache = PassCache(tmp_path)
    path = cache.path("m", "fam", "c", "k")
    if wrong == "file for the model's folder":
        path.parent.write_text("not a folder")
    elif wrong == "folder for the entry":
        path.mkdir(parents=True)
    else:
        Path(str(path) + ".lock").mkdir(parents=True)
    with pytest.warns(CacheWarning, match="set aside") as caught:
        assert cache.get_or_compute(path, lambda: {"a": 1}) == ({"a": 1}, False)
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert cache.get_or_compute(path, lambda: {"a": 2}) == ({"a": 1}, True)  # stored this time
    assert list(tmp_path.rglob("*.set-aside-1"))


def test_a_file_where_a_checkpoint_folder_goes_is_set_aside(tmp_path):
    from bertattn_bench.training.checkpoints import locked

    target = tmp_path / "glue" / "m" / "ckpt-1"
    target.parent.parent.mkdir()
    target.parent.write_text("x")
    with pytest.warns(CacheWarning, match="set aside"):
        with locked(target) as d:
            d.mkdir()
    assert target.is_dir() and (tmp_path / "glue" / "m.set-aside-1").is_file()
