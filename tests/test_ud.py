"""read_conllu and resolve_data_dir on small hand-made inputs with known answers."""
from __future__ import annotations

from pathlib import Path

import pytest

from bertattn_bench.base.errors import BenchError, DataError
from bertattn_bench.base.settings import DATA_DIR_ENV, data_file, resolve_data_dir
from bertattn_bench.data.ud import Sentence, read_conllu


def row(*cols) -> str:
    assert len(cols) == 10, cols
    return "\t".join(str(c) for c in cols)


# Two sentences. Line numbers (1-based) matter for the tests below: sentence 1 starts at line 1, sentence 2 at
# line 11 (after the blank line 10).
GOOD = "\n".join([
    "# sent_id = s1",                                                   # 1
    "# text = I don't go.",                                             # 2
    row(1, "I", "I", "PRON", "PRP", "_", 4, "nsubj", "_", "_"),         # 3
    row("2-3", "don't", "_", "_", "_", "_", "_", "_", "_", "_"),        # 4  multiword token: skipped
    row(2, "do", "do", "AUX", "VBP", "_", 4, "aux", "_", "_"),          # 5
    row(3, "n't", "not", "PART", "RB", "_", 4, "advmod", "_", "_"),     # 6
    row(4, "go", "go", "VERB", "VB", "_", 0, "root", "_", "SpaceAfter=No"),  # 7
    row("4.1", "went", "go", "VERB", "VBD", "_", "_", "_", "4:conj", "_"),   # 8  empty node: skipped
    row(5, ".", ".", "PUNCT", ".", "_", 4, "punct", "_", "_"),          # 9
    "",                                                                 # 10
    "# sent_id = s2",                                                   # 11
    row(1, "Dogs", "dog", "NOUN", "_", "_", 2, "nsubj", "_", "_"),      # 12  XPOS "_"
    row(2, "bark", "bark", "VERB", "VBP", "_", 0, "root", "_", "_"),    # 13
    "",
])


def write(tmp_path: Path, text: str, name: str = "t.conllu") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_good_file_words_heads_and_skipped_tokens(tmp_path):
    path = write(tmp_path, GOOD)
    sents = read_conllu(path)
    assert len(sents) == 2
    s1, s2 = sents
    assert isinstance(s1, Sentence)
    # the multiword token "don't" and the empty node "went" are not words
    assert s1.words == ["I", "do", "n't", "go", "."]
    assert s1.heads == [4, 4, 4, 0, 4]
    assert s1.deprels == ["nsubj", "aux", "advmod", "root", "punct"]
    assert s1.upos == ["PRON", "AUX", "PART", "VERB", "PUNCT"]
    assert s1.xpos == ["PRP", "VBP", "RB", "VB", "."]
    assert s1.sent_id == "s1"
    assert s1.source == f"{path}:1"
    assert s1.comments["text"] == "I don't go."
    assert len(s1.misc) == 5 and s1.misc[3] == {"SpaceAfter": "No"}

    assert s2.words == ["Dogs", "bark"]
    assert s2.heads == [2, 0]
    assert s2.xpos == ["_", "VBP"]
    assert s2.sent_id == "s2"
    assert s2.source == f"{path}:11"


def test_limit_stops_early(tmp_path):
    sents = read_conllu(write(tmp_path, GOOD), limit=1)
    assert [s.sent_id for s in sents] == ["s1"]


def test_crlf_and_no_trailing_newline(tmp_path):
    text = GOOD.strip("\n").replace("\n", "\r\n")
    sents = read_conllu(write(tmp_path, text))
    assert [s.words for s in sents] == [["I", "do", "n't", "go", "."], ["Dogs", "bark"]]
    assert sents[1].source.endswith(":11")


def test_several_blank_lines_between_sentences(tmp_path):
    text = GOOD.replace("\n\n# sent_id = s2", "\n\n\n   \n# sent_id = s2")
    sents = read_conllu(write(tmp_path, text))
    assert len(sents) == 2
    assert sents[1].source.endswith(":13")


def _bad_line(tmp_path, lines_before: list[str], bad: str, after: list[str] | None = None) -> tuple[Path, int]:
    lines = lines_before + [bad] + (after or [])
    path = write(tmp_path, "\n".join(lines) + "\n\n")
    return path, len(lines_before) + 1


# A valid first sentence, then the start of a second one, so the bad line is deep in the file and not the first
# line of its block.
PREFIX = [
    "# sent_id = ok",                                                    # 1
    row(1, "Hi", "hi", "INTJ", "UH", "_", 0, "root", "_", "_"),          # 2
    "",                                                                  # 3
    "# sent_id = bad",                                                   # 4
    row(1, "The", "the", "DET", "DT", "_", 2, "det", "_", "_"),          # 5
    row(2, "cat", "cat", "NOUN", "NN", "_", 3, "nsubj", "_", "_"),       # 6
]


def test_wrong_number_of_columns_names_file_and_line(tmp_path):
    bad = "\t".join(["3", "sat", "sit", "VERB", "VBD", "_", "0", "root", "_"])  # 9 columns
    path, line = _bad_line(tmp_path, PREFIX, bad)
    assert line == 7
    with pytest.raises(DataError) as err:
        read_conllu(path)
    assert f"{path}:7" in str(err.value)
    assert "10" in str(err.value) and "9" in str(err.value)


def test_spaces_instead_of_tabs_is_a_column_error(tmp_path):
    bad = "3 sat sit VERB VBD _ 0 root _ _"
    path, line = _bad_line(tmp_path, PREFIX, bad)
    with pytest.raises(DataError, match="columns") as err:
        read_conllu(path)
    assert f"{path}:{line}" in str(err.value)


def test_wrong_columns_on_multiword_line_is_reported(tmp_path):
    bad = "\t".join(["3-4", "cannot", "_", "_", "_"])
    path, line = _bad_line(tmp_path, PREFIX, bad)
    with pytest.raises(DataError) as err:
        read_conllu(path)
    assert f"{path}:{line}" in str(err.value)


def test_non_integer_head_names_file_and_line(tmp_path):
    bad = row(3, "sat", "sit", "VERB", "VBD", "_", "x", "root", "_", "_")
    path, line = _bad_line(tmp_path, PREFIX, bad, [row(4, ".", ".", "PUNCT", ".", "_", 3, "punct", "_", "_")])
    with pytest.raises(DataError) as err:
        read_conllu(path)
    msg = str(err.value)
    assert f"{path}:7" in msg
    assert "HEAD" in msg and "'x'" in msg


def test_non_integer_word_id_names_file_and_line(tmp_path):
    bad = row("three", "sat", "sit", "VERB", "VBD", "_", 0, "root", "_", "_")
    path, line = _bad_line(tmp_path, PREFIX, bad)
    with pytest.raises(DataError) as err:
        read_conllu(path)
    assert f"{path}:{line}" in str(err.value)


def test_head_out_of_range_names_file_and_exact_line(tmp_path):
    # The third word's HEAD is 9 in a 4-word sentence: the error must point at line 7, the word's own line
    # (not line 4, where the sentence starts).
    bad = row(3, "sat", "sit", "VERB", "VBD", "_", 9, "root", "_", "_")
    path, line = _bad_line(tmp_path, PREFIX, bad, [row(4, ".", ".", "PUNCT", ".", "_", 3, "punct", "_", "_")])
    assert line == 7
    with pytest.raises(DataError) as err:
        read_conllu(path)
    msg = str(err.value)
    assert str(path) in msg and "9" in msg
    assert f"{path}:7" in msg, msg


def test_head_out_of_range_is_a_data_error(tmp_path):
    """Weaker form of the test above: whatever the line, it is a DataError naming the file."""
    bad = row(3, "sat", "sit", "VERB", "VBD", "_", 9, "root", "_", "_")
    path, _ = _bad_line(tmp_path, PREFIX, bad)
    with pytest.raises(DataError, match="out of range") as err:
        read_conllu(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("text", ["", "\n\n\n", "# only = a comment\n# and another\n"])
def test_empty_file_is_a_data_error_naming_the_file(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(DataError) as err:
        read_conllu(path)
    assert str(path) in str(err.value)
    assert "no sentences" in str(err.value)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.conllu"
    with pytest.raises(DataError) as err:
        read_conllu(path)
    assert str(path) in str(err.value)


def test_data_error_is_a_bench_error():
    assert issubclass(DataError, BenchError)


# ---- resolve_data_dir -----------------------------------------------------------------------------------------

def test_resolve_unset_is_the_default_data_folder_even_before_it_exists(monkeypatch, tmp_path):
    """Neither --data-dir nor $BERTATTN_DATA_DIR: the default data folder, which a run fills with what it lacks (issue
    43); its absence is no error here (the start-up check names a missing corpus and the fetch command)."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("BERTATTN_DATA_HOME", str(tmp_path / "none"))
    assert resolve_data_dir(None) == (tmp_path / "none").resolve()
    assert not (tmp_path / "none").exists()  # resolving writes nothing


def test_resolve_empty_string_option_counts_as_unset(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("BERTATTN_DATA_HOME", str(tmp_path / "none"))
    assert resolve_data_dir("") == resolve_data_dir(None) == (tmp_path / "none").resolve()
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "gone"))  # the variable still names a folder that must exist
    with pytest.raises(DataError, match="BERTATTN_DATA_DIR"):
        resolve_data_dir("")


def test_resolve_missing_dir_from_option(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    missing = tmp_path / "no_such_dir"
    with pytest.raises(DataError) as err:
        resolve_data_dir(str(missing))
    msg = str(err.value)
    assert "--data-dir" in msg and str(missing) in msg and "no such directory" in msg


def test_resolve_missing_dir_from_env(monkeypatch, tmp_path):
    missing = tmp_path / "no_such_dir"
    monkeypatch.setenv(DATA_DIR_ENV, str(missing))
    with pytest.raises(DataError) as err:
        resolve_data_dir(None)
    msg = str(err.value)
    assert "BERTATTN_DATA_DIR" in msg and str(missing) in msg


def test_resolve_a_file_is_not_a_dir(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(DataError, match="no such directory"):
        resolve_data_dir(str(f))


def test_resolve_empty_dir(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError) as err:
        resolve_data_dir(str(empty))
    assert "empty" in str(err.value) and str(empty) in str(err.value)
    monkeypatch.setenv(DATA_DIR_ENV, str(empty))
    with pytest.raises(DataError, match="BERTATTN_DATA_DIR.*empty"):
        resolve_data_dir(None)


def test_resolve_ok_from_env_and_option_wins(monkeypatch, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "x").write_text("x")
    monkeypatch.setenv(DATA_DIR_ENV, str(a))
    assert resolve_data_dir(None) == a.resolve()
    assert resolve_data_dir(str(b)) == b.resolve()


def test_data_file_missing_names_path_and_setting(tmp_path):
    with pytest.raises(DataError) as err:
        data_file(tmp_path, "ud_english_ewt/en_ewt-ud-dev.conllu")
    msg = str(err.value)
    assert str(tmp_path / "ud_english_ewt/en_ewt-ud-dev.conllu") in msg
    assert "BERTATTN_DATA_DIR" in msg and "ud_english_ewt/" in msg


def test_word_ids_out_of_order_is_a_data_error(tmp_path):
    bad = row(4, "sat", "sit", "VERB", "VBD", "_", 0, "root", "_", "_")  # ids 1, 2, 4
    path, _ = _bad_line(tmp_path, PREFIX, bad)
    with pytest.raises(DataError, match="1..n") as err:
        read_conllu(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("heads, expect", [
    ((2, 0, 0), "2 words attach to the root"),  # two roots
    ((2, 3, 1), "0 words attach to the root"),  # no root: 1 → 2 → 3 → 1
    ((2, 1, 0), "word 1 reaches a cycle"),  # a root, and a cycle 1 ↔ 2 beside it
])
def test_heads_that_are_not_one_tree_name_file_and_sentence_line(tmp_path, heads, expect):
    words = [row(i, w, w, "NOUN", "NN", "_", h, "dep", "_", "_") for i, (w, h) in enumerate(zip("abc", heads), 1)]
    path = write(tmp_path, "\n".join(PREFIX[:3] + ["# sent_id = loop", *words]) + "\n\n")
    with pytest.raises(DataError, match=expect) as err:
        read_conllu(path)
    assert f"{path}:4" in str(err.value) and "not one tree" in str(err.value)
