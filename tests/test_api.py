"""The Python face: bertattn_bench.run() on a name, a folder, a LoadedModel and a model object in memory gives the
same values; selections; errors kept as data; claims along training (a report per step, steps as matrix columns)."""
import json

import pytest
from architecture_matrix import toy_data_dir

import bertattn_bench as bb
from bertattn_bench.base.errors import BenchError


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return toy_data_dir(tmp_path_factory.mktemp("toy"))


def values(results):
    return {(o.claim_id, o.corpus): (o.measured, o.n, o.holds, o.head) for o in results}


def test_object_folder_and_loaded_model_give_the_same_values(tiny, toy, tmp_path):
    folder = tmp_path / "tiny"
    tiny.model.save_pretrained(folder)
    tiny.tokenizer.save_pretrained(folder)
    kw = dict(select="dependency", data_dir=toy, cache_dir=None, baseline=False)
    from_loaded = bb.run(tiny, **kw)
    from_object = bb.run(tiny.model, tokenizer=tiny.tokenizer, **kw)
    from_folder = bb.run(str(folder), **kw)
    assert not (from_loaded.errors or from_object.errors or from_folder.errors)
    judged = [o for o in from_object if not o.skipped]
    assert len(judged) >= 10  # the §4 claims measured on the toy treebank
    assert values(from_object) == values(from_folder) == values(from_loaded)
    assert {o.model for o in from_object} == {"object:" + tiny.model.config._name_or_path} or len(
        {o.model for o in from_object}) == 1


def test_an_object_is_not_changed_and_the_cache_follows_its_weights(tiny, toy, tmp_path):
    import copy

    import torch

    model = copy.deepcopy(tiny.model)
    model.config._attn_implementation = "eager"  # what a user's model loaded without the project's code says
    kw = dict(select="clark.dep_dobj", data_dir=toy, cache_dir=tmp_path / "cache", baseline=False)
    first = bb.run(model, tokenizer=tiny.tokenizer, **kw)
    assert model.config._attn_implementation == "eager"  # measured on a copy: the caller's object is untouched
    assert [p["cached"] for p in first.passes] == [False]
    same = bb.run(copy.deepcopy(model), tokenizer=tiny.tokenizer, **kw)  # another object, the same weights
    assert [p["cached"] for p in same.passes] == [True] and values(same) == values(first)
    with torch.no_grad():
        model.encoder.layer[0].attention.self.query.weight.mul_(3.0)
    changed = bb.run(model, tokenizer=tiny.tokenizer, **kw)
    # the cache key follows the weights: the changed model is measured anew, never served the first one's pass
    assert [p["cached"] for p in changed.passes] == [False]
    assert first.outcomes[0].model_slug != changed.outcomes[0].model_slug


def test_select_is_a_k_expression_over_the_test_ids(tiny, toy):
    res = bb.run(tiny, select="dep_dobj or dep_det", data_dir=toy, cache_dir=None, baseline=False)
    assert sorted({o.claim_id for o in res}) == ["clark.dep_det", "clark.dep_dobj"]
    frame = res.to_frame()
    assert list(frame.columns[:6]) == ["claim_id", "model", "corpus", "verdict", "measured", "unit"]
    assert len(frame) == 2 and "clark.dep_dobj" in res.table()
    with pytest.raises(BenchError, match="not a -k expression"):
        bb.run(tiny, select="dep_dobj or", data_dir=toy, cache_dir=None)


def test_a_pass_that_cannot_be_made_is_kept_as_an_error_not_raised(tiny, tmp_path):
    data = tmp_path / "data"
    (data / "ud_english_ewt").mkdir(parents=True)
    (data / "ud_english_ewt" / "en_ewt-ud-dev.conllu").write_text("1\tnot a CoNLL-U line\n")  # present, unreadable
    res = bb.run(tiny, select="dependency", data_dir=data, cache_dir=None, baseline=False)
    assert not res.ok and not res.outcomes
    assert list(res.errors) == ["dependency-tiny-ewt_dev"]
    assert "en_ewt-ud-dev.conllu" in res.errors["dependency-tiny-ewt_dev"]


def test_a_missing_corpus_raises_at_the_call_naming_the_fetch_command(tiny, tmp_path):
    empty = tmp_path / "data"
    empty.mkdir()
    (empty / "placeholder").write_text("x")
    with pytest.raises(BenchError, match=r"missing corpus ud_english_ewt .* data fetch --dest .* --only ud_english_ewt"):
        bb.run(tiny, select="dependency", data_dir=empty, cache_dir=None, baseline=False)
    assert sorted(p.name for p in empty.iterdir()) == ["placeholder"]  # a named folder is never written


def test_bad_arguments_raise_at_once(tiny, toy):
    with pytest.raises(BenchError, match="--limit 0"):
        bb.run(tiny, limit=0, data_dir=toy)
    with pytest.raises(BenchError, match="tokenizer"):
        bb.run(tiny.model, data_dir=toy)


def test_claims_along_training_writes_a_report_per_step_and_the_steps_matrix(tiny, toy, tmp_path):
    import copy

    import torch

    model = copy.deepcopy(tiny.model)
    out = tmp_path / "along"
    for step in (0, 10):
        bb.claims_along_training(model, tiny.tokenizer, step, out, select="dep_dobj", name="tiny", data_dir=toy)
        with torch.no_grad():
            model.encoder.layer[0].attention.self.key.weight.add_(0.5)
    assert sorted(p.name for p in out.glob("step-*")) == ["step-000000", "step-000010"]
    header = (out / "matrix.md").read_text().splitlines()
    assert any("tiny@step0" in line and "tiny@step10" in line for line in header)
    records = json.loads((out / "step-000010" / "claims.json").read_text())["records"]
    assert [r["model"] for r in records] == ["tiny@step10"]


def test_the_trainer_callback_measures_at_start_every_n_steps_and_at_the_end(tiny, toy, tmp_path, monkeypatch):
    """The callback's schedule, driven as a transformers Trainer drives it (begin, each step's end, end)."""
    from types import SimpleNamespace

    from bertattn_bench.faces import along_training

    calls = []
    monkeypatch.setattr(along_training, "claims_along_training",
                        lambda model, tok, step, out, select, name, **kw: calls.append((step, select, name)) or step)
    cb = bb.ClaimsCallback(tiny.tokenizer, tmp_path, select="dep_dobj", every=2, name="tiny", data_dir=toy)
    model = tiny.model
    state = SimpleNamespace(global_step=0)
    cb.on_train_begin(None, state, None, model=model)
    for step in range(1, 6):
        state.global_step = step
        cb.on_step_end(None, state, None, model=model)
    cb.on_train_end(None, state, None, model=model)
    assert [c[0] for c in calls] == [0, 2, 4, 5] and {c[1:] for c in calls} == {("dep_dobj", "tiny")}
    assert isinstance(cb, __import__("transformers").TrainerCallback)


def test_the_callback_in_a_real_transformers_trainer(tiny, toy, tmp_path):
    """A real ``transformers.Trainer`` (it needs ``accelerate``: the ``test``/``trainer`` extras) trains a sentence
    classifier on the tiny encoder for 4 steps with the callback every 2 steps: reports at steps 0, 2 and 4, measured
    on the model being trained, whose weights move between them."""
    pytest.importorskip("accelerate")
    import torch
    from transformers import BertForSequenceClassification, Trainer, TrainingArguments

    clf = BertForSequenceClassification(tiny.model.config)
    clf.bert.load_state_dict(tiny.model.state_dict(), strict=False)
    enc = tiny.tokenizer(["the cat sat on the mat", "a dog barked", "it rained all day", "we left early"] * 4,
                         padding="max_length", max_length=12, truncation=True, return_tensors="pt")
    rows = [{"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
             "labels": torch.tensor(i % 2)} for i in range(16)]
    cb = bb.ClaimsCallback(tiny.tokenizer, tmp_path / "along", select="dependency", every=2, name="tiny",
                           data_dir=toy)
    args = TrainingArguments(output_dir=str(tmp_path / "trainer"), max_steps=4, per_device_train_batch_size=4,
                             learning_rate=1e-2, report_to=[], save_strategy="no", logging_strategy="no",
                             use_cpu=True, disable_tqdm=True, seed=0)
    Trainer(model=clf, args=args, train_dataset=rows, callbacks=[cb]).train()
    assert sorted(cb.measured) == [0, 2, 4]
    assert sorted(p.name for p in (tmp_path / "along").glob("step-*")) == ["step-000000", "step-000002",
                                                                           "step-000004"]
    header = (tmp_path / "along" / "matrix.md").read_text()
    assert "tiny@step0" in header and "tiny@step4" in header
    first, last = (json.loads((tmp_path / "along" / f"step-00000{s}" / "claims.json").read_text())["records"]
                   for s in (0, 4))
    assert [r["claim_id"] for r in first] == [r["claim_id"] for r in last]
    assert [r["measured"] for r in first] != [r["measured"] for r in last]  # measured on the weights being trained


def test_the_api_raises_what_the_command_stops_on(tiny, toy, monkeypatch):
    """Issue 45: an unknown model raises ModelLoadError naming it and how to provide it (was: 14 identical entries in
    Results.errors); a selection matching nothing raises (the command's exit 5; was ok=True with no outcome); an
    object that is not a model is named as such (was: "needs its tokenizer")."""
    from bertattn_bench.base.errors import ModelLoadError, NothingSelected

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match=r"no-such-model.*(hf download|--model DIR)"):
        bb.run("no-such-model", select="dependency", data_dir=toy, cache_dir=None)
    with pytest.raises(NothingSelected, match="matches no claim"):
        bb.run(tiny, select="no_such_claim_word", data_dir=toy, cache_dir=None)
    with pytest.raises(ModelLoadError, match="object object: not a model"):
        bb.run(object(), data_dir=toy, cache_dir=None)
