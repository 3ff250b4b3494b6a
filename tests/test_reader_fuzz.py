"""Property-based tests of every reader (issue 45): a valid sample of each format, corrupted at random (truncated,
bytes flipped, fields inserted and deleted, lines dropped or repeated, a BOM, CRLF or CR line endings), is read or
refused; the only exception that escapes is the suite's input error (DataError for the data, BenchError for the
suite's own JSON files) naming the file, and the line where the reader reads by line.

Seeded (``derandomize``) and bounded: ``BERTATTN_FUZZ_EXAMPLES`` inputs per reader (default 40; the unit suite
stays within ~30 s), a larger budget by setting it, e.g. ``BERTATTN_FUZZ_EXAMPLES=2000 pytest
tests/test_reader_fuzz.py -s`` (``-s`` shows how many generated inputs each reader survived)."""
from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bertattn_bench.base.errors import BenchError, DataError
from bertattn_bench.base.settings import FUZZ_EXAMPLES_ENV, env

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
BUDGET = int(env(FUZZ_EXAMPLES_ENV) or 40)
FUZZ = settings(max_examples=BUDGET, derandomize=True, deadline=None, database=None, print_blob=False,
                suppress_health_check=list(HealthCheck))
SURVIVED: Counter = Counter()  # reader -> generated bad inputs it read or refused cleanly
REFUSED: Counter = Counter()

# ---- corruptions ---------------------------------------------------------------------------------------------------

OPS = ("truncate", "flip", "insert_field", "delete_field", "delete_line", "repeat_line", "insert_text", "bom", "crlf",
       "cr", "drop_newlines")
FIELD_BITS = [b"\t", b"\t\t", b",", b'"', b"(", b")", b"|", b"{", b"}", b"[", b"]", b"<", b">", b"=", b"-", b"0",
              b"\n", b"#", b":", b"NaN", b"-1", b"999999999999"]


@st.composite
def corrupted(draw, sample: bytes) -> bytes:
    data = bytearray(sample)
    for op in draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=3)):
        n = len(data)
        if op == "truncate":
            del data[draw(st.integers(0, n)):]
        elif op == "flip" and n:
            data[draw(st.integers(0, n - 1))] ^= draw(st.integers(1, 255))
        elif op == "insert_field":
            at = draw(st.integers(0, n))
            data[at:at] = draw(st.sampled_from(FIELD_BITS)) + draw(st.binary(max_size=3))
        elif op == "delete_field":
            seps = [i for i, b in enumerate(data) if b in b"\t,\n "]
            if len(seps) > 1:
                i = draw(st.integers(0, len(seps) - 2))
                del data[seps[i]:seps[i + 1]]
        elif op in ("delete_line", "repeat_line"):
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines[i:i + 1] = [] if op == "delete_line" else [lines[i], lines[i]]
            data = bytearray(b"\n".join(lines))
        elif op == "insert_text":
            at = draw(st.integers(0, n))
            data[at:at] = draw(st.text(max_size=6)).encode("utf-8", "surrogatepass")
        elif op == "bom":
            data[0:0] = b"\xef\xbb\xbf"
        elif op == "crlf":
            data = bytearray(bytes(data).replace(b"\n", b"\r\n"))
        elif op == "cr":
            data = bytearray(bytes(data).replace(b"\n", b"\r"))
        elif op == "drop_newlines":
            data = bytearray(bytes(data).replace(b"\n", b" ", draw(st.integers(1, 3))))
    return bytes(data)


def survives(name: str, read, path: Path, data: bytes, error=DataError, by_line: bool = True) -> None:
    """``read(path)`` on ``data``: a value, or ``error`` naming the file (and a line where the reader reads by line:
    ``file:N``, or a whole-file problem named without one). Anything else escapes and fails the test."""
    path.write_bytes(data)
    try:
        read(path)
    except error as exc:
        text = str(exc)
        assert path.name in text, f"{name}: the error does not name the file: {text}"
        if by_line and re.search(rf"{re.escape(path.name)}:\d+|line \d+", text) is None:
            # a whole-file problem (empty, no sentences, an entity never closed) names no line: allowed, not a crash
            assert re.search(r"empty|no |never closed|not well-formed|expected|lacks|not UTF-8|missing", text), \
                f"{name}: a line problem without its line: {text}"
        REFUSED[name] += 1
    SURVIVED[name] += 1


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module", autouse=True)
def counts():
    yield
    for name in sorted(SURVIVED):
        print(f"\nfuzz {name}: {SURVIVED[name]} generated inputs survived ({REFUSED[name]} refused with the input "
              f"error, the rest read)", end="")


# ---- samples -------------------------------------------------------------------------------------------------------

def conllu_sample() -> bytes:
    from architecture_matrix import toy_conllu

    return toy_conllu("GUM_fuzz_dev").encode()


GLUE_MRPC = ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tThe cat sat on the mat .\tA cat sat on a mat .\n"
             "0\t3\t4\tIt rained .\tThe dog barked .\n1\t5\t6\tWe left early .\tWe went early .\n").encode()
GLUE_STSB = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
             "0\tmain\tf\t2012\t1\ts\ts\tA man plays .\tA man is playing .\t4.2\n"
             "1\tmain\tf\t2012\t2\ts\ts\tIt rains .\tA dog runs .\t0.25\n").encode()
ARCT_HEADER = "#id\twarrant0\twarrant1\tcorrectLabelW0orW1\treason\tclaim\tdebateTitle\tdebateInfo"
ARCT = "\n".join([ARCT_HEADER, "a\twe win\twe lose\t1\tr one\tc one\tt\tinfo", "b\tx y\tz w\t0\tr two\tc two\tt\ti",
                  "c\tp\tq\t1\tr\tc\tt\ti"]).encode() + b"\n"
CLAIM_MAP = b'original,negated\n"we should go","we should not go"\ncats are good,cats are not good\n'
ACCS = b"run_no,seed,train,dev,test\n0,1,0.9,0.7,0.6\n1,2,0.8,0.65,0.55\n"
WIKITEXT = (" \n = Cats = \n \n The cat sat on the mat . It was tired , so it slept . \n \n = = Sub = = \n \n"
            " The dog @-@ barked at 1 @,@ 000 cats . \n \n = Dogs = \n \n It rained . \n").encode()


def litbank_sample() -> bytes:
    sents = [[("Mary", "(0"), ("Brown", "0)"), ("met", ""), ("her", "(3|(0)"), ("sister", "3)"), (".", "")],
             [("She", "(0)"), ("laughed", ""), ("at", ""), ("the", "(5"), ("dog", "5)"), (".", "")]]
    lines = ["#begin document (fuzz_doc); part 0"]
    for sent in sents:
        lines += ["\t".join(["fuzz_doc", "0", str(k), w] + ["_"] * 8 + [c]) for k, (w, c) in enumerate(sent)] + [""]
    return ("\n".join(lines + ["#end document"]) + "\n").encode()


def baseline_sample() -> bytes:
    from bertattn_bench.claims.baselines import BASELINE_DIR

    doc = json.loads(next(iter(sorted(BASELINE_DIR.glob("*.json")))).read_text(encoding="utf-8"))
    doc["results"] = dict(list(doc["results"].items())[:3])
    return json.dumps(doc, indent=1).encode()


def _report_file(name: str) -> bytes:
    """A file of a claims report written by the suite's own writer (claims.json and run.json as a run writes them),
    in a temporary folder removed afterwards."""
    import tempfile

    from test_output_schemas import PROVENANCE, outcome

    from bertattn_bench.report.claims_report import write_report

    with tempfile.TemporaryDirectory(prefix="fuzz-report-") as tmp:
        folder = Path(tmp) / "rep"
        write_report([outcome("t.a"), outcome("t.b", measured=0.1, holds=False, negative_control=True)], folder,
                     provenance=PROVENANCE, matrix=False)
        return (folder / name).read_bytes()


def claims_sample() -> bytes:
    return _report_file("claims.json")


def run_sample() -> bytes:
    return _report_file("run.json")


# ---- one property per reader ---------------------------------------------------------------------------------------

BLIMP = (b'{"sentence_good": "The niece of most senators hasn\'t left.", "one_prefix_prefix": "The niece of most '
         b'senators", "one_prefix_word_good": "hasn\'t", "one_prefix_word_bad": "haven\'t", "UID": "d", "pairID": "0"}\n'
         b'{"two_prefix_prefix_good": "The women", "two_prefix_prefix_bad": "The woman", "two_prefix_word": "meet", '
         b'"UID": "i", "pairID": "1"}\n')


def _readers():
    from bertattn_bench.data import arct_corpus as arct
    from bertattn_bench.data import blimp, glue, litbank, segments, ud
    from bertattn_bench.data import coref_corpus as coref
    from bertattn_bench.data import framenet_corpus as framenet

    return {
        "CoNLL-U (UD)": (lambda p: ud.read_conllu(p), conllu_sample(), "x.conllu", DataError, True),
        "GLUE TSV (MRPC)": (lambda p: glue.read_tsv(p, glue.task("mrpc")), GLUE_MRPC, "dev.tsv", DataError, True),
        "GLUE TSV (STS-B)": (lambda p: glue.read_tsv(p, glue.task("sts-b")), GLUE_STSB, "dev.tsv", DataError, True),
        "ARCT TSV": (lambda p: arct.read_arct(p), ARCT, "dev-full.txt", DataError, True),
        "ARCT claim map CSV": (arct.read_claim_map, CLAIM_MAP, "claims.csv", DataError, True),
        "ARCT accs CSV": (arct.read_accs, ACCS, "accs.csv", DataError, True),
        "FrameNet JSONL": (framenet.read_jsonl, (FIXTURES / "framenet" / "exemplars_toy.jsonl").read_bytes(),
                           "x.jsonl", DataError, True),
        "BLiMP JSONL": (blimp.read_paradigm, BLIMP, "x.jsonl", DataError, True),
        "FrameNet LU XML": (framenet.read_lu_xml, (FIXTURES / "framenet" / "lu_toy.xml").read_bytes(), "lu1.xml",
                            DataError, False),
        "FrameNet frame XML": (lambda p: framenet.read_core_sets(p.parent),
                               (FIXTURES / "framenet" / "frame" / "Commerce_sell.xml").read_bytes(),
                               "Commerce_sell.xml", DataError, False),
        "GUM coreference": (coref.read_gum_document, (FIXTURES / "coref" / "GUM_toy_coref.conllu").read_bytes(),
                            "GUM_fuzz.conllu", DataError, True),
        "LitBank coreference": (litbank.read_litbank_document, litbank_sample(), "fuzz_doc.conll", DataError, True),
        "WikiText": (segments.wikitext_documents, WIKITEXT, "wiki.test.raw", DataError, True),
        "data manifest": (_manifest, manifest_sample(), "manifest.json", DataError, False),
        # the suite's JSON documents: a syntax error names its line, a malformed document its entry
        "baseline JSON": (_baseline, baseline_sample(), "m.json", BenchError, False),
        "claims report JSON": (_claims, claims_sample(), "claims.json", BenchError, False),
        "run.json": (_run, run_sample(), "run.json", BenchError, False),
    }


def manifest_sample() -> bytes:
    """The shipped manifest cut to two corpora of two files each."""
    from importlib import resources

    doc = json.loads(resources.files("bertattn_bench.data").joinpath("manifest.json").read_text(encoding="utf-8"))
    doc["corpora"] = {k: {**v, "files": v["files"][:2]} for k, v in list(doc["corpora"].items())[:2]}
    return json.dumps(doc, indent=1).encode()


def _manifest(p):
    from bertattn_bench.data import decode_text
    from bertattn_bench.data.manifest import manifest_from_text

    manifest_from_text(decode_text(p.read_bytes(), p), str(p))


def _baseline(p):
    from bertattn_bench.claims.baselines import load_baseline_file

    load_baseline_file(p)


def _claims(p):
    from bertattn_bench.report.matrix import build, read_records

    build(read_records(p))  # read and used as the matrix uses it


def _run(p):
    from bertattn_bench.report.claims_report import read_run

    read_run(p.parent)


READERS = list(_readers())


@pytest.mark.parametrize("name", READERS)
def test_the_valid_sample_reads(name, work):
    read, sample, filename, _, _ = _readers()[name]
    folder = work / re.sub(r"\W+", "_", name) / "ok"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / filename).write_bytes(sample)
    read(folder / filename)  # the corruptions start from a file the reader accepts


@pytest.mark.parametrize("name", READERS)
def test_a_corrupted_file_is_read_or_refused_with_the_input_error(name, work):
    read, sample, filename, error, by_line = _readers()[name]
    folder = work / re.sub(r"\W+", "_", name) / "bad"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)

    @FUZZ
    @given(data=corrupted(sample))
    def prop(data):
        survives(name, read, folder / filename, data, error, by_line)

    prop()
    assert SURVIVED[name] >= min(BUDGET, 10)


# ---- what the fuzzing found (kept as plain tests: they fail when the fix is removed, whatever the budget) ---------

def test_an_unknown_encoding_in_an_xml_declaration_is_the_input_error(tmp_path):
    """Found by the property above: a flipped byte in ``encoding="UTF-8"`` made ElementTree raise LookupError."""
    from bertattn_bench.data import framenet_corpus as framenet

    text = (FIXTURES / "framenet" / "lu_toy.xml").read_bytes()
    assert b'encoding="UTF-8"' in text
    path = tmp_path / "lu1.xml"
    path.write_bytes(text.replace(b'encoding="UTF-8"', b'encoding="TTF-8"'))
    with pytest.raises(DataError, match="lu1.xml: not well-formed XML"):
        framenet.read_lu_xml(path)
    frames = tmp_path / "frame"
    frames.mkdir()
    (frames / "Topic.xml").write_bytes((FIXTURES / "framenet" / "frame" / "Topic.xml").read_bytes()
                                       .replace(b'encoding="UTF-8"', b'encoding="TTF-8"'))
    with pytest.raises(DataError, match="Topic.xml: not well-formed XML"):
        framenet.read_core_sets(frames)


def test_a_report_file_that_is_not_utf8_is_the_input_error(tmp_path):
    """Found by the property above: a byte that is not UTF-8 in claims.json / run.json was a UnicodeDecodeError."""
    from bertattn_bench.report.matrix import read_records

    (tmp_path / "claims.json").write_bytes(b'{"schema": "bertattn-bench/claims",\n "x": "\xfb"}')
    with pytest.raises(BenchError, match=r"claims.json: not UTF-8 text \(line 2"):
        read_records(tmp_path)
