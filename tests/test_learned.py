"""The learned-model guard (issue 36): a claim that reads a trained model which did not learn is "not judged"."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest

from bertattn_bench import learned, registry, stats
from bertattn_bench.registry import Measurement
from bertattn_bench.claims import evaluate, load_claims
from bertattn_bench.report import summary_lines, terminal_table

from test_claims_registry import FakePass, baseline, claim
from test_finetune import glue_dir  # noqa: F401  (the planted MRPC fixture)


PASSES_METRIC = "test_learned_passes_metric_xyz"


def _with_passes(pr, passes) -> Measurement:
    return Measurement(pr.result, n=pr.n_examples, n_unit="things")


if PASSES_METRIC not in registry.METRICS:
    registry.metric(PASSES_METRIC)(_with_passes)


@dataclass
class TrainedFakePass(FakePass):
    learning: tuple = field(default_factory=tuple)


DEGENERATE = learned.classifier("tiny fine-tuned on mrpc (seed 0)", np.ones(64, int),
                                np.array([1] * 43 + [0] * 21))  # always the majority class: 43 of 64
LEARNED = learned.classifier("tiny fine-tuned on mrpc (seed 0)", np.array([1] * 40 + [0] * 24),
                             np.array([1] * 40 + [0] * 20 + [1] * 4))  # 60 of 64 right


def test_exact_one_sided_binomial_by_hand():
    assert stats.binomial_above_p(8, 10, 0.5) == pytest.approx(56 / 1024)  # (45 + 10 + 1) / 2^10
    assert stats.binomial_above_p(0, 10, 0.3) == pytest.approx(1.0)
    assert stats.binomial_above_p(5, 5, 1.0) == 1.0 and stats.binomial_above_p(0, 0, 0.5) == 1.0
    r, p = stats.correlation_above_zero_p([1, 2, 3, 4, 5], [1, 2, 3, 4, 6])
    assert r > 0.9 and p < 0.01
    assert stats.correlation_above_zero_p([1, 1, 1], [1, 2, 3]) == (0.0, 1.0)


def test_the_majority_class_did_not_learn_and_says_its_numbers():
    assert not DEGENERATE.learned and DEGENERATE.p == pytest.approx(stats.binomial_above_p(43, 64, 43 / 64))
    assert DEGENERATE.reason == ("tiny fine-tuned on mrpc (seed 0) did not learn: dev acc 67.19 vs majority 67.19 "
                                 f"(n=64), one-sided binomial p={DEGENERATE.p:.2g}")
    assert LEARNED.learned and LEARNED.p < learned.ALPHA
    # just above the majority is not enough: 46 of 64 against 43 of 64
    near = learned.classifier("m", np.array([1] * 43 + [0] * 21), np.array([1] * 43 + [0] * 3 + [1] * 18))
    assert near.score == pytest.approx(100 * 46 / 64) and not near.learned
    reg = learned.glue("m", type("T", (), {"is_regression": True})(), np.arange(30.0), np.arange(30.0) ** 1.1)
    assert reg.learned and "Pearson r" in reg.text
    flat = learned.glue("m", type("T", (), {"is_regression": True})(), np.zeros(30), np.arange(30.0))
    assert not flat.learned


def test_best_of_runs_is_bonferroni_corrected():
    runs = [learned.classifier(f"seed {s}", np.ones(64, int), np.array([1] * 32 + [0] * 32)) for s in range(4)]
    assert not learned.best_of("arct", runs).learned
    good = learned.classifier("seed 9", np.array([1] * 32 + [0] * 32), np.array([1] * 32 + [0] * 32))
    both = learned.best_of("arct", runs + [good])
    assert both.learned and "best of 5 runs (seed 9)" in both.text and "Bonferroni x5" in both.text


def test_a_claim_on_a_model_that_did_not_learn_is_not_judged():
    out = evaluate(claim(">=", 0.0), TrainedFakePass(5.0, learning=(DEGENERATE,)))
    assert out.not_judged == DEGENERATE.reason and out.holds is False
    assert out.verdict == f"not judged: {DEGENERATE.reason}"
    assert "dev acc 67.19 vs majority 67.19 (n=64)" in out.verdict
    assert out.passed  # no baseline: reported, not failed
    assert out.measured == 5.0  # the value is still shown
    judged = evaluate(claim(">=", 0.0), TrainedFakePass(5.0, learning=(LEARNED,)))
    assert judged.not_judged is None and judged.holds and judged.verdict == "holds"
    # a claim whose subject is the degenerate run, or that reads no trained model, is judged regardless
    for c in (claim(">=", 0.0, reads_degenerate=True), claim(">=", 0.0, reads_trained=False)):
        out = evaluate(c, TrainedFakePass(5.0, learning=(DEGENERATE,)))
        assert out.not_judged is None and out.verdict == "holds"


def test_a_pass_read_beside_the_claims_own_carries_its_guard():
    other = TrainedFakePass(0.0, corpus="rte", learning=(replace(DEGENERATE, subject="tiny fine-tuned on rte"),))
    out = evaluate(claim(">=", 0.0, inputs=[{"corpus": "rte"}], metric=PASSES_METRIC), TrainedFakePass(5.0, learning=(LEARNED,)),
                   others=lambda c: [other])
    assert out.not_judged and "tiny fine-tuned on rte did not learn" in out.not_judged


def test_not_judged_against_a_baseline():
    pr = TrainedFakePass(5.0, learning=(DEGENERATE,))
    lost = evaluate(claim(">=", 0.0), pr, baseline(5.0, True))  # judged (and held) when recorded
    assert lost.passed is False and "lost judgement" in lost.check_failure
    still = baseline(5.0, False)
    still["results"]["t.claim@fake_corpus"]["not_judged"] = "recorded: did not learn"
    assert evaluate(claim(">=", 0.0), pr, still).passed  # not judged then and now, same n
    still["results"]["t.claim@fake_corpus"]["n"] = 99
    assert not evaluate(claim(">=", 0.0), pr, still).passed
    # --compare-to: a claim that held on model A and is not judged here is a regression
    assert evaluate(claim(">=", 0.0), pr, baseline(5.0, True), mode="compare").baseline_ok is False


def test_tables_show_the_state():
    outs = [evaluate(claim(">=", 0.0), TrainedFakePass(5.0, learning=(DEGENERATE,))),
            evaluate(claim(">=", 0.0, id="t.other"), TrainedFakePass(5.0, learning=(LEARNED,)))]
    table = terminal_table(outs, width=200)
    assert "not judged" in table
    (line,) = summary_lines(outs)
    assert "1 of 1 claims hold" in line and "1 not judged" in line


TRAINED_FAMILIES = ("finetune", "disable", "prune")


@pytest.mark.parametrize("family", TRAINED_FAMILIES)
def test_a_zero_learning_rate_fine_tune_turns_every_claim_reading_it_into_not_judged(tiny, glue_dir, tmp_path,
                                                                                      monkeypatch, family):
    """The planted degenerate fine-tune: learning rate 0 (the head stays at its random init). Through the real pass
    (``GluePass.run``, the one place every GLUE family's pass records its guard) every claim of the family that
    reads the fine-tuned model is not judged, with the dev accuracy, the majority and p in its verdict."""
    from bertattn_bench.metrics import finetuned

    real = finetuned.recipe_for
    monkeypatch.setattr(finetuned, "recipe_for", lambda task, tier="regression": replace(real(task, tier), lr=0.0))
    finetuned._LEARNING.clear()
    prepare = registry.families()[family].prepare
    pretrained = replace(tiny, info=replace(tiny.info, random_init_seed=None))  # as a pre-trained model
    p = prepare(pretrained, glue_dir, "mrpc", None, 32, {"tier": "quick", "cache_dir": tmp_path / "cache"})
    p.artifacts()
    pr = p.run()
    (check,) = pr.learning
    assert not check.learned and check.n == 20 and "dev acc" in check.text
    claims = [c for c in load_claims(family=family) if not c.inputs]
    guarded = [c for c in claims if c.reads_trained and not c.reads_degenerate]
    assert guarded
    n_not_judged = 0
    for c in claims:
        out = evaluate(c, pr)
        if out.skipped:
            continue
        n_not_judged += bool(out.not_judged)
        if c in guarded:
            assert out.verdict.startswith("not judged: ") and check.text in out.verdict, c.id
            assert out.holds is False
        else:
            assert out.not_judged is None, c.id
    assert n_not_judged >= 2, f"{family}: too few claims measured on the planted pass ({n_not_judged})"
