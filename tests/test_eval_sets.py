"""Issue 46: a task's evaluation data from the datasets people use: a datasets object or folder, a Parquet, CSV or
JSON Lines file, with a column mapping; the same rows as the shipped TSV reader; bad input named."""
import json

import pytest

from bertattn_bench.base.errors import DataError
from bertattn_bench.data import eval_sets, glue

datasets = pytest.importorskip("datasets")

MRPC = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
ROWS = [(1, "The cat sat.", "A cat sat."), (0, "Dogs bark loudly.", "The market fell."), (1, "It rains.", "Rain falls.")]


@pytest.fixture()
def tsv(tmp_path):
    d = tmp_path / "glue" / "MRPC"
    d.mkdir(parents=True)
    body = "".join(f"{y}\t{i}\t{i + 9}\t{a}\t{b}\n" for i, (y, a, b) in enumerate(ROWS))
    (d / "dev.tsv").write_text(MRPC + body, encoding="utf-8")
    (d / "train.tsv").write_text(MRPC + body, encoding="utf-8")
    return tmp_path


def _plain(rows):
    return [(r.text_a, r.text_b, r.label) for r in rows]


def _hf_dict(labels=None):
    cols = {"sentence1": [a for _, a, _ in ROWS], "sentence2": [b for _, _, b in ROWS],
            "label": labels if labels is not None else [y for y, _, _ in ROWS]}
    return cols


def test_a_datasets_folder_gives_the_tsv_rows(tsv, tmp_path):
    want = _plain(glue.load_split(tsv, "mrpc", "dev"))
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_dict(_hf_dict()),
                               "validation": datasets.Dataset.from_dict(_hf_dict())})
    dd.save_to_disk(str(tmp_path / "mrpc_ds"))
    src = eval_sets.parse_option(f"mrpc={tmp_path / 'mrpc_ds'}")
    assert _plain(eval_sets.rows(src, "dev")) == want
    assert _plain(eval_sets.rows(src, "train")) == want == _plain(eval_sets.train_rows(src))
    assert _plain(eval_sets.rows(eval_sets.of(dd, "mrpc"), "dev", limit=2)) == want[:2]
    assert eval_sets.rows_digest(eval_sets.rows(src)) == eval_sets.rows_digest(glue.load_split(tsv, "mrpc", "dev"))


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_files_with_a_column_mapping(tsv, tmp_path, suffix):
    import pandas as pd

    frame = pd.DataFrame({"a": [a for _, a, _ in ROWS], "b": [b for _, _, b in ROWS],
                          "y": [str(y) for y, _, _ in ROWS]})
    path = tmp_path / f"dev{suffix}"
    {".parquet": lambda: frame.to_parquet(path), ".csv": lambda: frame.to_csv(path, index=False),
     ".jsonl": lambda: path.write_text("".join(json.dumps(r) + "\n" for r in frame.to_dict("records")))}[suffix]()
    src = eval_sets.parse_option(f"mrpc={path},text=a,text_pair=b,label=y")
    assert _plain(eval_sets.rows(src)) == _plain(glue.load_split(tsv, "mrpc", "dev"))
    assert eval_sets.train_rows(src) is None  # one file is one split: the dev set


def test_a_classlabel_maps_by_name():
    feats = datasets.Features({"sentence1": datasets.Value("string"), "sentence2": datasets.Value("string"),
                               "label": datasets.ClassLabel(names=["not_entailment", "entailment"])})
    ds = datasets.Dataset.from_dict({"sentence1": ["a b", "c d"], "sentence2": ["e", "f"], "label": [0, 1]},
                                    features=feats)
    rows = eval_sets.rows(eval_sets.of(ds, "rte"))  # the suite's RTE order is (entailment, not_entailment)
    assert [r.label for r in rows] == [1.0, 0.0]


@pytest.mark.parametrize("option, match", [
    ("cola=x.csv", "TASK one of"), ("mrpc", "TASK=SOURCE"), ("mrpc=/no/such.csv", "no such file"),
    ("mrpc={p},colour=x", "not KEY=VALUE"), ("mrpc={p},text=nope", "no column 'nope' for text"),
])
def test_bad_options_and_columns_are_named(tmp_path, option, match):
    p = tmp_path / "d.csv"
    p.write_text("sentence1,sentence2,label\nA b,C d,1\n", encoding="utf-8")
    with pytest.raises(DataError, match=match):
        eval_sets.rows(eval_sets.parse_option(option.format(p=p)))


def test_a_bad_label_names_the_row(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("sentence1,sentence2,label\nA b,C d,1\nE f,G h,7\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"row 1: label 7 is not a class index 0..1"):
        eval_sets.rows(eval_sets.parse_option(f"mrpc={p}"))


def test_a_hub_dataset_not_in_the_local_cache_is_named_not_downloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "empty-cache"))
    src = eval_sets.parse_option("mrpc=hub:no-such-owner/no-such-dataset")
    with pytest.raises(DataError, match=r"hub:no-such-owner/no-such-dataset split 'validation'.*local datasets cache "
                                        r"\(downloads not allowed\)"):
        eval_sets.rows(src)
