"""The budget tiers: quick (smoke run), regression (recorded), full — what each one changes, and how it shows."""
import pytest

from bertattn_bench.base.errors import BenchError
from bertattn_bench.claims import tiers
from bertattn_bench.claims.registry import families
from bertattn_bench.training import glue_pass as finetuned


def test_tier_names_and_errors():
    assert tiers.NAMES == ("quick", "regression", "full") and tiers.DEFAULT == "quick"
    assert tiers.check("full") == "full"
    with pytest.raises(BenchError, match=r"BERTATTN_TIER= 'fast': expected one of quick, regression, full"):
        tiers.check("fast", "BERTATTN_TIER=")


def test_label_suffix_leaves_out_the_recorded_tier_only():
    assert tiers.suffix([None, "regression"]) == ""
    assert tiers.suffix(["quick", None]) == "+quick"
    assert tiers.suffix(["full", "quick", "full"]) == "+full+quick"


def test_every_family_runs_in_every_tier():
    for fam in families().values():
        for tier in tiers.NAMES:
            assert fam.default_corpora(tier), (fam.name, tier)
            assert set(fam.default_corpora(tier)) <= set(fam.corpora), (fam.name, tier)


def test_quick_caps_forward_families_and_an_explicit_limit_wins():
    fams = families()
    assert fams["surface"].tier_limit("quick", None) == (300, "quick")
    assert fams["gradient"].tier_limit("quick", None) == (200, "quick")
    assert fams["surface"].tier_limit("quick", 40) == (40, None)  # the user chose n: no tier in the label
    assert fams["surface"].tier_limit("regression", None) == (None, None)
    assert fams["surface"].tier_limit("full", None) == (None, None)
    assert fams["dependency"].tier_limit("quick", None) == (None, None)  # seconds: read whole in every tier


def test_quick_recipe_is_one_epoch_over_all_pairs_in_small_batches():
    q, r = finetuned.recipe_for("mrpc", "quick"), finetuned.recipe_for("mrpc", "regression")
    assert (q.epochs, q.max_train, q.batch_size, q.lr) == (1, None, 16, 1e-4)
    assert (r.epochs, r.max_train, r.batch_size, r.lr) == (3, None, 32, 5e-5)  # the paper's (Kovaleva §3)
    assert q.key() != r.key()  # the checkpoint cache keeps the two apart
    assert finetuned.recipe_for("sst-2", "quick").max_train == finetuned.SUBSAMPLE["sst-2"]
    assert finetuned.recipe_for("sst-2", "regression").max_train == finetuned.SUBSAMPLE["sst-2"]
    assert finetuned.dev_limit("quick", None) == 64 and finetuned.dev_limit("quick", 10) == 10
    assert finetuned.dev_limit("regression", None) is None and finetuned.dev_limit("regression", 10) == 10


def test_unknown_tier_from_the_environment_is_a_usage_error(pytester, monkeypatch):
    """A benchmark module stops at start-up on a bad BERTATTN_TIER; an unrelated project's run is not touched (the
    plugin reads no bertattn variable until a benchmark module is collected)."""
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    monkeypatch.setenv("BERTATTN_TIER", "fast")
    assert pytester.runpytest_subprocess("-p", "no:cacheprovider").ret == pytest.ExitCode.OK
    pytester.makepyfile(test_bench='FAMILY = "dependency"\n\ndef test_claim(bench, target):\n    pass\n')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.re_match_lines([r".*BERTATTN_TIER= 'fast': expected one of quick, regression, full.*"])


def test_families_that_train_say_so_at_registration():
    """The plugin passes the training options (tier, checkpoint cache) and the cache keys the thread count by the
    registration flag, not by reading signatures: the flag must agree with what each prepare accepts."""
    import inspect

    from bertattn_bench.runner.cache import threads_matter

    trains = {f.name for f in families().values() if f.trains}
    assert trains == {"finetune", "disable", "patterns", "prune", "speedup", "probes", "arct_ft", "explain", "gates",
                      "trees_ft"}
    for fam in families().values():
        assert fam.trains == ("options" in inspect.signature(fam.prepare).parameters), fam.name
        assert threads_matter(fam.name) == fam.trains


def test_every_per_tier_table_names_every_tier():
    """A per-tier budget table that misses a tier would fail (KeyError) only when that tier runs: checked here."""
    from bertattn_bench.families import arct_ft as arct_models
    from bertattn_bench.families import framenet, patterns, probes, speedup
    from bertattn_bench.families import prune as pruning

    tables = {"finetuned.TIERS": finetuned.TIERS, "pruning.TIER_IMPORTANCE_EXAMPLES": pruning.TIER_IMPORTANCE_EXAMPLES,
              "patterns.TIER_DEV_MAX": patterns.TIER_DEV_MAX, "patterns.TIER_UD_MAX": patterns.TIER_UD_MAX,
              "patterns.TIER_CORPORA": patterns.TIER_CORPORA, "framenet.TIER_CORPORA": framenet.TIER_CORPORA,
              "probes.TIERS": probes.TIERS, "speedup.TIERS": speedup.TIERS, "arct_models.TIERS": arct_models.TIERS}
    for name, table in tables.items():
        assert set(table) == set(tiers.NAMES), name


def test_a_one_seed_fine_tune_takes_the_training_seed(monkeypatch):
    """$BERTATTN_SEED picks the checkpoint of a task the tier trains once (scripts/spread.py's seed spread) and the
    first of the regression tier's three; a task with listed seeds (the full tier's MRPC and RTE) keeps them."""
    from bertattn_bench.base.settings import from_environment  # the faces' one reader (issue 44)

    assert finetuned.tier_seeds("quick", "mrpc") == (0,)
    monkeypatch.setenv("BERTATTN_SEED", "2")
    seed = from_environment()["seed"]
    assert finetuned.tier_seeds("quick", "mrpc", seed) == (2,) and finetuned.tier_seeds("regression", "mrpc", seed) == (2, 3, 4, 5, 6)
    assert finetuned.tier_seeds("regression", "mrpc") == (0, 1, 2, 3, 4)  # the recorded tier trains five (issue 61)
    assert finetuned.tier_seeds("full", "mrpc", seed) == (0, 1, 2, 3, 4) and finetuned.tier_seeds("full", "sts-b", seed) == (2,)
