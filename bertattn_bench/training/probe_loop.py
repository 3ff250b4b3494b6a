"""The one probe training loop (Clark §5's attention-and-words probes, Hewitt & Manning's structural probe): Adam
over pre-built batches in a seeded order each epoch. The encoder's fine-tuning loop is :func:`finetune.train`."""
from __future__ import annotations

from typing import Callable, Sequence

import torch


def adam_epochs(module: torch.nn.Module, batches: Sequence, loss_fn: Callable[[torch.nn.Module, object], torch.Tensor],
                epochs: int, lr: float, seed: int) -> torch.nn.Module:
    """Train ``module`` in place: ``epochs`` passes over ``batches``, each in an order drawn from a generator
    seeded by ``seed`` (the same order on every machine), one Adam step on ``loss_fn(module, batch)`` per batch."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(module.parameters(), lr=lr)
    for _ in range(epochs):
        for b in torch.randperm(len(batches), generator=gen).tolist():
            loss = loss_fn(module, batches[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return module
