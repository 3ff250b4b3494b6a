"""Text data files (issue 37): a UTF-8 byte-order mark is dropped, an undecodable byte is a DataError naming the file,
the 1-based line and the byte, for every reader (all read through bertattn_bench.data.read_text)."""
import codecs

import pytest

from bertattn_bench.base.errors import DataError
from bertattn_bench.data import read_text
from bertattn_bench.data.arct_corpus import read_arct
from bertattn_bench.data.framenet_corpus import read_jsonl
from bertattn_bench.data.glue import TASKS, read_tsv
from bertattn_bench.data.ud import read_conllu

BOM = codecs.BOM_UTF8
CONLLU = ("# sent_id = 1\n# text = The cat sat.\n"
          "1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n"
          "2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
          "3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_\n\n")


def test_read_text_drops_bom_and_names_line_of_bad_byte(tmp_path):
    p = tmp_path / "f.txt"
    p.write_bytes(BOM + "first\nsecond\n".encode())
    assert read_text(p) == "first\nsecond\n"
    p.write_bytes(b"ok line\nfine\nbad \xff here\n")
    with pytest.raises(DataError) as e:
        read_text(p)
    assert str(e.value).startswith(f"{p}:3: not UTF-8") and "0xff" in str(e.value) and "column 5" in str(e.value)


def test_glue_tsv_with_bom_reads_its_header(tmp_path):
    p = tmp_path / "dev.tsv"
    p.write_bytes(BOM + "sentence\tlabel\na fine film\t1\na dull one\t0\n".encode())
    rows = read_tsv(p, TASKS["sst-2"])
    assert [(r.text_a, r.label) for r in rows] == [("a fine film", 1.0), ("a dull one", 0.0)]


def test_glue_tsv_bad_byte_names_file_and_line(tmp_path):
    p = tmp_path / "dev.tsv"
    p.write_bytes(b"sentence\tlabel\na fine film\t1\na dull \xe9 one\t0\n")
    with pytest.raises(DataError, match=rf"{p}:3: not UTF-8 text: byte 0xe9"):
        read_tsv(p, TASKS["sst-2"])


def test_arct_with_bom_reads_all_columns(tmp_path):
    header = "#id\twarrant0\twarrant1\tcorrectLabelW0orW1\treason\tclaim\tdebateTitle\tdebateInfo"
    p = tmp_path / "dev.txt"
    p.write_bytes(BOM + (header + "\na\tw0\tw1\t1\tr\tc\tt\ti\n").encode())
    (item,) = read_arct(p)
    assert (item.id if hasattr(item, "id") else item[0]) == "a" and item.warrants == ("w0", "w1")


def test_conllu_bom_and_bad_byte(tmp_path):
    p = tmp_path / "en.conllu"
    p.write_bytes(BOM + CONLLU.encode())
    (s,) = read_conllu(p)
    bad = tmp_path / "bad.conllu"
    bad.write_bytes(CONLLU.encode() + CONLLU.replace("cat", "c\xc3t").encode("latin-1"))
    with pytest.raises(DataError, match=rf"{bad}:8: not UTF-8"):
        read_conllu(bad)


def test_framenet_jsonl_bad_byte_names_line(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b"\n\n{\"text\": \"caf\xe9\"}\n")
    with pytest.raises(DataError, match=rf"{p}:3: not UTF-8"):
        read_jsonl(p)
