"""Issue 47: a run whose reducers read nothing but the maps stops each forward pass after the last layer's map.

The maps the reducers read are the same with and without the stop, on one model of each attention path; the stop
leaves out modules (the last layer's value product onward); it does not happen where something may read past the
maps: a reducer that is not maps-only, one that wants hidden states, an intervention, a run nested in another."""
from __future__ import annotations

import os

import architecture_matrix as A
import pytest
import torch
from torch.nn.modules.module import register_module_forward_hook

from bertattn_bench.engine.attention import Intervention, Reducer, attention_run, forward, run_reducers, zero_heads
from bertattn_bench.engine.batching import encode_words, iter_batches

# one model of each attention path by default; every row of the architecture table with BERTATTN_ALL_ARCHITECTURES=1
PATHS = ("BERT", "ALBERT", "MPNet", "DeBERTa-v2/v3", "XLNet", "ConvBERT", "DistilBERT", "ModernBERT", "RoFormer")
CHOSEN = A.MATRIX if os.environ.get("BERTATTN_ALL_ARCHITECTURES") == "1" else [a for a in A.MATRIX if a.label in PATHS]
SENTENCES = [["The", "cat", "sat", "on", "the", "mat", "."], ["Unbelievably", ",", "tokenization", "splits"],
             ["Short"], ["A", "much", "longer", "sentence", "with", "several", "words", "in", "it", "."]]


class Recorder(Reducer):
    """Keeps every map it is given (a test reducer), and the outputs ``end_batch`` gets."""

    def __init__(self, maps_only: bool = True, hidden: bool = False):
        self.maps_only, self.wants_hidden_states = maps_only, hidden
        self.maps: list[tuple[int, torch.Tensor]] = []
        self.ended = 0

    def start_batch(self, batch) -> None:
        pass

    def update(self, layer: int, probs: torch.Tensor) -> None:
        self.maps.append((layer, probs.clone()))

    def end_batch(self, hidden_states=None) -> None:
        self.ended += 1

    def finalize(self):
        return self.maps


def _batches(loaded, tokenizer):
    encoded = [encode_words(tokenizer, i, s) for i, s in enumerate(SENTENCES)]
    return lambda: iter_batches(encoded, tokenizer, torch.device("cpu"), 2)


def _run(loaded, tokenizer, reducers, **kw) -> int:
    """Runs ``reducers``; returns how many module calls the forward passes made."""
    calls = [0]
    handle = register_module_forward_hook(lambda m, i, o: calls.__setitem__(0, calls[0] + 1))
    try:
        run_reducers(loaded.model, _batches(loaded, tokenizer)(), reducers, **kw)
    finally:
        handle.remove()
    return calls[0]


def _same_maps(a: Recorder, b: Recorder) -> None:
    assert [layer for layer, _ in a.maps] == [layer for layer, _ in b.maps]
    for (_, x), (_, y) in zip(a.maps, b.maps):
        assert torch.equal(x, y)


@pytest.mark.parametrize("arch", CHOSEN, ids=lambda a: a.label)
def test_the_stop_reads_the_same_maps_and_runs_fewer_modules(arch, tokenizer):
    from bertattn_bench.base.errors import ModelLoadError

    try:
        loaded = A.build(arch, tokenizer)
    except ModelLoadError as exc:
        pytest.skip(f"refused: {exc}"[:200])
    n_layers = loaded.info.n_layers
    stopped, whole = Recorder(maps_only=True), Recorder(maps_only=False)
    calls_stopped = _run(loaded, tokenizer, [stopped])
    calls_whole = _run(loaded, tokenizer, [whole])
    _same_maps(stopped, whole)
    assert [layer for layer, _ in stopped.maps] == list(range(n_layers)) * 2  # two batches, every layer
    assert stopped.ended == whole.ended == 2  # end_batch still called once per batch
    assert calls_stopped < calls_whole, (calls_stopped, calls_whole)


def test_nothing_that_may_read_past_the_maps_is_stopped(tiny, tokenizer):
    base = _run(tiny, tokenizer, [Recorder(maps_only=False)])
    assert _run(tiny, tokenizer, [Recorder()]) < base
    # one reducer that is not maps-only, or wants hidden states, keeps the whole pass
    assert _run(tiny, tokenizer, [Recorder(), Recorder(maps_only=False)]) == base
    assert _run(tiny, tokenizer, [Recorder(hidden=True)]) == base
    # an intervention may act past the maps (a head's output): the whole pass
    assert _run(tiny, tokenizer, [Recorder()], interventions=[Intervention("observe", lambda layer, p: None)]) == base
    # a run nested in another: the outer run's interventions may read past the maps
    seen = []
    with attention_run(tiny.model, interventions=[Intervention("observe", lambda layer, p: seen.append(layer))]):
        assert _run(tiny, tokenizer, [Recorder()]) == base
    assert seen == [0, 1, 0, 1]


def test_head_gates_and_prob_edits_still_apply_before_the_stop(tiny, tokenizer):
    """``edit_probs`` changes the maps the reducers read and stays allowed with the stop (it acts on the map); head
    gates act on heads' outputs, which the stop never reads: both keep the stop."""
    def halve(layer, probs, key_mask):
        return probs * 0.5

    gates = zero_heads(2, 4, [(0, 1)])
    gated, gated_whole = Recorder(), Recorder(maps_only=False)
    assert _run(tiny, tokenizer, [gated], head_gates=gates) < _run(tiny, tokenizer, [gated_whole], head_gates=gates)
    _same_maps(gated, gated_whole)  # layer 1's maps follow layer 0's gated heads, with or without the stop

    stopped, whole = Recorder(), Recorder(maps_only=False)
    _run(tiny, tokenizer, [stopped], edit_probs=halve)
    _run(tiny, tokenizer, [whole], edit_probs=halve)
    _same_maps(stopped, whole)
    plain = Recorder()
    _run(tiny, tokenizer, [plain])
    assert torch.allclose(stopped.maps[0][1] * 2, plain.maps[0][1])


def test_until_layer_needs_an_observer_and_no_hidden_states(tiny, tokenizer):
    batches = _batches(tiny, tokenizer)
    with pytest.raises(ValueError, match="until_layer"):
        list(forward(tiny.model, batches(), None, until_layer=1))
    with pytest.raises(ValueError, match="until_layer"):
        list(forward(tiny.model, batches(), lambda layer, p: None, hidden=True, until_layer=1))
    outs = [out for _, out in forward(tiny.model, batches(), lambda layer, p: None, until_layer=1)]
    assert outs == [None, None]


def _equal(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if hasattr(a, "__dataclass_fields__"):
        return _equal(vars(a), vars(b))
    return a == b


def test_the_norms_reducers_read_nothing_past_the_maps(tiny, tokenizer, monkeypatch):
    """The norms family's reducers read each layer's value projection through a hook that fires before the map:
    stopped after the last map, they give the same numbers as the whole pass."""
    from bertattn_bench.engine.attention_norms import norm_reading
    from bertattn_bench.families.norms import MixingReducer, NormsReducer

    def reduce():
        with norm_reading(tiny.model) as reader:
            plain = NormsReducer(reader, 2, 4, "cpu", tokenizer.all_special_ids)
            mixing = MixingReducer(reader, 2, "cpu")
            calls = _run(tiny, tokenizer, [plain, mixing])
        return calls, plain.finalize(), mixing.finalize()

    stopped = reduce()
    monkeypatch.setattr(NormsReducer, "maps_only", False)
    whole = reduce()
    assert stopped[0] < whole[0]
    assert _equal(stopped[1], whole[1]) and _equal(stopped[2], whole[2])
