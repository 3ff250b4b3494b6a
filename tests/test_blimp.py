"""The BLiMP verb-number reader (bertattn_bench/data/blimp.py): labels by hand on planted pairs, the split, one clear
error naming file and line, and the rule on the real paradigms where the data folder has them."""
import json
import os
from pathlib import Path

import pytest

from bertattn_bench.base.errors import DataError
from bertattn_bench.data import blimp


def one(uid, pid, prefix, good, bad):
    return {"one_prefix_prefix": prefix, "one_prefix_word_good": good, "one_prefix_word_bad": bad, "UID": uid,
            "pairID": str(pid)}


def two(uid, pid, good_prefix, bad_prefix, verb):
    return {"two_prefix_prefix_good": good_prefix, "two_prefix_prefix_bad": bad_prefix, "two_prefix_word": verb,
            "UID": uid, "pairID": str(pid)}


def write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("good,bad,label", [
    ("hasn't", "haven't", 0), ("have", "has", 1), ("isn't", "weren't", 0), ("don't", "doesn't", 1),
    ("were", "was", 1), ("references", "reference", 0), ("reference", "references", 1),
    ("works with", "work with", 0), ("flies", "fly", 0), ("fly", "flies", 1), ("watches", "watch", 0),
    ("sing", "singing", None), ("is", "was", None)])  # same number: no label
def test_the_good_verbs_number_from_the_pair(good, bad, label):
    assert blimp.pair_number(good, bad) == label


def test_two_prefix_pairs_by_the_verb_checked_against_the_nouns(tmp_path):
    rows = [two("p2", 0, "The students", "The student", "perform"),  # plural noun, bare verb: 1
            two("p2", 1, "The child", "The children", "isn't"),  # auxiliary: 0 (irregular nouns: no check)
            two("p2", 2, "The woman", "The women", "cleans"),  # verb form alone: 0
            two("p2", 3, "The girls", "The girl", "irritates"),  # plural noun, singular verb: dropped
            two("p2", 4, "The cashier", "The cashiers", "singing"),  # singular noun, 'plural' form: dropped
            two("p2", 5, "The boss", "The bosses", "discuss")]  # -ss is no -s: plural form, noun sg: dropped
    items, dropped = blimp.read_paradigm(write(tmp_path / "p2.jsonl", rows))
    assert [(i.pair_id, i.label) for i in items] == [("0", 1), ("1", 0), ("2", 0)]
    assert dropped == 3
    assert items[0].prefix == "The students" and items[0].verb == "perform"


def test_the_split_by_pair_id_and_the_hard_set(tmp_path):
    data = tmp_path / "data"
    folder = data / blimp.BLIMP_DIR
    folder.mkdir(parents=True)
    for paradigm in blimp.PARADIGMS:
        write(folder / f"{paradigm}.jsonl", [one(paradigm, k, "The cat", "sleeps", "sleep") for k in range(10)]
              + [one(paradigm, 10, "The cat", "sleep", "sleeping")])  # unlabelled
    a = blimp.agreement(data)
    assert len(a.test) == 4 * 2 and {i.pair_id for i in a.test} == {"0", "5"}
    assert len(a.train) == 4 * 8 and len(a.hard) == 2 * 10
    assert all(i.distractor for i in a.hard) and not any(i.distractor for i in a.train + a.test)
    assert sum(a.dropped.values()) == 6 and set(a.dropped) == set(blimp.PARADIGMS)
    assert blimp.agreement(data).test == a.test  # deterministic


@pytest.mark.parametrize("line,message", [
    ("{not json", "not valid JSON"), ("[1, 2]", "expected a JSON object"),
    (json.dumps({"UID": "x", "pairID": "1"}), "missing key"),
    (json.dumps(one("x", "a", "The cat", "sleeps", "sleep")), "'pairID' must be a number"),
    (json.dumps(one("x", 1, "", "sleeps", "sleep")), "'one_prefix_prefix' must be a non-empty string")])
def test_bad_input_is_one_error_naming_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(one("x", 0, "The cat", "sleeps", "sleep")) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=message) as exc:
        blimp.read_paradigm(path)
    assert f"{path}:2" in str(exc.value)
    (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match="empty.jsonl: no pairs"):
        blimp.read_paradigm(tmp_path / "empty.jsonl")


DATA = Path(os.environ.get("BERTATTN_DATA_DIR", "/nonexistent"))


@pytest.mark.skipif(not (DATA / blimp.BLIMP_DIR).is_dir(), reason="no blimp_agreement in the data folder")
def test_the_rule_on_the_real_paradigms():
    """6,000 pairs: 7 unlabelled (6 regular_2 pairs whose verb contradicts the noun, 1 sing/singing); every
    auxiliary-led one-prefix pair is labelled, and the two number classes are near balanced in each split."""
    a = blimp.agreement(DATA)
    assert sum(a.dropped.values()) == 7 and a.dropped["regular_plural_subject_verb_agreement_2"] == 6
    assert len(a.train) + len(a.test) + len(a.hard) == 6000 - 7
    assert len(a.hard) == 1999 and len(a.test) == 798
    for split in (a.train, a.test, a.hard):
        share = sum(i.label for i in split) / len(split)
        assert 0.4 < share < 0.6
