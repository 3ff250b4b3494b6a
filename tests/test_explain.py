"""The ``explain`` family (Abnar & Zuidema 2020; Brunner et al. 2020): Captum's importance against hand computations
on a tiny classifier, the relevance readings against the engine's, the metrics on planted correlations, and the
whole pass on a tiny MRPC fine-tune."""
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bertattn_bench.engine import across_layers
from bertattn_bench.families.explain import measure, metrics
from bertattn_bench.families.explain.run import ExplainResult
from bertattn_bench.training import glue_finetune


@pytest.fixture
def classifier(tiny):
    model = glue_finetune.TaskModel(tiny.model, 2, seed=0)
    model.eval()
    return model


def example(tokenizer):
    enc = tokenizer("the cat sat", "a dog ran on the mat")
    return enc["input_ids"], enc["token_type_ids"]


def test_blankout_is_the_drop_of_the_gold_class_probability(classifier, tokenizer):
    ids, types = example(tokenizer)
    inputs = measure.inputs_of(classifier, ids, types, "cpu")
    imp = measure.importance(classifier, inputs, 1, tokenizer.mask_token_id)
    with torch.no_grad():
        def p1(i):
            return torch.softmax(classifier(i, inputs["attention_mask"], inputs.get("token_type_ids")), -1)[0, 1]

        base = p1(inputs["input_ids"])
        for k in range(len(ids)):
            blanked = inputs["input_ids"].clone()
            blanked[0, k] = tokenizer.mask_token_id
            assert imp["blankout"][k] == pytest.approx(float(base - p1(blanked)), abs=1e-6)


def test_gradient_importance_is_the_abs_sum_of_the_embedding_gradient(classifier, tokenizer):
    ids, types = example(tokenizer)
    inputs = measure.inputs_of(classifier, ids, types, "cpu")
    imp = measure.importance(classifier, inputs, 0, tokenizer.mask_token_id)
    emb = classifier.encoder.get_input_embeddings()
    kept = {}

    def hook(module, args, out):
        out.retain_grad()
        kept["e"] = out

    h = emb.register_forward_hook(hook)
    try:
        classifier(**inputs)[0, 0].backward()
    finally:
        h.remove()
    e, g = kept["e"].detach()[0].double(), kept["e"].grad[0].double()
    expected = (e * g).sum(-1).abs().numpy()  # input x gradient, |sum over dimensions| (the authors' l.145)
    assert np.allclose(imp["gradient"], expected, rtol=1e-3, atol=1e-7 * expected.max())
    assert not np.allclose(imp["gradient"], (e * g).abs().sum(-1).numpy(), rtol=1e-2)  # |sum|, not sum |.|
    # why not the authors' reduction of the gradient alone: 0 up to float error (the embedding LayerNorm's invariance)
    assert (g.sum(-1).abs() < 1e-4 * g.norm(dim=-1)).all()
    assert set(imp) == {"blankout", "gradient"}


def test_relevance_readings_are_the_engines(classifier, tokenizer):
    ids, types = example(tokenizer)
    inputs = measure.inputs_of(classifier, ids, types, "cpu")
    maps, norm, _ = measure.layer_maps(classifier, classifier.encoder, inputs, True)
    assert maps.shape == (2, 4, len(ids), len(ids)) and norm.shape == (2, len(ids), len(ids))
    rel = measure.relevance(maps, norm, flow=True)
    mean = maps.mean(1)
    assert np.allclose(rel["raw_cls"], mean[:, 0].numpy())
    assert np.allclose(rel["raw_max"][1], mean[1].max(0).values.numpy())
    assert np.allclose(rel["rollout_cls"][1], (across_layers.rollout(mean)[1, 0]).numpy())
    assert np.allclose(rel["flow_cls"][0], rel["rollout_cls"][0], atol=1e-5)  # equal in layer 1
    assert set(rel) == {"raw_cls", "raw_max", "rollout_cls", "rollout_max", "flow_cls", "norm_rollout_cls"}


def test_max_over_query_rows_by_hand():
    """The authors' Table-3 relevance (compute_corel_distilbert_sst.py l.49, l.95, l.103): per input token, the
    maximum over the query rows. Two layers on two tokens: layer 1 both attend to token 0, layer 2 both to token 1.
    Rollout J2 = [[.75, .25], [.5, .5]] -> max [.75, .5]; flow from token 0 [2/3, 1/3], from token 1 [.5, .5]
    (tests/test_across_layers.py) -> max [2/3, .5]; raw layer 2 [[0, 1], [0, 1]] -> max [0, 1]."""
    planted = torch.tensor([[[[1.0, 0.0], [1.0, 0.0]]], [[[0.0, 1.0], [0.0, 1.0]]]], dtype=torch.float64)
    rel = measure.relevance(planted, None, flow=False, flow_max=True)
    assert np.allclose(rel["rollout_max"][1], [0.75, 0.5])
    assert np.allclose(rel["rollout_cls"][1], [0.75, 0.25])
    assert np.allclose(rel["flow_max"][1], [2 / 3, 0.5], atol=1e-6)
    assert np.allclose(rel["flow_cls"][1], [2 / 3, 1 / 3], atol=1e-6)
    assert np.allclose(rel["raw_max"][1], [0.0, 1.0]) and np.allclose(rel["raw_cls"][0], [1.0, 0.0])
    assert np.allclose(rel["flow_max"][0], rel["rollout_max"][0], atol=1e-6)  # layer 1: flow == rollout, every row
    assert "flow_max" not in measure.relevance(planted, None, flow=True)


def test_effective_reading_of_a_short_and_a_long_sequence(tiny, tokenizer):
    # tiny: hidden 32, 4 heads, d_head 8. A sequence of <= 8 pieces: effective == raw; longer: they differ
    enc = tiny.model
    for words, same in (("the cat sat", True), ("the cat sat on the mat and the dog ran under the log", False)):
        ids = tokenizer(words)["input_ids"]
        _, _, pairs = measure.layer_maps(enc, enc, measure.inputs_of(enc, ids, [0] * len(ids), "cpu"), False, True)
        r = measure.effective_reading(pairs, ids, tiny.info.cls_token_id, tiny.info.sep_token_id)
        assert r.min_rank == min(len(ids), 8)
        if same:
            assert np.allclose(r.agreement, 1.0) and np.allclose(r.raw_special, r.eff_special, atol=1e-6)
        else:
            assert (r.agreement < 0.999).all()


def test_first_segment_cuts_a_pair_at_its_first_sep(tokenizer):
    ids, types = example(tokenizer)
    first, ftypes = measure.first_segment(ids, types, tokenizer.sep_token_id)
    assert first == tokenizer("the cat sat")["input_ids"] and ftypes == [0] * len(first)


def planted_result(rho: dict, effective=None, d_head=4, n_layers=4) -> SimpleNamespace:
    r = ExplainResult(task="mrpc", tier="quick", seed=0, n_layers=n_layers, n_examples=3, n_flow=3,
                      lengths=np.array([5, 6, 7]), rho=rho, blank_token="[MASK]", d_head=d_head, effective=effective)
    return SimpleNamespace(result=r)


def test_layer_contrast_and_gap_on_planted_correlations():
    raw = np.array([[0.9, 0.1, 0.2, 0.3], [0.7, 0.3, 0.1, 0.2], [0.5, 0.2, 0.0, 0.1]])
    roll = raw + np.array([0.0, 0.2, 0.3, 0.4])
    pr = planted_result({"raw_cls|blankout": raw, "rollout_cls|blankout": roll})
    m = metrics.explain_layer_contrast(pr)  # per example: L1 - mean(L2..L4) = 0.7, 0.5, 0.4
    assert m.value == pytest.approx(np.mean([0.9 - 0.2, 0.7 - 0.2, 0.5 - 0.1]))
    assert m.standard_error == pytest.approx(np.std([0.7, 0.5, 0.4], ddof=1) / np.sqrt(3))
    g = metrics.explain_reading_gap(pr)  # rollout - raw over layers 2..4: 0.3 for every example
    assert g.value == pytest.approx(0.3) and g.standard_error == pytest.approx(0.0, abs=1e-12)
    mid = metrics.explain_reading_gap(pr, layers="middle")  # of 4 layers: layer 2 (0.5 deep) only... and 3? no
    assert mid.value == pytest.approx(0.2) and "[2]" in mid.detail
    s = metrics.explain_strongest_layer(pr, reading="raw_cls", importance="blankout")
    assert s.value == pytest.approx(0.7) and s.values["layer"] == 1


def test_brunner_metrics_on_planted_readings():
    eff = {"agreement": np.array([[1.0, 1.0], [0.8, 0.6], [0.9, 0.7]]), "n": np.array([3, 6, 9]),
           "raw_sep": np.array([[0.1, 0.1], [0.5, 0.3], [0.4, 0.2]]),
           "eff_sep": np.array([[0.1, 0.1], [0.2, 0.2], [0.1, 0.1]]),
           "raw_special": np.zeros((3, 2)), "eff_special": np.zeros((3, 2)), "min_rank": np.array([3, 4, 4])}
    pr = planted_result({}, effective=eff, n_layers=2)
    d = metrics.brunner_divergence_gap(pr)  # long sequences (n > 4): 1 - 0.7, 1 - 0.8; short: 0
    assert d.value == pytest.approx(0.25) and d.values["short"] == pytest.approx(0.0)
    s = metrics.brunner_special_drop(pr, layers=[1, 2])  # (0.3 + 0.1) / 2 = 0.2 and (0.3 + 0.1) / 2 = 0.2
    assert s.value == pytest.approx(0.2) and s.n == 2


def test_the_pass_on_a_tiny_mrpc_fine_tune(tiny, tmp_path, monkeypatch):
    from toy_glue import write_mrpc

    from bertattn_bench.claims.registry import families
    from bertattn_bench.families.explain import constants
    from bertattn_bench.training import glue_pass

    write_mrpc(tmp_path, 32, 12)
    real = glue_pass.recipe_for
    monkeypatch.setattr(glue_pass, "recipe_for",
                        lambda task, tier="regression": replace(real(task, tier), epochs=1, batch_size=8, lr=1e-3))
    monkeypatch.setitem(constants.TIERS, "quick", {**constants.TIERS["quick"], "examples": 6, "flow_examples": 3})
    pretrained = replace(tiny, info=replace(tiny.info, random_init_seed=None))
    p = families()["explain"].prepare(pretrained, tmp_path, "mrpc", None, 32,
                                      {"tier": "quick", "cache_dir": tmp_path / "cache"})
    p.artifacts()
    r = p.run().result
    assert isinstance(r, ExplainResult) and r.n_examples == 6 and len(p.dev.examples) == 6 and r.n_flow == 3 and r.d_head == 8
    flow = r.rho["flow_cls|gradient"]
    assert np.isnan(flow[3:]).all() and np.isfinite(flow[:3]).any()
    assert r.rho["raw_cls|blankout"].shape == (6, 2)
    assert r.effective["agreement"].shape == (12, 2) and (r.effective["n"] <= 8).any() and (r.effective["n"] > 8).any()
    short = r.effective["n"] <= 8
    assert np.allclose(r.effective["agreement"][short], 1.0)
    assert metrics.brunner_divergence_gap(SimpleNamespace(result=r)).value > 0
    # identifiability by cosine and through the linear map fitted on the 32 training pairs (not the dev pairs read)
    assert r.identified.shape == r.identified_linear.shape == (6, 2) and "first 32 mrpc training pairs" in r.identity_note
    assert (r.identified_linear <= r.lengths[:, None]).all() and r.identified_linear.sum() > 0
    # the first example kept for its figure: its tokens, and exactly the arrays behind row 0 of every correlation
    ex = r.example
    assert len(ex["tokens"]) == r.lengths[0] and ex["tokens"][0] == tiny.tokenizer.cls_token
    again = measure.correlations(ex["relevance"], ex["importance"])
    assert sorted(again) == sorted(r.rho)
    for key, row in again.items():
        np.testing.assert_array_equal(row, r.rho[key][0])
    assert ex["relevance"]["flow_cls"].shape == (2, r.lengths[0])


@pytest.mark.parametrize("label", ["MPNet", "DeBERTa-v2/v3", "DeBERTa"])
def test_the_pass_on_other_encoder_types(label, tokenizer, tmp_path, monkeypatch):
    """MPNet (no token types) and DeBERTa-v2 run the pass end to end with every reading; DeBERTa (v1: one
    interleaved query/key/value projection, which the norms family refuses) without the norm rollout and effective
    attention, the refusal said in the result and the Brunner metrics not applicable."""
    import architecture_matrix as A
    from toy_glue import write_mrpc

    from bertattn_bench.claims.registry import NotApplicable, families
    from bertattn_bench.families.explain import constants
    from bertattn_bench.training import glue_pass

    arch = next(a for a in A.MATRIX if a.label == label)
    loaded = A.build(arch, tokenizer)
    write_mrpc(tmp_path, 8, 4)
    real = glue_pass.recipe_for
    monkeypatch.setattr(glue_pass, "recipe_for",
                        lambda task, tier="regression": replace(real(task, tier), epochs=1, batch_size=8, lr=1e-3))
    monkeypatch.setitem(constants.TIERS, "quick", {**constants.TIERS["quick"], "examples": 2, "flow_examples": 1})
    loaded = replace(loaded, info=replace(loaded.info, random_init_seed=None))
    p = families()["explain"].prepare(loaded, tmp_path, "mrpc", None, 32,
                                      {"tier": "quick", "cache_dir": tmp_path / "cache"})
    p.artifacts()
    r = p.run().result
    assert isinstance(r, ExplainResult) and np.isfinite(r.rho["rollout_cls|gradient"]).any()
    pr = SimpleNamespace(result=r)
    if label != "DeBERTa":
        assert r.effective is not None and "norm_rollout_cls|blankout" in r.rho
    else:
        assert r.effective is None and "refused" in r.effective_note and "norm_rollout_cls|blankout" not in r.rho
        with pytest.raises(NotApplicable):
            metrics.brunner_divergence_gap(pr)
