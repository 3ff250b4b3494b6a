"""Issue 46: a fine-tuned task model judged as it is. The suite's own fine-tune exported as a standard transformers
sequence-classification folder and judged as a user's model gives the values the suite's own path gives on that
checkpoint; the task comes from the option or the model's ``finetuning_task``, never from the label count; a
classifier whose labels are swapped is refused with both numbers; the provenance and the baseline slug say "as
given"."""
import re

import numpy as np
import pytest
import torch
from toy_glue import write_mrpc

import bertattn_bench as bb
from bertattn_bench.base.errors import BenchError, ModelLoadError
from bertattn_bench.training import glue_finetune as finetune
from bertattn_bench.training.given import export_classifier, resolve_task
from bertattn_bench.training.glue_pass import recipe_for


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    return write_mrpc(tmp_path_factory.mktemp("glue"), 96, 40)


@pytest.fixture(scope="module")
def own(tiny, glue_dir, tmp_path_factory):
    """The tiny encoder as a folder, the suite's quick-tier fine-tune of it (cached), and that fine-tune exported."""
    from bertattn_bench.engine.model import load_model

    root = tmp_path_factory.mktemp("own")
    encoder = root / "encoder"
    tiny.model.save_pretrained(encoder)
    tiny.tokenizer.save_pretrained(encoder)
    cache = root / "cache"
    loaded = load_model(str(encoder), device="cpu")
    ft = finetune.finetuned(loaded, "mrpc", 0, glue_dir, cache, recipe_for("mrpc", "quick"))
    exported = export_classifier(ft.model, loaded.tokenizer, "mrpc", root / "exported")
    return encoder, cache, exported


def _values(results, family):
    return {o.claim_id: (o.measured, o.n) for o in results if not o.skipped}


@pytest.mark.parametrize("family", ["disable", "prune", "finetune", "speedup"])
def test_the_exported_fine_tune_judged_as_given_equals_the_suites_own_path(own, glue_dir, family):
    encoder, cache, exported = own
    # the family by its test-id field: a bare "finetune" also selects claims of other families ("weak_on_finetuned")
    kw = dict(select=f"-{family}-", data_dir=glue_dir, cache_dir=cache, baseline=False, tier="quick")
    suite = bb.run(str(encoder), **kw)
    given = bb.run(str(exported), **kw)  # the task from the folder's own finetuning_task ("mrpc")
    assert not (suite.errors or given.errors), (suite.errors, given.errors)
    mine, theirs = _values(suite, family), _values(given, family)
    common = sorted(set(mine) & set(theirs))
    assert common, (mine, theirs)
    for claim in common:  # the same computation on the same weights: equal up to float summation order
        assert theirs[claim][1] == mine[claim][1]
        if "speed" in claim:  # a timing (wall-clock ratio): measured anew on each run, equal by nature only in n
            continue
        assert theirs[claim][0] == pytest.approx(mine[claim][0], rel=1e-4, abs=1e-4), claim
    models = {o.model for o in given}
    assert all("mrpc classifier as given" in m for m in models)
    assert {o.model_slug for o in given}.isdisjoint({o.model_slug for o in suite})  # baselines kept apart
    subjects = [t["subject"] for p in given.passes for t in p.get("learning") or ()]
    assert subjects and all("fine-tuned" not in s for s in subjects)
    assert all("as given" in p["data"] for p in given.passes if p["family"] == family)


def test_the_pretrained_columns_are_not_applicable_as_given(own, glue_dir):
    _, cache, exported = own
    res = bb.run(str(exported), select="-finetune-", data_dir=glue_dir, cache_dir=cache, baseline=False)
    skipped = {o.claim_id: o.skipped for o in res if o.skipped}
    assert any("pre-trained encoder" in why for why in skipped.values()), skipped


def test_the_task_is_never_guessed_from_the_label_count(own, tiny):
    from transformers import AutoConfig

    _, _, exported = own
    config = AutoConfig.from_pretrained(exported)
    assert resolve_task(None, config) == ("mrpc", None)
    config.finetuning_task = None
    task, note = resolve_task(None, config)
    assert task is None and "no task" in note and "--task-model" in note
    assert resolve_task("SST2", config)[0] == "sst-2"
    with pytest.raises(BenchError, match="--task-model cola"):
        resolve_task("cola", config)
    assert resolve_task(None, tiny.model.config) == (None, None)  # an encoder: nothing to say


def test_a_classifier_object_is_judged_as_given_and_left_untouched(own, glue_dir, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    _, cache, exported = own
    clf = AutoModelForSequenceClassification.from_pretrained(exported)
    tok = AutoTokenizer.from_pretrained(exported)
    before = {k: v.clone() for k, v in clf.state_dict().items()}
    kw = dict(select="disable", data_dir=glue_dir, cache_dir=cache, baseline=False)
    obj = bb.run(clf, tokenizer=tok, task="mrpc", **kw)
    folder = bb.run(str(exported), **kw)
    assert not (obj.errors or folder.errors)
    assert _values(obj, "disable") == _values(folder, "disable")
    assert all(torch.equal(before[k], v) for k, v in clf.state_dict().items())
    clf.config.finetuning_task = None  # no task anywhere: measured through its encoder, said in one note
    plain = bb.run(clf, tokenizer=tok, select="disable", data_dir=glue_dir, cache_dir=cache, baseline=False)
    assert any("no task" in n for n in plain.runner.notes)
    assert all("as given" not in o.model for o in plain)


def _planted(monkeypatch, rule):
    """The classifier's dev predictions planted: logits one-hot at ``rule(labels)`` (the label-order check reads
    them through ``glue_finetune.predict``)."""
    from bertattn_bench.training import given

    def predict(model, data, tokenizer, batch_size=64, interventions=()):
        return np.eye(2, dtype=np.float32)[rule(np.asarray(data.labels).astype(int))] * 5

    monkeypatch.setattr(given.finetune, "predict", predict)
    given._CHECKED.clear()


def test_swapped_labels_are_refused_with_both_numbers(own, glue_dir, monkeypatch):
    _, _, exported = own
    _planted(monkeypatch, lambda y: 1 - y)  # a model that learned the task with its two labels the other way round
    res = bb.run(str(exported), select="disable", data_dir=glue_dir, cache_dir=None, baseline=False)
    (message,) = res.errors.values()
    assert "label order is not the task's" in message and "swapped" in message
    as_given, permuted = [float(x) for x in re.findall(r"scores ([\d.]+) acc .* and ([\d.]+) with", message)[0]]
    assert (as_given, permuted) == (0.0, 100.0)


def test_an_untrained_classifier_is_left_to_the_learned_guard(own, glue_dir, monkeypatch):
    _, _, exported = own
    # always the minority class: better with the labels swapped (the majority), but that is no model that learned
    _planted(monkeypatch, lambda y: np.full_like(y, int(np.bincount(y, minlength=2).argmin())))
    res = bb.run(str(exported), select="-finetune-", data_dir=glue_dir, cache_dir=None, baseline=False)
    assert not res.errors and res.outcomes
    guard = [t for p in res.passes for t in p.get("learning") or ()]
    assert guard and not any(t["learned"] for t in guard)  # judged by the learned-model guard: it did not learn


def test_the_exported_model_keeps_its_label_order(own, glue_dir):
    from bertattn_bench.engine.model import load_model
    from bertattn_bench.training import given
    from bertattn_bench.training.glue_pass import guard_dev

    _, _, exported = own
    loaded = load_model(str(exported), device="cpu", task="mrpc")
    check = given.label_check(loaded, glue_task(), guard_dev(loaded, glue_dir, "mrpc"))
    assert check["as_given"] + check["permuted"] == pytest.approx(100.0)


def glue_task():
    from bertattn_bench.data import glue

    return glue.task("mrpc")


def test_a_checkpoint_without_a_head_is_refused_as_a_task_model(own):
    encoder, _, _ = own
    with pytest.raises(ModelLoadError, match="no classification head"):
        bb.run(str(encoder), task="mrpc", select="disable", cache_dir=None)


def test_a_head_of_the_wrong_shape_is_refused(own, glue_dir):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    _, _, exported = own
    clf = AutoModelForSequenceClassification.from_pretrained(exported, num_labels=3, ignore_mismatched_sizes=True)
    res = bb.run(clf, tokenizer=AutoTokenizer.from_pretrained(exported), task="mrpc", select="disable",
                 data_dir=glue_dir, cache_dir=None, baseline=False)
    (message,) = res.errors.values()
    assert "3 label(s)" in message and "has 2" in message


def test_the_dev_split_from_a_datasets_folder_gives_the_tsv_values(own, glue_dir, tmp_path):
    datasets = pytest.importorskip("datasets")
    from bertattn_bench.data import glue

    _, cache, exported = own

    def table(split):
        rows = glue.load_split(glue_dir, "mrpc", split)
        return datasets.Dataset.from_dict({"sentence1": [r.text_a for r in rows], "sentence2": [r.text_b for r in rows],
                                           "label": [int(r.label) for r in rows]})

    folder = tmp_path / "mrpc_ds"
    datasets.DatasetDict({"train": table("train"), "validation": table("dev")}).save_to_disk(str(folder))
    kw = dict(select="disable or prune", data_dir=glue_dir, cache_dir=cache, baseline=False)
    from_tsv = bb.run(str(exported), **kw)
    from_ds = bb.run(str(exported), eval_data={"mrpc": str(folder)}, **kw)
    assert not (from_tsv.errors or from_ds.errors), (from_tsv.errors, from_ds.errors)
    a, b = _values(from_tsv, ""), _values(from_ds, "")
    assert a.keys() == b.keys() and all(a[k] == b[k] for k in a if "speed" not in k)
    assert all(not p["cached"] for p in from_ds.passes)  # another data source: another key, never the TSV's pass
    assert all(str(folder) in p["data"] for p in from_ds.passes), [p["data"] for p in from_ds.passes]
    assert all("as given" in p["data"] for p in from_ds.passes)
    # a changed label in the dataset: measured anew (the rows' digest is in the key)
    dev = table("dev")
    flipped = dev.map(lambda r, i: {"label": 1 - r["label"] if i == 0 else r["label"]}, with_indices=True)
    obj = bb.run(str(exported), eval_data={"mrpc": flipped}, select="disable", data_dir=glue_dir, cache_dir=cache,
                 baseline=False)
    assert not obj.errors and all(not p["cached"] for p in obj.passes)


def test_the_callback_judges_the_classifier_being_trained(tiny, glue_dir, tmp_path):
    """ClaimsCallback inside a real transformers Trainer fine-tuning a classifier on MRPC, with task="mrpc": every 2
    steps the disabling claims are measured on (a copy of) the classifier being trained, as given: no fine-tune of
    the suite's, the head's weights moving between columns."""
    pytest.importorskip("accelerate")
    import json

    from transformers import BertForSequenceClassification, Trainer, TrainingArguments

    from bertattn_bench.data import glue

    clf = BertForSequenceClassification(tiny.model.config)
    clf.bert.load_state_dict(tiny.model.state_dict(), strict=False)
    train = glue.load_split(glue_dir, "mrpc", "train")[:32]
    enc = tiny.tokenizer([r.text_a for r in train], [r.text_b for r in train], padding="max_length", max_length=24,
                         truncation=True, return_tensors="pt")
    rows = [{"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
             "token_type_ids": enc["token_type_ids"][i], "labels": torch.tensor(int(r.label))}
            for i, r in enumerate(train)]
    out = tmp_path / "along"
    cb = bb.ClaimsCallback(tiny.tokenizer, out, select="disable", every=2, name="tiny", data_dir=glue_dir,
                           task="mrpc")
    args = TrainingArguments(output_dir=str(tmp_path / "trainer"), max_steps=4, per_device_train_batch_size=8,
                             learning_rate=1e-2, report_to=[], save_strategy="no", logging_strategy="no",
                             use_cpu=True, disable_tqdm=True, seed=0)
    Trainer(model=clf, args=args, train_dataset=rows, callbacks=[cb]).train()
    assert sorted(cb.measured) == [0, 2, 4]
    reports = [json.loads((out / f"step-00000{s}" / "claims.json").read_text()) for s in (0, 4)]
    assert all(r["records"] for r in reports)
    assert all("classifier as given" in rec["model"] for r in reports for rec in r["records"])
    runs = [json.loads((out / f"step-00000{s}" / "run.json").read_text()) for s in (0, 4)]
    given = [g for r in runs for g in r["as_given"].values()]
    assert len(given) == 2 and {g["as_given"] for g in given} == {"mrpc"}
    assert given[0]["classifier_sha256"] != given[1]["classifier_sha256"]  # the weights being trained
    assert all("fine-tuned" not in t["subject"] for r in runs for t in r["trained_models"])
    assert "tiny@step0" in (out / "matrix.md").read_text()


def test_the_task_option_chooses_the_fine_tuning_families_corpus():
    from bertattn_bench.runner.options import RunOptions

    opts = RunOptions(task_model="RTE")
    assert opts.corpora("disable") == opts.corpora("finetune") == opts.corpora("prune") == ["rte"]
    assert opts.corpora("dependency") == RunOptions().corpora("dependency")  # the encoder families: as before
    assert RunOptions(task_model="rte", corpus_options=["disable=mrpc"]).corpora("disable") == ["mrpc"]
    with pytest.raises(BenchError, match="--task-model cola"):
        RunOptions(task_model="cola").check()


def test_a_classifier_built_from_an_encoder_folder_is_a_classifier(own, glue_dir, monkeypatch):
    """Issue 61: ``AutoModelForSequenceClassification.from_pretrained(encoder_folder, num_labels=2)`` keeps the
    encoder's ``config.architectures`` (["BertModel"]); it is a classifier by what it is. With its
    ``finetuning_task`` set it is judged as given (a head planted to always answer the majority class: not judged,
    never fine-tuned again); with none it is measured through its encoder and the run says so in one note."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from bertattn_bench.engine.model import is_classifier_config, is_classifier_object

    encoder, _, _ = own
    clf = AutoModelForSequenceClassification.from_pretrained(encoder, num_labels=2)
    tok = AutoTokenizer.from_pretrained(encoder)
    assert not is_classifier_config(clf.config) and is_classifier_object(clf)  # the case the config cannot tell
    assert not is_classifier_object(clf.base_model)
    clf.config.finetuning_task = "mrpc"
    _planted(monkeypatch, lambda y: np.full_like(y, int(np.bincount(y, minlength=2).argmax())))
    res = bb.run(clf, tokenizer=tok, select="-finetune-", data_dir=glue_dir, cache_dir=None, baseline=False)
    assert not res.errors
    assert all("mrpc classifier as given" in o.model for o in res)
    judged = {o.claim_id: o for o in res if not o.skipped}
    assert judged["kov.table1_finetuned"].not_judged, judged["kov.table1_finetuned"].verdict
    subjects = [t["subject"] for p in res.passes for t in p.get("learning") or ()]
    assert subjects and all("fine-tuned" not in s for s in subjects)  # never fine-tuned again
    clf.config.finetuning_task = None
    assert resolve_task(None, clf.config, classifier=is_classifier_object(clf))[1]  # no task: a note
    assert resolve_task(None, clf.config) == (None, None)  # what the config alone said (the fault)
