"""The intervention stack (:func:`attention_run`: one frame per nested run on every attention module) and the
papers' interventions: Kovaleva's uniform attention (:func:`uniform_attention`, :class:`UniformRows`), Michel's head
gates (:func:`gate_heads`, :func:`zero_heads`) and their gradients (:func:`head_gate_gradients`)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import torch

from .discovery import INTERFACE, SEAM, attention_modules, seam_reason, site
from .head_names import head_name
from .interface import Frame, Intervention, Observer, ProbEditor


@contextmanager
def attention_run(
    model: torch.nn.Module,
    observe: Observer | None = None,
    edit_probs: ProbEditor | None = None,
    head_gates: torch.Tensor | None = None,
    interventions: Sequence[Intervention] = (),
) -> Iterator[None]:
    """Activate reading/interventions on ``model`` for the duration of the block.

    ``observe``, ``edit_probs`` and ``head_gates`` are shorthands for ``Intervention("observe"|"probs", fn)`` and
    :func:`gate_heads`; ``interventions`` lists any others. Runs nest: the inner run's frame is applied after the
    outer one's, and leaving a block removes its own frame only.
    """
    mods = attention_modules(model)
    frame = Frame(interventions)
    if edit_probs is not None:
        frame.append(Intervention("probs", edit_probs))
    if observe is not None:
        frame.append(Intervention("observe", observe))
    if head_gates is not None:
        frame.append(gate_heads(head_gates))
    path = site(model).path
    if path != INTERFACE and any(iv.point == "scores" for iv in frame):
        raise ValueError(f"{type(model).__name__}: its attention is its own code; the 'scores' point is not "
                         f"reachable there (probs, observe and head_out are)")
    if path == SEAM:
        bad = [iv for iv in frame if iv.point == "probs" and not hasattr(iv.fn, "uniform_mask")]
        if bad:
            raise ValueError(f"{type(model).__name__}: {seam_reason(model)}")
    for layer, mod in enumerate(mods):
        if "_bertattn_stack" not in mod.__dict__:
            mod._bertattn_stack = []
        mod._bertattn_layer = layer
        mod._bertattn_stack.append(frame)
    try:
        yield
    finally:
        for mod in mods:
            stack = mod.__dict__.get("_bertattn_stack", [])
            for i in range(len(stack) - 1, -1, -1):
                if stack[i] is frame:
                    del stack[i]
                    break
            if not stack:
                mod.__dict__.pop("_bertattn_stack", None)


def in_a_run(model: torch.nn.Module) -> bool:
    """Whether an :func:`attention_run` is active on ``model`` (a run entered now would nest in it)."""
    return any(mod.__dict__.get("_bertattn_stack") for mod in attention_modules(model))


# ---- interventions (functions passed in) -------------------------------------------------------------------------

def _uniform_over_real_keys(probs: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    """``(B, 1, Q|1, K)``: 1/n over each example's n real (unpadded) keys, 0 on padding (Kovaleva's stub)."""
    uniform = key_mask.to(probs.dtype)
    return (uniform / uniform.sum(-1, keepdim=True)).unsqueeze(1)


def uniform_attention(heads: Sequence[tuple[int, int]]) -> ProbEditor:
    """Kovaleva et al. §4.6 "disabling" a head: its attention becomes uniform 1/L over the real tokens.

    ``heads``: 0-based ``(layer, head)`` pairs; a layer is disabled by listing all its heads.
    """
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)

    def edit(layer: int, probs: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        hs = by_layer.get(layer)
        if not hs:
            return probs
        uniform = _uniform_over_real_keys(probs, key_mask).expand(-1, 1, probs.shape[2], -1)
        probs = probs.clone()
        probs[:, hs] = uniform.expand(-1, len(hs), -1, -1)
        return probs

    def uniform_mask(layer: int, b: int, h: int, device) -> torch.Tensor | None:
        """(B, H) True where the head's attention is uniform (the seam path applies it to the context)."""
        hs = by_layer.get(layer)
        if not hs:
            return None
        m = torch.zeros(b, h, dtype=torch.bool, device=device)
        m[:, hs] = True
        return m

    edit.uniform_mask = uniform_mask
    return edit


class UniformRows:
    """Kovaleva's disabling with a configuration per batch row: ``set(mask)`` with ``mask (B, L, H)`` boolean,
    True where row b's head (l, h) is disabled. Lets one forward pass evaluate many configurations (the sweep):
    each row is one (example, configuration), and a row equals :func:`uniform_attention` of its own heads alone.
    """

    def __init__(self) -> None:
        self.mask: torch.Tensor | None = None

    def set(self, mask: torch.Tensor) -> "UniformRows":
        self.mask = mask
        return self

    def __call__(self, layer: int, probs: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        if self.mask is None:
            raise RuntimeError("UniformRows: set(mask) before the forward pass")
        if self.mask.shape[0] != probs.shape[0] or self.mask.shape[2] != probs.shape[1]:
            raise ValueError(f"UniformRows: mask {tuple(self.mask.shape)} does not fit probs {tuple(probs.shape)}")
        rows = self.mask[:, layer]  # (B, H)
        if not bool(rows.any()):
            return probs
        return torch.where(rows[:, :, None, None], _uniform_over_real_keys(probs, key_mask), probs)

    def uniform_mask(self, layer: int, b: int, h: int, device) -> torch.Tensor:
        if self.mask is None:
            raise RuntimeError("UniformRows: set(mask) before the forward pass")
        if self.mask.shape[0] != b or self.mask.shape[2] != h:
            raise ValueError(f"UniformRows: mask {tuple(self.mask.shape)} does not fit {b} rows x {h} heads")
        return self.mask[:, layer].to(device)

    def intervention(self) -> Intervention:
        return Intervention("probs", self)


def gate_heads(gates: torch.Tensor) -> Intervention:
    """Michel et al. §3: multiply head h's output by ξ_h. ``gates``: ``(L, H)`` for every row, or ``(B, L, H)``
    one configuration per batch row. A gate tensor that requires grad gives ∂L/∂ξ_h (importance)."""
    if gates.dim() not in (2, 3):
        raise ValueError(f"head gates must be (layers, heads) or (batch, layers, heads), got {tuple(gates.shape)}")

    def apply(layer: int, out: torch.Tensor) -> torch.Tensor:
        g = gates[layer] if gates.dim() == 2 else gates[:, layer]
        if g.shape[-1] != out.shape[1]:
            raise ValueError(f"head gates have {g.shape[-1]} heads, the layer has {out.shape[1]}")
        g = g.to(out.dtype)
        return out * (g.view(1, -1, 1, 1) if gates.dim() == 2 else g.view(out.shape[0], -1, 1, 1))

    return Intervention("head_out", apply)


def zero_heads(n_layers: int, n_heads: int, heads: Sequence[tuple[int, int]], device=None) -> torch.Tensor:
    """Michel et al. §3 head masking: gates ξ with ξ_h = 0 for the given 0-based heads, 1 elsewhere."""
    gates = torch.ones(n_layers, n_heads, device=device)
    for layer, head in heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"head {head_name(layer, head)} is outside the model's {n_layers}x{n_heads} heads")
        gates[layer, head] = 0.0
    return gates


def head_gate_gradients(model: torch.nn.Module, batches, loss_fn: Callable, n_layers: int, n_heads: int,
                        per_example: bool = True) -> tuple[torch.Tensor, int]:
    """Michel et al. §3.3 importance: the sum over examples of |∂L/∂ξ_h| with every gate ξ_h = 1.

    ``loss_fn(model, batch) -> (loss per example (B,), ...)`` runs the forward pass (inside the gated run).
    ``per_example``: one gate per (row, layer, head), so |∂L(x)/∂ξ_h| is taken per example as the paper's
    E_x |∂L(x)/∂ξ_h|; else the absolute gradient of the batch's summed loss (the authors' code). Returns the
    ``(L, H)`` sum and the number of examples. One forward/backward per batch; the model's weights get no
    gradient (their ``requires_grad`` is restored on exit).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    dtype = next(model.parameters()).dtype
    for p in params:
        p.requires_grad_(False)
    total, n = None, 0
    try:
        with torch.inference_mode(False), torch.enable_grad():
            for batch in batches:
                b = batch.input_ids.shape[0] if hasattr(batch, "input_ids") else batch["input_ids"].shape[0]
                dev = batch.input_ids.device if hasattr(batch, "input_ids") else batch["input_ids"].device
                shape = (b, n_layers, n_heads) if per_example else (n_layers, n_heads)
                gates = torch.ones(shape, device=dev, dtype=dtype, requires_grad=True)
                with attention_run(model, head_gates=gates):
                    losses = loss_fn(model, batch)
                (grad,) = torch.autograd.grad(losses.sum(), gates)
                g = grad.abs().sum(0) if per_example else grad.abs()
                total = g.detach() if total is None else total + g.detach()
                n += b
    finally:
        for p in params:
            p.requires_grad_(True)
    if total is None:
        raise ValueError("head_gate_gradients: no batches")
    return total, n
