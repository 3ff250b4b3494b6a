"""The explain family on the BLiMP verb-number task: the pass end to end on a tiny model and a planted BLiMP folder
(the classifier trained by the GLUE skeleton and cached, flow from every output node on every prefix, the guard on
the test prefixes), and the task filter and the per-layer rho metric on planted correlations."""
import json
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from bertattn_bench.claims.registry import NotApplicable
from bertattn_bench.data import blimp
from bertattn_bench.families.explain import metrics
from bertattn_bench.families.explain.run import ExplainResult

NOUNS = [("cat", "cats"), ("dog", "dogs"), ("bird", "birds"), ("horse", "horses")]


def write_blimp(root):
    """Six paradigms of 10 pairs: even pair ids singular subjects, odd ones plural."""
    folder = root / blimp.BLIMP_DIR
    folder.mkdir(parents=True)
    for paradigm in blimp.PARADIGMS:
        lines = []
        for k in range(10):
            sg, pl = NOUNS[k % 4]
            noun, good, bad = (sg, "sleeps", "sleep") if k % 2 == 0 else (pl, "sleep", "sleeps")
            extra = " of the boxes" if paradigm in blimp.DISTRACTOR else ""
            lines.append(json.dumps({"one_prefix_prefix": f"The {noun}{extra}", "one_prefix_word_good": good,
                                     "one_prefix_word_bad": bad, "UID": paradigm, "pairID": str(k)}))
        (folder / f"{paradigm}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_pass_on_a_tiny_verb_number_classifier(tiny, tmp_path, monkeypatch):
    from bertattn_bench.claims.registry import families
    from bertattn_bench.families.explain import constants
    from bertattn_bench.training import blimp_number

    write_blimp(tmp_path)
    monkeypatch.setitem(blimp_number.RECIPES, "quick", replace(blimp_number.RECIPES["quick"], batch_size=8, lr=1e-3))
    monkeypatch.setitem(constants.BLIMP_TIERS, "quick", {"examples": 5, "twin": False})
    pretrained = replace(tiny, info=replace(tiny.info, random_init_seed=None))
    options = {"tier": "quick", "cache_dir": tmp_path / "cache"}
    p = families()["explain"].prepare(pretrained, tmp_path, "blimp", None, 32, options)
    assert "5 of 8" in p.data and "0 pairs" in p.data  # 4 paradigms x 2 test pairs (ids 0, 5)
    p.artifacts()
    run = p.run()
    r = run.result
    assert isinstance(r, ExplainResult) and r.task == "blimp-number" and r.n_examples == 5 and r.n_flow == 5
    assert np.isfinite(r.rho["flow_max|blankout"]).any() and r.rho["flow_max|blankout"].shape == (5, 2)
    assert r.effective is None and "shorter than the head dimension" in r.effective_note
    assert r.train_meta["n_train"] == 32  # 4 simple paradigms x 8 train pairs
    (check,) = run.learning
    assert check.n == 8 and "BLiMP test prefixes" in check.text
    labels = [int(x) for x in p.dev.labels]
    assert labels == [0, 1, 0, 1, 0]  # ids 0 and 5 of each simple paradigm: singular, plural
    assert (tmp_path / "cache" / "blimp_number").is_dir()  # (a model built from a config is never served from it)
    hard = families()["explain"].prepare(pretrained, tmp_path, "blimp-hard", None, 32, options)
    assert "of the boxes" in pretrained.tokenizer.decode(hard.dev.examples[0].input_ids)
    twin = replace(tiny, info=replace(tiny.info, random_init_seed=0))
    assert "no random-init" in families()["explain"].prepare(twin, tmp_path, "blimp", None, 32, options).reason
    # from the regression tier on the twin gets its own verb-number classifier (the GLUE corpora's twin: full only)
    monkeypatch.setitem(constants.BLIMP_TIERS, "regression", {"examples": 5, "twin": True})
    regression = {**options, "tier": "regression"}
    assert families()["explain"].prepare(twin, tmp_path, "blimp", None, 32, regression).reason is None
    from toy_glue import write_mrpc

    write_mrpc(tmp_path, 8, 4)
    assert "no random-init" in families()["explain"].prepare(twin, tmp_path, "mrpc", None, 32, regression).reason


def planted(task: str) -> SimpleNamespace:
    rho = {"rollout_cls|blankout": np.array([[0.1, 0.5, 0.7], [0.2, 0.4, 0.5], [0.0, 0.3, 0.6]])}
    return SimpleNamespace(result=ExplainResult(task=task, tier="quick", seed=0, n_layers=3, n_examples=3, n_flow=3,
                                                lengths=np.array([4, 5, 6]), rho=rho, blank_token="[MASK]",
                                                d_head=None, effective=None))


def test_layer_rho_and_the_task_filter():
    pr = planted("blimp-number")
    m = metrics.explain_layer_rho(pr, tasks=["blimp-number"])  # the last layer: .7 .5 .6
    assert m.value == pytest.approx(0.6) and m.standard_error == pytest.approx(0.1 / np.sqrt(3))
    both = metrics.explain_layer_rho(pr, layers=[2, 3])  # (.6 + .45 + .45) / 3
    assert both.value == pytest.approx(0.5)
    with pytest.raises(NotApplicable, match="this pass is blimp-number"):
        metrics.explain_layer_rho(pr, tasks=["mrpc"])
    with pytest.raises(NotApplicable, match="this pass is mrpc"):
        metrics.explain_reading_gap(planted("mrpc"), tasks=["blimp-number"])
    with pytest.raises(NotApplicable, match="flow from every output node is not computed"):
        metrics.explain_layer_rho(pr, reading="flow_max")


def test_the_curves_figure_and_the_papers_points(tmp_path):
    from bertattn_bench.families.explain import figures

    assert figures.paper_points("blimp-number", "blankout", "flow")[3] == pytest.approx(0.70)
    assert figures.paper_points("mrpc", "gradient", "rollout") == {1: .11, 3: .12, 5: .13, 6: .13}
    assert figures.paper_points("mrpc", "blankout", "raw") == {}  # Table 3 is against gradients only
    mean, half = figures.layer_curve(np.array([[0.1, np.nan], [0.3, 0.2], [0.5, np.nan]]))
    assert np.allclose(mean, [0.3, 0.2]) and half[0] == pytest.approx(1.96 * 0.2 / np.sqrt(3))
    assert np.isnan(half[1])  # one example: no interval
    pr = planted("blimp-number")
    pr.model, pr.corpus = SimpleNamespace(name="toy", slug="toy"), "blimp"
    (path,) = figures.explain_figures([pr, SimpleNamespace(result=None)], tmp_path)
    assert path.name == "explain-curves-toy-blimp.png" and path.stat().st_size > 1000
    # a pass that kept its first example also draws that example's maps
    rel = np.array([[0.5, 0.2, 0.3], [0.6, 0.1, 0.3], [0.7, 0.1, 0.2]])
    pr.result.example = {"tokens": ["[CLS]", "dogs", "[SEP]"], "relevance": {"raw_cls": rel, "rollout_cls": rel},
                         "importance": {"blankout": np.array([0.0, 0.4, 0.1]), "gradient": np.array([0.1, 0.3, 0.0])}}
    curves, example = figures.explain_figures([pr], tmp_path)
    assert curves == path and example.name == "explain-example-toy-blimp.png" and example.stat().st_size > 1000


def test_identifiability_by_hand():
    """Three positions with one-hot input embeddings: layer 1 keeps them (3 identified); layer 2 maps every
    position to position 0's direction (only position 0 identified); layer 3 swaps positions 1 and 2 (1)."""
    import torch

    from bertattn_bench.families.explain import measure

    e = torch.eye(3, dtype=torch.float64)
    states = [e, 2 * e, torch.tensor([[1.0, 0, 0]] * 3, dtype=torch.float64), e[[0, 2, 1]]]
    assert list(measure.identified(states)) == [3, 1, 1]
    hidden = torch.eye(3)[None]
    encoder = lambda **kw: SimpleNamespace(hidden_states=(hidden, 2 * hidden))  # noqa: E731
    got = measure.hidden_states(encoder, {})
    assert len(got) == 2 and got[1].dtype == torch.float64 and torch.equal(got[1], 2 * e)


def test_the_learned_map_undoes_a_planted_affine_layer():
    """Layer 1 is a planted affine map of the input embeddings (h1 = h0 A + b, A mixing the dimensions, b large):
    cosine alone identifies few tokens; the least-squares map fitted on other sequences recovers h0 exactly and
    identifies every token. Without its bias column (a mutation) the fit could not undo b."""
    import torch

    from bertattn_bench.families.explain import measure

    g = torch.Generator().manual_seed(0)
    d = 6
    a = torch.randn(d, d, generator=g, dtype=torch.float64)
    b = 10 * torch.randn(d, generator=g, dtype=torch.float64)

    def sequence(n):
        h0 = torch.randn(n, d, generator=g, dtype=torch.float64)
        return [h0, h0 @ a + b]

    fit = [sequence(5) for _ in range(4)]  # 20 tokens for 7 unknowns per output
    maps = measure.identity_maps(fit)
    assert len(maps) == 1 and maps[0].shape == (d + 1, d)
    torch.testing.assert_close(maps[0][:d], torch.linalg.inv(a))
    torch.testing.assert_close(maps[0][d], -b @ torch.linalg.inv(a))
    read = [sequence(8) for _ in range(3)]
    assert all(measure.identified(s, maps)[0] == 8 for s in read)
    assert sum(int(measure.identified(s)[0]) for s in read) < 24  # the cheap reading misses some


def test_identifiability_metrics_on_planted_counts():
    pr = planted("mrpc")
    pr.result.identified = np.array([[4, 3, 2], [5, 5, 4], [10, 8, 6]])  # lengths 4, 5, 6 ... of 4, 5, 10 tokens
    pr.result.lengths = np.array([4, 5, 10])
    share = metrics.brunner_identifiability_share(pr)  # last layer: 12 of 19
    assert share.value == pytest.approx(12 / 19) and share.n == 19
    lo, hi = share.bounds
    assert lo < 12 / 19 < hi and hi - lo > 0.3  # Wilson on 19 tokens
    drop = metrics.brunner_identifiability_drop(pr)  # per sequence: 2/4, 1/5, 4/10
    assert drop.value == pytest.approx(np.mean([0.5, 0.2, 0.4]))
    with pytest.raises(NotApplicable, match="no identifiability"):
        metrics.brunner_identifiability_share(planted("blimp-number"))
    with pytest.raises(NotApplicable, match="no learned map"):  # the cosine reading only
        pr.result.identity_note = "no learned map: mrpc has no train split here"
        metrics.brunner_identifiability_share(pr, mapping="linear")
    pr.result.identified_linear = np.array([[4, 3, 4], [5, 5, 5], [10, 9, 9]])
    pr.result.identity_note = "linear map"
    learned = metrics.brunner_identifiability_share(pr, mapping="linear")  # last layer: 18 of 19
    assert learned.value == pytest.approx(18 / 19) and "learned linear map" in learned.detail
    gain = metrics.brunner_identifiability_learned_gain(pr)  # per sequence: (4-2)/4, (5-4)/5, (9-6)/10
    assert gain.value == pytest.approx(np.mean([0.5, 0.2, 0.3])) and gain.n == 3
