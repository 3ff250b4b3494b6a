"""The batched core: :func:`forward`, the one forward loop (under one :func:`~.interventions.attention_run`), and
:func:`run_reducers`, which feeds every :class:`Reducer` every layer's attention batch by batch (maps are never
kept)."""
from __future__ import annotations

from contextlib import closing
from typing import Iterator, Sequence

import torch

from .discovery import layers_heads
from .interface import Intervention, Observer, ProbEditor
from .interventions import attention_run, in_a_run


class Reducer:
    """A statistic accumulated batch by batch on the model's device; ``finalize()`` returns a small result.

    A reducer that sets ``wants_hidden_states`` also gets the batch's hidden states (embeddings + every layer) from
    the same forward pass through ``end_batch``. A reducer that sets ``maps_only`` reads nothing the model computes
    after a layer's map: the maps given to ``update``, and what its own hooks saw before the map (the norms family's
    value projections), no output: where every reducer of a run does, and the run has no
    intervention, each batch's forward pass stops once the last layer's map is read (issue 47: the rest of the last
    layer, its value product, output projection and feed-forward block, and the pooler, are never read; not in a
    run nested in another, whose interventions may read there)."""

    wants_hidden_states = False
    maps_only = False

    def start_batch(self, batch) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def end_batch(self, hidden_states: tuple[torch.Tensor, ...] | None) -> None:
        """After the forward pass of the batch; ``hidden_states`` only when some reducer wants them."""

    def update(self, layer: int, probs: torch.Tensor) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def finalize(self):  # pragma: no cover - interface
        raise NotImplementedError


class _LastMapRead(Exception):
    """Leaves a forward pass once the observer has read the last map (:func:`forward`'s ``until_layer``)."""


def forward(model: torch.nn.Module, batches, observe: Observer | None = None, edit_probs: ProbEditor | None = None,
            head_gates: torch.Tensor | None = None, interventions: Sequence[Intervention] = (), hidden: bool = False,
            progress: bool = False, desc: str = "attention",
            until_layer: int | None = None) -> Iterator[tuple[object, object]]:
    """The one forward loop: ``(batch, output)`` per batch, the model run in inference mode under one
    :func:`attention_run` (observers and interventions as there) on ``batch.model_inputs(model)`` (a ``Batch``;
    a dict is taken as the model's inputs as they are). ``hidden``: also every layer's hidden states.
    ``until_layer``: each pass stops once ``observe`` has read that layer's map, and the output is None.

    A generator: the run is active while the caller handles a batch's output, and is left when the loop ends or
    the generator is closed (``contextlib.closing`` around a loop that may stop early or raise)."""
    if progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc=desc, unit="batch", leave=False, disable=None)  # quiet when not a TTY
    extra = {"output_hidden_states": True} if hidden else {}
    if until_layer is not None:
        if observe is None or hidden:
            raise ValueError("until_layer stops a pass after the observer reads a map: it needs an observer and "
                             "no hidden states")
        reader = observe

        def observe(layer: int, probs: torch.Tensor) -> None:
            reader(layer, probs)
            if layer == until_layer:
                raise _LastMapRead
    with torch.inference_mode(), attention_run(model, observe, edit_probs, head_gates, interventions):
        for batch in batches:
            inputs = batch if isinstance(batch, dict) else batch.model_inputs(model)
            try:
                out = model(**inputs, **extra)
            except _LastMapRead:
                out = None
            yield batch, out


def run_reducers(model: torch.nn.Module, batches, reducers: Sequence[Reducer], edit_probs: ProbEditor | None = None,
                 head_gates: torch.Tensor | None = None, progress: bool = False, desc: str = "attention",
                 interventions: Sequence[Intervention] = ()) -> list:
    """:func:`forward` feeding every reducer every layer's attention, one batch at a time; maps are never kept."""

    def observe(layer: int, probs: torch.Tensor) -> None:
        for r in reducers:
            r.update(layer, probs)

    def announced(batches):  # each reducer hears of a batch before its forward pass
        for batch in batches:
            for r in reducers:
                r.start_batch(batch)
            yield batch

    hidden = any(getattr(r, "wants_hidden_states", False) for r in reducers)
    last = None
    if (not hidden and not interventions and all(getattr(r, "maps_only", False) for r in reducers)
            and not in_a_run(model)):  # an outer run's interventions may read past the maps
        last = layers_heads(model)[0] - 1  # nothing reads past the last map: each pass stops there
    with closing(forward(model, announced(batches), observe, edit_probs, head_gates, interventions, hidden, progress,
                         desc, until_layer=last)) as outputs:  # a reducer that raises leaves the run at once, not when collected
        for _, out in outputs:
            for r in reducers:
                if hasattr(r, "end_batch"):
                    r.end_batch(out.hidden_states if hidden else None)
    return [r.finalize() for r in reducers]
