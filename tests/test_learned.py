"""The learned-model guard (issue 36): a claim that reads a trained model which did not learn is "not judged"."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from test_claims_registry import FakePass, baseline, claim
from test_finetune import glue_dir  # noqa: F401  (the planted MRPC fixture)

from bertattn_bench.claims import learned, registry, stats
from bertattn_bench.claims.catalog import evaluate, load_claims
from bertattn_bench.claims.registry import Measurement
from bertattn_bench.report.claims_report import summary_lines, terminal_table

PASSES_METRIC = "test_learned_passes_metric_xyz"


def _with_passes(pr, passes) -> Measurement:
    return Measurement(pr.result, n=pr.n_examples, n_unit="things")


if PASSES_METRIC not in registry.METRICS:
    registry.metric(PASSES_METRIC)(_with_passes)


@dataclass
class TrainedFakePass(FakePass):
    learning: tuple = field(default_factory=tuple)
    seconds: float = 1.0


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
    assert out.not_judged == DEGENERATE.reason and out.holds is None  # neither side (issue 44: was False)
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
    from bertattn_bench.training import glue_pass as finetuned

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
            assert out.holds is None  # no side (issue 44: was False)
        else:
            assert out.not_judged is None, c.id
    assert n_not_judged >= 2, f"{family}: too few claims measured on the planted pass ({n_not_judged})"


# ---- probes: each trained probe against itself untrained ----------------------------------------------------------

def _probe_features(seed: int):
    """Right-branching sentences (each word's head the next word) with the arc planted in one attention map: every
    probe, the distance MLP too, has something to learn."""
    from test_probes import features, planted

    heads = [np.array(list(range(1, w)) + [-1]) for w in (3, 5, 8, 6) * 8]
    return features(planted(heads, seed=seed), heads, seed=seed)


def test_a_probe_is_tested_against_itself_untrained_by_hand():
    from bertattn_bench.families.probes.models import ProbeScore

    # 12 arcs gained, 2 lost: one-sided exact binomial P(X >= 12 | 14, 1/2) = (C(14,12)+C(14,13)+C(14,14)) / 2^14
    ok = learned.probe("m's Attn probe", "attn", ProbeScore(60.0, 50, untrained_uas=40.0, gained=12, lost=2))
    assert ok.p == pytest.approx((91 + 14 + 1) / 2 ** 14) and ok.learned and ok.key == "attn"
    assert "UAS 60.00 vs 40.00 untrained on the same 50 eval arcs (12 gained, 2 lost)" in ok.text
    still = learned.probe("m's Attn probe", "attn", ProbeScore(40.0, 50, untrained_uas=40.0, gained=0, lost=0))
    assert not still.learned and still.p == 1.0
    noisy = learned.probe("m's Attn probe", "attn", ProbeScore(46.0, 50, untrained_uas=40.0, gained=5, lost=2))
    assert not noisy.learned  # p = 0.23: three more arcs is noise


def test_a_zero_learning_rate_probe_is_not_learned_and_its_claims_are_not_judged():
    """The planted degenerate probe: trained with learning rate 0 it stays at its initial scores; the probes'
    claims that read it are not judged, the others (and every claim on a probe that trained) are judged."""
    from bertattn_bench.families import probes as P
    from bertattn_bench.families.probes.run import SeedProbes, probe_learning

    train, evals = _probe_features(0), _probe_features(1)
    s = P.ProbeSettings(epochs=10, batch_sentences=8)
    cpu = torch.device("cpu")
    good = P.train_probes(train, evals, s, cpu)
    frozen = P.train_probes(train, evals, replace(s, lr_attn=0.0, lr_words=0.0, lr_dist=0.0), cpu)
    for k in ("attn", "attn_words", "dist_words"):
        assert good[k].uas > good[k].untrained_uas and good[k].gained > good[k].lost
        assert frozen[k].uas == frozen[k].untrained_uas and frozen[k].gained == frozen[k].lost == 0

    def result(scores):  # a one-seed result: its seed's probes are its probes
        probes = {**scores, "random_init": scores["attn_words"]}
        return SimpleNamespace(probes=probes, n_train_sentences=30, seed_sets=lambda: [SeedProbes(0, probes)])

    checks = probe_learning("tiny", result(good))
    assert [c.key for c in checks] == ["attn", "attn_words", "dist_words", "random_init"]
    assert all(c.learned for c in checks)
    bad = probe_learning("tiny", result({**good, "dist_words": frozen["dist_words"]}))
    assert [c.learned for c in bad] == [True, True, False, True]
    assert "tiny's Distances + words probe (30 training sentences)" in bad[2].subject
    claims = {c.id: c for c in load_claims(family="probes")}
    reads = {cid: c.reads_trained for cid, c in claims.items()}
    assert reads["clark.probe_right_branching"] is False and reads["clark.probe_dist_words"] == ["dist_words"]
    for cid, c in claims.items():
        pr = TrainedFakePass(5.0, learning=bad)
        out = evaluate(claim(">=", 0.0, id=cid, reads_trained=c.reads_trained), pr)  # the entry's guard, a fake metric
        reads_dist = isinstance(c.reads_trained, list) and "dist_words" in c.reads_trained
        assert bool(out.not_judged) == reads_dist, cid
        if reads_dist:
            assert "did not learn: UAS" in out.not_judged and "untrained" in out.not_judged


def test_the_report_lists_every_trained_model_and_whether_it_learned(tmp_path):
    from bertattn_bench.report.claims_report import guard_section, run_provenance, write_report
    from bertattn_bench.runner.session import pass_lines, pass_summary

    other = replace(DEGENERATE, subject="tiny fine-tuned on rte (seed 0)")
    passes = [pass_summary(TrainedFakePass(5.0, learning=(LEARNED,)), cached=False),
              pass_summary(TrainedFakePass(5.0, family="prune", learning=(LEARNED, other)), cached=True)]
    lines = [x for x in pass_lines(passes) if x.startswith("learned-model guard")]
    assert lines == [f"learned-model guard: {LEARNED.subject}: learned: {LEARNED.text}",
                     f"learned-model guard: {other.subject}: DID NOT LEARN: {other.text}"]  # once each
    provenance = run_provenance(passes, None, "quick", "pytest")
    assert provenance["trained_models"] == [LEARNED.record(), other.record()]
    write_report([evaluate(claim(">=", 0.0), TrainedFakePass(5.0, learning=(LEARNED,)))], tmp_path / "r",
                 provenance=provenance)
    page = (tmp_path / "r" / "claims.md").read_text()
    assert "## Trained models: did each learn?" in page and f"| {other.subject} | **no**" in page
    assert LEARNED.text in page and guard_section([]) == ""
