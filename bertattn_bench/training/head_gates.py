"""Voita et al. 2019 §6: pruning heads by learned Hard Concrete gates (Louizos et al. 2018) on a fine-tuned
classifier whose weights stay frozen: only one gate per (layer, head) trains, on the task loss plus λ × the
expected number of open gates (the L0 penalty), through the engine's head-output gates
(:func:`attention.gate_heads`, the intervention point Michel's importance uses): no copy of the model's code.

The gate follows the authors' ``lib/layers/concrete_gate.py`` (lena-voita/the-story-of-heads, commit efaa0dd):

* training sample (lines 53-59): u ~ U(eps, 1 - eps), s = sigmoid((log u - log(1 - u) + log_alpha) / beta),
  stretched to (l, r) = (-0.1, 1.1) (line 28) and clipped to [0, 1]; one noise draw per head per step, shared by
  the batch (``local_rep=False``, their default);
* evaluation (lines 55-59): the deterministic gate clip(sigmoid(log_alpha) (r - l) + l, 0, 1);
* L0 penalty (lines 76-85): P(gate open) = sigmoid(log_alpha - beta log(-l / r)) (Louizos et al. Eq. 12), summed
  over a layer's heads, and (``problems/concrete.py`` line 61) the mean over the layers' gate modules.

Deviation: beta = 2/3 (Louizos et al.'s value, as issue 64 asks); the authors' ``ConcreteGate`` default is 0.33
(line 28) and ``MultiHeadAttnConcrete`` passes none (``lib/layers/attn.py`` line 195). ``temperature`` takes either.
A head counts as kept when its deterministic gate is > 0; the dev score is that of the model with the closed heads
masked (gate 0) and the open ones at 1, so that it is comparable with Michel's masking curve at the same count.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..data import glue
from ..engine import attention
from . import checkpoints
from .task_model import EncodedSplit, TaskModel, loss_per_example
from .train_loop import epoch_batches, epoch_on_device

BETA = 2.0 / 3.0  # Louizos et al. 2018 §4 (the authors' code: 0.33, concrete_gate.py line 28)
LIMITS = (-0.1, 1.1)  # concrete_gate.py line 28: stretch_limits
EPS = 1e-6  # concrete_gate.py line 28
INIT_LOG_ALPHA = 3.0  # every gate open at the start (deterministic gate 1: sigmoid(3) x 1.2 - 0.1 > 1)
GATES_VERSION = "1"  # bump when a change here changes the trained gates (their cache key)


class HardConcreteGates(torch.nn.Module):
    """One Hard Concrete gate per (layer, head): ``log_alpha`` (L, H)."""

    def __init__(self, n_layers: int, n_heads: int, init: float = INIT_LOG_ALPHA, temperature: float = BETA,
                 limits: tuple[float, float] = LIMITS):
        super().__init__()
        if not limits[0] < 0 < 1 < limits[1]:
            raise ValueError(f"stretch limits {limits}: need l < 0 and r > 1 (the L0 penalty's closed form)")
        self.log_alpha = torch.nn.Parameter(torch.full((n_layers, n_heads), float(init)))
        self.temperature, self.limits = float(temperature), limits

    def _stretch(self, s: torch.Tensor) -> torch.Tensor:
        low, high = self.limits
        return (s * (high - low) + low).clamp(0.0, 1.0)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """A training draw of every gate (one noise value per head)."""
        u = torch.rand(self.log_alpha.shape, generator=generator).clamp(EPS, 1.0 - EPS)  # the seeded host stream
        if self.log_alpha.device.type == "cuda":  # copied without the host waiting for the device's queue
            u = u.pin_memory().to(self.log_alpha.device, non_blocking=True)
        return self._stretch(torch.sigmoid((torch.log(u) - torch.log(1 - u) + self.log_alpha) / self.temperature))

    def deterministic(self) -> torch.Tensor:
        """The evaluation gate: clip(sigmoid(log_alpha) (r - l) + l, 0, 1)."""
        return self._stretch(torch.sigmoid(self.log_alpha))

    def p_open(self) -> torch.Tensor:
        """P(gate > 0) in closed form (Louizos et al. Eq. 12), clipped to [eps, 1 - eps] as the authors' code."""
        low, high = self.limits
        return torch.sigmoid(self.log_alpha - self.temperature * math.log(-low / high)).clamp(EPS, 1.0 - EPS)

    def l0_penalty(self) -> torch.Tensor:
        """The expected number of open gates per layer, averaged over the layers (the authors' reduction)."""
        return self.p_open().sum(-1).mean()

    def kept(self) -> np.ndarray:
        """(L, H) bool: the heads whose deterministic gate is open (> 0)."""
        return (self.deterministic() > 0).detach().cpu().numpy()


@dataclass
class GateRun:
    """One trained set of gates: λ, seed, steps, the gates (L, H), which heads stay, and the training log."""

    lam: float
    seed: int
    steps: int
    log_alpha: np.ndarray
    gate: np.ndarray  # deterministic gates
    kept: np.ndarray  # (L, H) bool
    penalty: list  # the L0 penalty (expected open gates per layer) at the start and every ``log_every`` steps
    task_loss: list  # the mean task loss over the same stretches
    cached: bool = False

    @property
    def n_kept(self) -> int:
        return int(self.kept.sum())

    def to_json(self) -> dict:
        d = asdict(self)
        for k in ("log_alpha", "gate", "kept"):
            d[k] = np.asarray(d[k]).tolist()
        d.pop("cached")
        return d

    @classmethod
    def from_json(cls, d: dict) -> GateRun:
        return cls(float(d["lam"]), int(d["seed"]), int(d["steps"]), np.array(d["log_alpha"], dtype=np.float64),
                   np.array(d["gate"], dtype=np.float64), np.array(d["kept"], dtype=bool), list(d["penalty"]),
                   list(d["task_loss"]), cached=True)


@dataclass(frozen=True)
class GateRecipe:
    """Training of the gates: Adam on log_alpha only (the classifier frozen, in eval mode: no dropout), batches of
    the fine-tune's training rows drawn as the fine-tune draws them (seeded per pass over the data)."""

    steps: int = 300
    batch_size: int = 16
    lr: float = 0.05
    temperature: float = BETA
    init: float = INIT_LOG_ALPHA
    log_every: int = 25


def train_gates(model: TaskModel, t: glue.Task, data: EncodedSplit, tokenizer, lam: float, seed: int,
                recipe: GateRecipe = GateRecipe()) -> GateRun:
    """Gates trained on ``model`` (frozen; its ``requires_grad`` restored on exit) with loss = task + λ L0."""
    n_l, n_h = attention.layers_heads(model)
    device = next(model.parameters()).device
    gates = HardConcreteGates(n_l, n_h, recipe.init, recipe.temperature).to(device)
    opt = torch.optim.Adam(gates.parameters(), lr=recipe.lr)
    gen = torch.Generator().manual_seed(7_000_003 * (seed + 1))
    frozen = [p for p in model.parameters() if p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    was_training = model.training
    model.eval()
    penalty, task_loss, run_n = [float(gates.l0_penalty().detach())], [], 0
    # the task loss summed on the device in float64 and read at each log step only (no host wait per step; the same
    # double sums as reading each step's float32 loss)
    run_loss = torch.zeros((), dtype=torch.float64, device=device)
    step, epoch = 0, 0
    try:
        with torch.inference_mode(False), torch.enable_grad():
            while step < recipe.steps:
                batches = epoch_batches(data.examples, recipe.batch_size, 31 * (seed + 1) + 7919 * epoch)
                for inputs, y in epoch_on_device(data, batches, tokenizer.pad_token_id, device):
                    if step >= recipe.steps:
                        break
                    with attention.attention_run(model, head_gates=gates.sample(gen)):
                        logits = model(**inputs)
                    loss = loss_per_example(t, logits.float(), y).mean()
                    (loss + lam * gates.l0_penalty()).backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    run_loss += loss.detach().double()
                    run_n, step = run_n + 1, step + 1
                    if step % recipe.log_every == 0 or step == recipe.steps:
                        penalty.append(float(gates.l0_penalty().detach()))
                        task_loss.append(float(run_loss) / run_n)
                        run_loss.zero_()
                        run_n = 0
                epoch += 1
    finally:
        for p in frozen:
            p.requires_grad_(True)
        model.train(was_training)
    with torch.no_grad():
        return GateRun(float(lam), int(seed), step, gates.log_alpha.detach().cpu().double().numpy(),
                       gates.deterministic().cpu().double().numpy(), gates.kept(), penalty, task_loss)


def gates_dir(cache_dir: Path, slug: str, checkpoint: str, lam: float, seed: int, recipe: GateRecipe,
              data: EncodedSplit) -> Path:
    """The cache folder of one (checkpoint, λ, seed) run: keyed by the checkpoint's path, the recipe, the training
    examples' pieces and labels, and this module's version."""
    h = hashlib.sha256()
    for e in data.examples:
        h.update(np.asarray(e.input_ids, np.int64).tobytes() + b"|")
    h.update(np.ascontiguousarray(data.labels, np.float64).tobytes())
    doc = {"checkpoint": checkpoint, "lam": lam, "seed": seed, "recipe": asdict(recipe), "train": h.hexdigest(),
           "version": GATES_VERSION}
    return checkpoints.checkpoint_dir(cache_dir, "head_gates", slug, f"lam{lam:g}-seed{seed}", doc)


def gate_sweep(model: TaskModel, t: glue.Task, data: EncodedSplit, tokenizer, lambdas: Sequence[float], seed: int,
               recipe: GateRecipe = GateRecipe(), cache_dir: Path | None = None, slug: str = "",
               checkpoint: str | None = None) -> list[GateRun]:
    """One :func:`train_gates` per λ; with a cache directory and the checkpoint's path each run's gates are kept
    (``<cache>/head_gates/<slug>/lam<λ>-seed<seed>-<key>/meta.json``) and read back on the next call."""
    runs = []
    for lam in lambdas:
        directory = None if cache_dir is None or checkpoint is None else gates_dir(
            cache_dir, slug, checkpoint, lam, seed, recipe, data)
        fresh = []

        def train(_directory, lam=lam):  # a run is kept by its meta alone: no weights (checkpoints.trained, load None)
            fresh.append(train_gates(model, t, data, tokenizer, lam, seed, recipe))
            return None, {"run": fresh[0].to_json()}

        # the one training skeleton of the fine-tunes: lock, a complete meta read back, else trained and saved
        done = checkpoints.trained(directory, train, load=None)
        runs.append(fresh[0] if fresh else GateRun.from_json(done.meta["run"]))
    return runs


def kept_mask(kept: np.ndarray, device=None) -> torch.Tensor:
    """The (L, H) 0/1 head gates that mask the closed heads (the pruned model the dev score reads)."""
    return torch.as_tensor(np.asarray(kept, dtype=np.float32), device=device)
