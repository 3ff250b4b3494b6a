"""A run's plan, named: a pass (:class:`Target`), the test ids every face selects by (:func:`plan_id`), ``-k``
selections, the plan's rows (:class:`PlanRow`) and the order of families. What the runner plans with
(:meth:`~bertattn_bench.runner.session.Runner.plan`) and the faces show."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..base.errors import BenchError

EVERY_FAMILY = "*"  # a benchmark module's FAMILY that stands for every registered family


@dataclass(frozen=True)
class Target:
    """One pass: a model, a corpus, a family."""

    model: str
    corpus: str
    family: str

    @property
    def id(self) -> str:
        return f"{model_id(self.model)}-{self.corpus}"


def model_id(name: str) -> str:
    """A model as a word of test ids: ``minilm`` for the embedded model, a folder's name, a hub name's last part;
    a random-init twin is ``random<seed>`` (``random0``), a word that holds no other model's id, so ``-k minilm``
    selects the model and not its twin, and ``-k random`` the twins."""
    from ..engine.model import EMBEDDED, RANDOM_PREFIX

    if name in (EMBEDDED, "", None):
        return "minilm"
    if name.startswith(RANDOM_PREFIX):
        seed = name[len(RANDOM_PREFIX):].partition("@")[2].strip() or "0"
        return f"random{seed}"
    return Path(name).name or name


def paper_key(paper: str | None) -> str:
    """A claim's paper as a word for test ids and selections: "Kovaleva et al. 2019" -> "kovaleva"."""
    return (paper or "other").split()[0].lower()


def plan_id(paper: str | None, family: str, target: Target | None = None, claim_id: str | None = None) -> str:
    """The one id of a test (every face selects by it: pytest's ``-k``, the API's ``select``, ``list -k``):
    ``paper-family-model-corpus`` for a pass, ``...-claim`` for a claim, ``paper-family-claim`` without a target."""
    return "-".join([paper_key(paper), family] + ([target.id] if target else []) + ([claim_id] if claim_id else []))


def random_twin_name(model: str) -> str:
    """The random-init twin a model's negative control runs on (a twin is its own twin)."""
    from ..engine.model import RANDOM_PREFIX

    return model if model.startswith(RANDOM_PREFIX) else f"{RANDOM_PREFIX}{model}"


def selection(select) -> Callable[[str], bool]:
    """A predicate over test ids from a ``-k`` expression (None or "": everything; a callable: itself)."""
    if select is None or select == "":
        return lambda _id: True
    if callable(select):
        return select
    from _pytest.mark.expression import Expression

    try:
        expr = Expression.compile(select)
    except Exception as exc:  # pytest's ParseError: say which argument
        raise BenchError(f"select={select!r}: not a -k expression ({exc})") from None

    def matches(id_: str) -> bool:
        low = id_.lower()
        return expr.evaluate(lambda word, **_: word.lower() in low)

    return matches


@dataclass(frozen=True)
class PlanRow:
    """One pass of a run's plan and the claims judged on it, in the order of tests and tables."""

    target: Target
    claims: tuple
    test_id: str  # the pass's test id (test_attention_core's; the negative control's test)
    negative_control: bool = False

    def claim_test_id(self, claim) -> str:
        return plan_id(claim.paper, self.target.family, self.target, claim.id)



def family_order() -> list[str]:
    """Every registered family, ordered by paper (the first claim's) and name: the order of tests and tables."""
    from ..claims.catalog import load_claims
    from ..claims.registry import families

    catalog = load_claims()

    def order(name: str):
        claims = [c for c in catalog if c.family == name]
        return (paper_key(claims[0].paper) if claims else "~", name)

    return sorted(families(), key=order)
