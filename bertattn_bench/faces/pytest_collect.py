"""The pytest face's collection: the benchmark modules' tests parametrized from the runner's plan, then, after -k,
the start-up checks (options, data, each model loaded once) as usage errors before any test runs."""
from __future__ import annotations

import pytest

from ..base.errors import BenchError
from ..runner.plan import EVERY_FAMILY, Target
from .pytest_finish import claim_label
from .pytest_session import session

# ---- collection --------------------------------------------------------------------------------------------------

def generate_tests(metafunc):
    """Parametrize a benchmark module's tests from the runner's plan: ``target`` over its rows (model, corpus) of
    the module's families, ``claim`` over each row's claims, jointly; ``control`` over the negative-control rows.
    Ids are the plan's (``paper-family-model-corpus[-claim]``), so that ``-k`` selects by paper, family, model,
    corpus or claim. A bad option is kept for the end of the collection (a usage error raised here would be a
    collection error, not exit status 4)."""
    config = metafunc.config
    names = [n for n in ("target", "claim", "control") if n in metafunc.fixturenames]
    if not names:
        return
    try:
        s = session(config)
    except pytest.UsageError as exc:
        config._bertattn_usage_error = str(exc)
        return
    family = getattr(metafunc.module, "FAMILY", None)
    rows = s.plan(families=None if family == EVERY_FAMILY else [family])
    if "control" in names:
        controls = [r for r in rows if r.negative_control]
        metafunc.parametrize("control", controls, ids=[r.test_id for r in controls])
        return
    rows = [r for r in rows if not r.negative_control]
    if "claim" not in names:
        metafunc.parametrize("target", [r.target for r in rows], ids=[r.test_id for r in rows])
        return
    params = [((r.target, c) if "target" in names else c) for r in rows for c in r.claims]
    ids = [r.claim_test_id(c) for r in rows for c in r.claims]
    metafunc.parametrize(names if len(names) > 1 else names[0], params, ids=ids)


def _target(item) -> Target | None:
    """The pass a collected benchmark test runs on (a claim's or the pass's target, a negative control's twin)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    target = params.get("target") or getattr(params.get("control"), "target", None)
    return target if isinstance(target, Target) else None


def check_collected(config, items) -> None:
    """After -k / -m: a bad option, then a bad data directory (a clear message naming the option), then each model
    the selected tests need loaded once: each a usage error before any test runs. ``--collect-only`` needs neither
    data nor models."""
    if hasattr(config, "_bertattn_usage_error"):
        raise pytest.UsageError(config._bertattn_usage_error)
    config._bertattn_selected = {i.nodeid: claim_label(i) for i in items}  # every kind: claims, controls, timings
    if config.option.collectonly:
        return
    s = session(config)
    try:
        # a missing corpus: fetched into the default data folder, else one line naming it and the fetch command
        s.ensure_data(list(dict.fromkeys((t.family, t.corpus) for t in map(_target, items) if t)))
    except BenchError as exc:
        raise pytest.UsageError(str(exc)) from exc
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller diagnosed the models (a usage error here would be an INTERNALERROR)
    needed = []
    for item in items:
        if "bench" not in getattr(item, "fixturenames", ()):
            continue
        target = _target(item)
        needed += [target.model] if target else s.options.models[:1]
    diagnose_models(config, dict.fromkeys(needed))


def diagnose_models(config, names) -> None:
    """Load each model once at start-up (the session keeps it): a bad model is one usage error, not a failure in
    every test. Hugging Face's "Loading weights" bars are off while loading, and as before afterwards."""
    from transformers.utils import logging as hf_logging

    s = session(config)
    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        for name in names:
            s.model(name, at_startup=True)
    finally:
        if was_on:
            hf_logging.enable_progress_bar()
