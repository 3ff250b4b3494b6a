"""Niven & Kao 2019 on ARCT, fine-tuned half (arct_ft): the two-warrant scorer on a tiny model built from a config
(input modes build the right sequences, one shared layer scores both warrants, softmax over the pair, padding does not
change a score), seeded training with best-dev selection and the cache, and the claim metrics on planted runs."""
from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bertattn_bench.claims.registry import NotApplicable, families
from bertattn_bench.data.arct_corpus import ArctItem
from bertattn_bench.engine.batching import make_batch
from bertattn_bench.families import arct_ft as m
from bertattn_bench.training import arct_finetune as arct_ft
from bertattn_bench.training import glue_finetune as finetune


def item(w0, w1, label, claim="cats are good", reason="they purr", id="x", flag=None):
    return ArctItem(id, w0, w1, label, reason, claim, flag=flag, source=f"test:{id}")


ITEMS = [item("purring is nice", "purring is not nice", 0, id="a"),
         item("dogs bark loudly at night", "dogs do not bark", 1, claim="dogs are loud.", reason="neighbours complain",
              id="b"),
         item("x", "a much longer warrant with many more words in it than the other", 0, id="c")]


def _pieces(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("mode", arct_ft.MODES)
def test_input_modes_build_the_right_packed_sequences(tokenizer, mode):
    tok = tokenizer
    data = arct_ft.encode_items(tok, ITEMS, mode)
    cls, sep = tok.cls_token_id, tok.sep_token_id
    for it, ex in zip(ITEMS, data.examples):
        a = {"full": f"{it.claim.rstrip('.')}. {it.reason}.", "rw": it.reason, "cw": it.claim, "w": None}[mode]
        seqs = []
        for w in it.warrants:
            body = ([cls] + _pieces(tok, a) + [sep] if a else [cls]) + _pieces(tok, w) + [sep]
            types = ([0] * (len(_pieces(tok, a)) + 2) if a else [0]) + [1 if a else 0] * (len(_pieces(tok, w)) + 1)
            seqs.append((body, types))
        assert ex.input_ids == seqs[0][0] + seqs[1][0]
        assert ex.token_type_ids == seqs[0][1] + [t + arct_ft.PACK_OFFSET for t in seqs[1][1]]
    assert data.labels.tolist() == [0, 1, 0] and data.n_truncated == 0
    assert arct_ft.append_claim_reason("dogs are loud.", "they bark") == "dogs are loud. they bark."


def test_truncation_is_per_sequence_and_counted(tokenizer):
    lengths = [[len(tokenizer(arct_ft.append_claim_reason(it.claim, it.reason), w)["input_ids"]) for w in it.warrants]
               for it in ITEMS]
    cap = sorted(max(x) for x in lengths)[1]  # the middle item's longest sequence: it and item c are not cut
    data = arct_ft.encode_items(tokenizer, ITEMS, "full", max_tokens=cap - 1)
    assert data.n_truncated == sum(max(x) > cap - 1 for x in lengths) == 2
    for ex, x in zip(data.examples, lengths):
        second = [t >= arct_ft.PACK_OFFSET for t in ex.token_type_ids]
        assert (second.count(False), second.count(True)) == (min(x[0], cap - 1), min(x[1], cap - 1))


def test_unpack_recovers_each_sequence(tokenizer):
    data = arct_ft.encode_items(tokenizer, ITEMS, "full")
    batch = make_batch(data.examples, tokenizer, "cpu", False)
    ids, mask, types = arct_ft.unpack(batch.input_ids, batch.attention_mask, batch.token_type_ids)
    for i, it in enumerate(ITEMS):
        for j, w in enumerate(it.warrants):
            enc = tokenizer(arct_ft.append_claim_reason(it.claim, it.reason), w)
            row = i + j * len(ITEMS)
            n = int(mask[row].sum())
            assert ids[row, :n].tolist() == enc["input_ids"] and types[row, :n].tolist() == enc["token_type_ids"]
            assert not mask[row, n:].any()


def test_scorer_is_one_shared_layer_with_softmax_over_the_pair(tiny):
    torch.manual_seed(0)
    model = arct_ft.pair_model(tiny, seed=3)
    tok = tiny.tokenizer
    data = arct_ft.encode_items(tok, ITEMS, "full")
    logits = finetune.predict(model, data, tok)
    assert logits.shape == (3, 2)
    # each logit is the same scorer on that warrant's sequence alone
    for i, it in enumerate(ITEMS):
        for j, w in enumerate(it.warrants):
            enc = tok(arct_ft.append_claim_reason(it.claim, it.reason), w, return_tensors="pt")
            with torch.inference_mode():
                alone = model.scorer(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
            assert logits[i, j] == pytest.approx(float(alone[0]), abs=1e-5)
    # swapping the warrants swaps the logits (one shared layer, no position of the warrant in the pair)
    swapped = [item(it.warrant1, it.warrant0, 1 - it.label, it.claim, it.reason, it.id) for it in ITEMS]
    np.testing.assert_allclose(finetune.predict(model, arct_ft.encode_items(tok, swapped, "full"), tok),
                               logits[:, ::-1], atol=1e-5)
    # the loss is the cross-entropy of the softmax over the two warrants
    y = torch.tensor(data.labels)
    loss = finetune.loss_per_example(arct_ft.TASK, torch.tensor(logits), y)
    expect = -torch.log_softmax(torch.tensor(logits), -1)[torch.arange(3), y.long()]
    assert torch.allclose(loss, expect)
    assert arct_ft.TASK.num_labels == 2 and not arct_ft.TASK.is_regression


def test_padding_does_not_change_a_score(tiny):
    model = arct_ft.pair_model(tiny, seed=0)
    tok = tiny.tokenizer
    data = arct_ft.encode_items(tok, ITEMS, "full")
    together = finetune.predict(model, data, tok, batch_size=3)  # item a padded to item c's length
    for i in range(3):
        alone = finetune.EncodedSplit([data.examples[i]], data.labels[i:i + 1], 0, 80)
        np.testing.assert_allclose(finetune.predict(model, alone, tok, batch_size=1)[0], together[i], atol=1e-5)


def _toy(n, seed):
    """A cue the tiny model can learn: the correct warrant contains 'not'."""
    rng = np.random.default_rng(seed)
    words = "cats dogs purr bark nice loud good bad big small".split()
    out = []
    for i in range(n):
        w = " ".join(rng.choice(words, 4))
        v = " ".join(rng.choice(words, 4))
        label = int(rng.integers(0, 2))
        pair = (f"{w} not", v) if label == 0 else (v, f"{w} not")
        out.append(item(*pair, label, id=f"t{seed}-{i}"))
    return out


RECIPE = finetune.Recipe(epochs=4, batch_size=8, lr=1e-3, bf16_autocast=False)


def test_training_is_seeded_keeps_best_dev_epoch_and_caches(tiny, tmp_path):
    tok = tiny.tokenizer
    data = {"train": arct_ft.encode_items(tok, _toy(48, 0), "w"), "dev": arct_ft.encode_items(tok, _toy(16, 1), "w"),
            "test": arct_ft.encode_items(tok, _toy(16, 2), "w")}
    s = arct_ft.SETTINGS["w"]
    a = arct_ft.finetuned_run(tiny, s, 0, data, None, RECIPE)
    b = arct_ft.finetuned_run(tiny, s, 0, data, None, RECIPE)
    assert a.test_pred == b.test_pred and a.meta["dev_acc_per_epoch"] == b.meta["dev_acc_per_epoch"]
    assert a.train_acc > 0.9 and a.dev_acc >= 0.8 and a.test_acc > 0.6  # learned the planted cue (16 dev, 16 test)
    dev = a.meta["dev_acc_per_epoch"]
    assert len(dev) == 4 and a.meta["best_epoch"] == int(np.argmax(dev)) + 1 and a.dev_acc == max(dev)
    cached = arct_ft.finetuned_run(tiny, s, 0, data, tmp_path, RECIPE)
    assert not cached.cached and cached.test_pred == a.test_pred
    again = arct_ft.finetuned_run(tiny, s, 0, data, tmp_path, RECIPE)
    assert again.cached and again.test_acc == a.test_acc
    assert not list(tmp_path.rglob("partial-state.pt"))
    key = arct_ft.run_dir(tmp_path, tiny, s, 0, RECIPE, data)
    assert key != arct_ft.run_dir(tmp_path, tiny, s, 1, RECIPE, data)
    assert key != arct_ft.run_dir(tmp_path, tiny, arct_ft.SETTINGS["full"], 0, RECIPE, data)
    other = dict(data, train=arct_ft.encode_items(tok, _toy(48, 5), "w"))
    assert key != arct_ft.run_dir(tmp_path, tiny, s, 0, RECIPE, other)


# ---- the claim metrics on planted runs -----------------------------------------------------------------------

def _run(seed, test, train=0.95, preds=None):
    return arct_ft.Run(seed, train, 0.7, test, preds or [], {"best_epoch": 3}, True)


def _pr(setting, runs, n_test=444, labels=None, negated=None, authors=None):
    labels = np.zeros(n_test, int) if labels is None else labels
    negated = np.zeros(n_test, bool) if negated is None else negated
    r = m.ArctFtResult(setting, "full", runs, 1210, 316, n_test, labels, negated,
                       authors or {"bert_large": np.array([0.7, 0.75]), "bert_large:train": np.array([0.9, 0.5])},
                       {}, {})
    return SimpleNamespace(result=r)


def test_metrics_on_planted_runs():
    full = _pr("full", [_run(0, 0.60), _run(1, 0.70, train=0.6), _run(2, 0.64)])
    t = m.arct_ft_test(full, stat="median", settings=["full"])
    assert t.value == pytest.approx(0.64) and t.n == 444 and "degenerate runs (train < 0.8): 1/3" in t.detail
    assert m.arct_ft_test(full, stat="max").value == pytest.approx(0.70)
    assert m.arct_ft_degenerate(full).value == pytest.approx(1 / 3)
    assert "authors' bert_large: 1/2" in m.arct_ft_degenerate(full).detail
    lo, hi = m.arct_ft_degenerate(full).bounds  # Wilson 95% on 1 of 3 runs: 0.061 .. 0.792 (by hand)
    assert lo == pytest.approx(0.0615, abs=1e-3) and hi == pytest.approx(0.7923, abs=1e-3)
    w = _pr("w", [_run(0, 0.58), _run(1, 0.61), _run(2, 0.60)])
    assert m.arct_ft_gap(w, [full]).value == pytest.approx(0.04)
    low = _pr("full", [_run(0, 0.52), _run(1, 0.50)])
    assert math.isnan(m.arct_ft_gap(w, [low], min_full=0.55).value)
    with pytest.raises(NotApplicable):
        m.arct_ft_test(w, settings=["full"])


def test_adversarial_metrics_pool_both_halves():
    n = 8
    labels = np.array([0, 1, 0, 1, 1, 0, 1, 0])
    negated = np.array([False] * 4 + [True] * 4)
    # seed 0 right on the whole original half, wrong on the negated half: pooled 0.5
    right, wrong = labels[:4].tolist(), (1 - labels[4:]).tolist()
    runs = [_run(0, 0.5, preds=right + wrong), _run(1, 0.75, preds=right + labels[4:6].tolist() + wrong[2:])]
    pr = _pr("adv", runs, n_test=n, labels=labels, negated=negated, authors={})
    r = pr.result
    np.testing.assert_allclose(r.half_accs(False), [1.0, 1.0])
    np.testing.assert_allclose(r.half_accs(True), [0.0, 0.5])
    se = math.sqrt(0.25 / n)
    assert m.arct_ft_adv_mean(pr).value == pytest.approx(0.125 / se)
    noise = math.sqrt(se ** 2 + 0.125 ** 2)
    assert m.arct_ft_adv_max(pr, paper_max=0.533).value == pytest.approx((0.75 - 0.533) / noise)


def test_family_registered_with_quick_tier_short_seed(tiny, tmp_path):
    fam = families()["arct_ft"]
    assert fam.default_corpora("quick") == ["full"] and set(fam.default_corpora("full")) == set(arct_ft.SETTINGS)
    # the tiny model is a random-init twin: not trained in the quick tier (skips with the reason), 2 seeds in the full
    assert tiny.info.random_init_seed is not None
    p = m.prepare_arct_ft(tiny, tmp_path, "full", options={"tier": "quick"})
    assert p.nothing_to_measure() == m.TWIN_SHORT_REASON and "--tier full" in m.TWIN_SHORT_REASON
    pr = p.run()
    from bertattn_bench.claims.catalog import load_claims
    from bertattn_bench.claims.checks import measure

    skipped = {c.id: measure(c, pr).outcome.skipped for c in load_claims(family="arct_ft")}
    assert "--tier full only" in skipped["niven_ft.full_above_chance"], skipped
    assert m.prepare_arct_ft(tiny, tmp_path, "adv", options={"tier": "full"}).seeds == m.TWIN_SEEDS
    # the model under test: one short seed in the quick tier (recipe of SHORT_EPOCHS, said in the data column),
    # seeds 0-4 with the 5-epoch recipe in the full tier
    model = SimpleNamespace(info=SimpleNamespace(random_init_seed=None, max_positions=512), tokenizer=tiny.tokenizer)
    quick = m.prepare_arct_ft(model, tmp_path, "full", options={"tier": "quick"})
    assert quick.nothing_to_measure() is None and quick.seeds == (0,)
    assert quick.recipe.epochs == m.SHORT_EPOCHS == 1 and quick.recipe.epochs < arct_ft.RECIPE.epochs
    assert "1 epoch, a smoke run" in quick.data and "seeds [0] (quick tier" in quick.data
    assert dataclasses.replace(quick.recipe, epochs=arct_ft.RECIPE.epochs) == arct_ft.RECIPE  # only the epochs differ
    full = m.prepare_arct_ft(model, tmp_path, "w", options={"tier": "full"})
    assert full.seeds == (0, 1, 2, 3, 4) and full.recipe == arct_ft.RECIPE and "5 epochs, best dev epoch kept" in full.data
    # the run's seed moves the quick and regression tiers' seeds (issue 61: $BERTATTN_SEED=1 trains seed 1, not 0
    # again); the regression tier trains three from it; the full tier and the twin keep theirs
    assert m.prepare_arct_ft(model, tmp_path, "full", options={"tier": "quick", "seed": 2}).seeds == (2,)
    assert m.prepare_arct_ft(model, tmp_path, "full", options={"tier": "regression"}).seeds == (0, 1, 2)
    assert m.prepare_arct_ft(model, tmp_path, "full", options={"tier": "regression", "seed": 1}).seeds == (1, 2, 3)
    assert m.prepare_arct_ft(model, tmp_path, "w", options={"tier": "full", "seed": 3}).seeds == (0, 1, 2, 3, 4)


def test_the_judge_reads_each_arct_seed_and_adds_their_spread():
    """Three runs (test 0.60, 0.70, 0.64): the judge reads each seed's median through its one-seed view and adds
    t(2) x sd / sqrt(3) to the median's interval; the degenerate share's Wilson bounds already run over the seeds
    (nothing added)."""
    from bertattn_bench.claims.catalog import evaluate, load_claims
    from bertattn_bench.claims.checks import one_seed, per_seed_values
    from bertattn_bench.claims.stats import seed_half_width
    from bertattn_bench.engine.batching import Skipped
    from bertattn_bench.engine.passes import PassResult

    r = _pr("full", [_run(0, 0.60), _run(1, 0.70), _run(2, 0.64)]).result
    pr = PassResult("arct_ft", "full", "planted", SimpleNamespace(slug="toy", name="toy", attn_implementation="eager", device="cpu"), r, 444,
                    Skipped())
    assert one_seed(pr.result, 1).seeds == [1] and one_seed(pr.result, 1).accs().tolist() == [0.70]
    claims = {c.id: c for c in load_claims()}
    c = claims["niven_ft.full_above_chance"]
    assert per_seed_values(c, pr) == pytest.approx([0.60, 0.70, 0.64])
    out = evaluate(c, pr)
    half = seed_half_width(float(np.std([0.60, 0.70, 0.64], ddof=1)), 3) / math.sqrt(3)
    assert out.interval == pytest.approx([0.64 - half, 0.64 + half], abs=1e-6)
    d = claims["niven_ft.degenerate_minority"]
    assert evaluate(d, pr).interval == pytest.approx(list(m.arct_ft_degenerate(pr).bounds))


def test_quick_tier_trains_its_short_recipe(tiny, tmp_path, monkeypatch):
    """The pass hands the tier's recipe to the trainer and reports it (a pass that trained 5 epochs in CI, or said
    5 while training 1, fails here)."""
    seen = []

    def fake_run(loaded, setting, seed, data, cache_dir, recipe, progress=False):
        seen.append((setting.name, seed, recipe.epochs))
        return arct_ft.Run(seed, 0.6, 0.6, 0.5, [0] * len(data["test"].examples), {"best_epoch": 1}, False)

    monkeypatch.setattr(arct_ft, "finetuned_run", fake_run)
    monkeypatch.setattr(arct_ft, "load_setting", lambda data_dir, setting, limit=None: dict.fromkeys(
        ("train", "dev", "test"), ITEMS))
    monkeypatch.setattr(m.arct, "load_shipped_results", lambda data_dir: {})
    model = SimpleNamespace(info=SimpleNamespace(random_init_seed=None, max_positions=512, name="toy"),
                            tokenizer=tiny.tokenizer)
    pr = m.prepare_arct_ft(model, tmp_path, "full", options={"tier": "quick"}).run()
    assert seen == [("full", 0, 1)] and pr.result.recipe["epochs"] == 1
    detail = m.arct_ft_test(pr, settings=["full"]).detail
    assert "quick tier, 1 epoch: seed 0: test 0.500" in detail and "degenerate runs (train < 0.8): 1/1 (seeds [0]; no other run)" in detail


def test_figure_sets_our_seeds_beside_the_authors(tmp_path):
    full = _pr("full", [_run(0, 0.60), _run(1, 0.66)])
    adv = _pr("adv", [_run(0, 0.50)], n_test=888, authors={"bert_large_adv": np.array([0.5, 0.53])})
    for pr in (full, adv):
        pr.model = SimpleNamespace(slug="toy", name="toy model")
    quick = SimpleNamespace(result=m.NothingToMeasure("runs in --tier full"), model=full.model)
    paths = m.arct_ft_figures([full, adv, quick], tmp_path)
    assert [p.name for p in paths] == ["arct-ft-seeds-toy.png"] and paths[0].stat().st_size > 0
