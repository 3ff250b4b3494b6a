"""Cache faults (issue 37): a malformed digest index or entry is recomputed with a warning naming the file; a
read-only cache folder is used read-only (hits read, nothing written); an unusable one is named at start-up."""
import json
import warnings

import pytest

from bertattn_bench.runner import cache as cache_mod
from bertattn_bench.base.errors import CacheWarning
from bertattn_bench.base import hashing
from bertattn_bench.base.hashing import INDEX_NAME, DigestIndex
from bertattn_bench.runner.cache import PassCache, check_cache_dir
from bertattn_bench.base.errors import BenchError


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
