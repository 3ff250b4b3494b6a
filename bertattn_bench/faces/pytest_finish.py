"""The end of a pytest session: which selected tests ran (an interrupted run's report names the others), the
outcomes carried back from pytest-xdist workers, and the runner's finish printed (the claims table, what was
written)."""
from __future__ import annotations

from ..base.settings import SUMMARY_ENV, env
from ..claims.outcome import ClaimOutcome
from ..runner.plan import Target, model_id

# ---- the end of the session ------------------------------------------------------------------------------------

def claim_label(item) -> str:
    """A selected test as the incomplete report names it: a claim ``claim_id on model / corpus``, a timing row
    ``timing: family on model / corpus``, a negative control ``negative control: family``, else the test's name."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    claim, target = params.get("claim"), params.get("target")
    if target is not None and claim is None and isinstance(target, Target):
        return f"timing: {target.family} on {model_id(target.model)} / {target.corpus}"
    if target is None and "family" in params:
        return f"negative control: {params['family']} on the random-init twin"
    return f"{getattr(claim, 'id', item.name)} on {model_id(target.model)} / {target.corpus}" if target else item.name


def finished(config, nodeid: str) -> None:
    config.__dict__.setdefault("_bertattn_finished", set()).add(nodeid)


def missing_claims(config) -> list[str]:
    """The selected claim tests that did not run (an interrupted session): named in an incomplete report."""
    done = getattr(config, "_bertattn_finished", set())
    return [label for nodeid, label in getattr(config, "_bertattn_selected", {}).items() if nodeid not in done]


def collect_properties(config, props) -> None:
    import json

    from .pytest_session import session

    s = session(config)
    for key, value in props:
        value = json.loads(value) if isinstance(value, str) else value
        if key == "bertattn_outcome":
            s.outcomes.append(ClaimOutcome(**value))
        elif key == "bertattn_pass":
            s.passes.append(value)


def is_xdist_worker(config) -> bool:
    """A pytest-xdist worker: its outcomes reach the controller through the test reports, and only the controller
    writes the report, the figures and the baseline (once, not once per worker)."""
    return hasattr(config, "workerinput")


def terminal_summary(terminalreporter, config) -> None:
    """The runner's finish, printed: the claims table and what the run wrote (the controller only, under xdist)."""
    s = config._bertattn_session
    if not s.outcomes or is_xdist_worker(config):
        return
    terminalreporter.write_sep("=", "bertattn-bench: claims vs measured")
    # a terminal: its width (80..120); a log file (CI): 120
    width = max(80, min(terminalreporter._tw.fullwidth, 120)) if terminalreporter.isatty else 120
    for line in s.finish(missing_claims(config) or None, width=width, summary_file=env(SUMMARY_ENV) or None).lines:
        terminalreporter.write_line(line)
