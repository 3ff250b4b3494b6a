"""Every family's prepared pass implements one protocol (passes.Pass: prepare -> artifacts -> run), found by
scanning the package, so a new family's pass that lacks a part fails here; fine-tuning families make their
checkpoints in ``artifacts``, outside the timed ``run``."""
import dataclasses
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import SimpleNamespace

import bertattn_bench
from bertattn_bench.engine.passes import Pass, PreparedPass

FIELDS = ("family", "corpus", "data", "loaded", "data_paths")
METHODS = ("nothing_to_measure", "artifacts", "run")


def pass_classes() -> dict[str, type]:
    out = {}
    for mod in pkgutil.walk_packages(bertattn_bench.__path__, "bertattn_bench."):
        if mod.name.endswith("pytest_plugin") or mod.name.endswith("__main__"):
            continue
        m = importlib.import_module(mod.name)
        for name, cls in inspect.getmembers(m, inspect.isclass):
            if cls.__module__ == m.__name__ and name.endswith("Pass") and cls is not Pass:
                out[f"{m.__name__}.{name}"] = cls
    return out


def test_every_pass_class_implements_the_protocol():
    classes = pass_classes()
    assert len(classes) >= 10, sorted(classes)  # PreparedPass, GluePass and its four, patterns, probes, arct x2, ...
    for name, cls in classes.items():
        assert dataclasses.is_dataclass(cls), name
        fields = {f.name for f in dataclasses.fields(cls)}
        assert set(FIELDS) <= fields, (name, set(FIELDS) - fields)
        assert "encoded" in fields or isinstance(inspect.getattr_static(cls, "encoded", None), property), name
        for method in METHODS:
            assert callable(getattr(cls, method, None)), (name, method)
            assert "progress" in inspect.signature(getattr(cls, method)).parameters or method == "nothing_to_measure"


def test_no_pass_inherits_another_family_s_measurement():
    """SpeedPass once inherited PrunePass and undid its run: a pass class derives from the shared bases only, or from
    a pass of its own family (explain's BLiMP pass shares the MRPC pass's readings)."""
    from bertattn_bench.training.glue_pass import GluePass

    def family_of(c):
        return c.__module__.split(".")[:3]

    for name, cls in pass_classes().items():
        bases = [b for b in cls.__mro__[1:] if b.__name__.endswith("Pass")]
        assert all(b in (GluePass, PreparedPass) or family_of(b) == family_of(cls) for b in bases), (name, bases)


def test_a_prepared_pass_is_a_pass_instance():
    p = PreparedPass("f", "c", "d", SimpleNamespace(), [], None, lambda: None)
    assert isinstance(p, Pass)
    assert p.artifacts() is None


def test_glue_pass_makes_its_checkpoints_in_artifacts(monkeypatch, tmp_path):
    """Every (model, seed) the measurement reads is fine-tuned (or found) by ``artifacts``; without a checkpoint
    cache nothing is made there (it could not be kept for ``run``)."""
    from bertattn_bench.families.disable import DisablePass
    from bertattn_bench.training import glue_finetune as finetune

    made = []

    class Tuned:
        model = object()

    monkeypatch.setattr(finetune, "finetuned", lambda loaded, task, seed, *a, **k: made.append((loaded, seed)) or Tuned())
    # the guard's test of each fine-tune (it decides a restart, so it runs in artifacts too): planted, learned
    from bertattn_bench.training import glue_pass

    monkeypatch.setattr(glue_pass, "guard_dev", lambda *a, **k: None)
    monkeypatch.setattr(glue_pass, "learning_check", lambda *a, **k: SimpleNamespace(learned=True))
    loaded = SimpleNamespace(info=SimpleNamespace(random_init_seed=None, name="m"))
    task = SimpleNamespace(name="mrpc")
    p = DisablePass("disable", "mrpc", "d", loaded, task, None, (0, 1, 2), "regression", Path("."), tmp_path, [])
    p.artifacts()
    assert made == [(loaded, 0), (loaded, 1), (loaded, 2)]
    made.clear()
    DisablePass("disable", "mrpc", "d", loaded, task, None, (0,), "regression", Path("."), None, []).artifacts()
    assert made == []
    DisablePass("disable", "mrpc", "d", loaded, task, None, (0,), "regression", Path("."), tmp_path, [],
                  reason="no").artifacts()
    assert made == []


def test_a_classifier_as_given_keeps_no_sweep_in_the_working_folder(monkeypatch, tmp_path):
    """A classifier judged as given has a key, not a checkpoint folder ("as-given:<digest>"): its sweeps are computed,
    never kept under that name in the working folder (until stop 70 15 such folders were written there by the tests,
    and committed)."""
    from bertattn_bench.training import glue_finetune as finetune
    from bertattn_bench.training import glue_pass, sweeps

    seen = []
    monkeypatch.setattr(sweeps, "cached_sweep", lambda directory, *a, **k: seen.append(directory) or (None, 0.0, False))
    p = SimpleNamespace(dev="dev", loaded=SimpleNamespace(tokenizer=None))
    as_given = finetune.FineTuned(model=None, meta={"as_given": True, "path": "as-given:0123"}, cached=True)
    ours = finetune.FineTuned(model=None, meta={"path": str(tmp_path)}, cached=True)
    glue_pass.GluePass.sweep(p, as_given, [], "mask")
    glue_pass.GluePass.sweep(p, ours, [], "mask")
    assert seen == [None, str(tmp_path)]
