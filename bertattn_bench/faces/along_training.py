"""Claims along training: the selected claims measured on the model being trained, every N steps.

* :func:`claims_along_training` — a plain function for a custom loop: measure now, write this step's claims
  report (``OUT/step-000100/``) and rebuild the claims × steps matrix over every step so far (``OUT/matrix.*``).
* :class:`ClaimsCallback` — the same as a ``transformers`` ``TrainerCallback`` (every ``every`` steps, at the
  start and at the end of training).

The model is measured as an in-memory object (:func:`bertattn_bench.engine.model.wrap_model`: a copy, so training is not
disturbed; a task model through its encoder). Each step is a column of the matrix, named ``NAME@step<k>``.
"""
from __future__ import annotations

from pathlib import Path


def step_folder(out_dir, step: int) -> Path:
    return Path(out_dir) / f"step-{step:06d}"


def claims_along_training(model, tokenizer, step: int, out_dir, select=None, name: str = "model",
                          data_dir=None, **run_kwargs):
    """Measure the ``select``ed claims on ``model`` as it is at ``step``; write its report and the matrix."""
    from .api import run

    run_kwargs.setdefault("cache_dir", None)  # the weights change every step: nothing to reuse
    run_kwargs.setdefault("baseline", False)  # no recorded baseline describes a model mid-training
    results = run(model, tokenizer, select=select, data_dir=data_dir, name=f"{name}@step{step}", **run_kwargs)
    results.write_report(step_folder(out_dir, step))
    write_steps_matrix(out_dir)
    return results


def write_steps_matrix(out_dir) -> list[Path]:
    """``OUT/matrix.md|csv|html``: claims as rows, the steps' reports (``OUT/step-*``) as columns, in step order."""
    from ..report import matrix as mx
    from ..report.matrix_page import write_matrix

    folders = sorted(Path(out_dir).glob("step-*"))
    records = [r for f in folders for r in mx.read_records(f)]
    return write_matrix(mx.build(records, figure_dirs=[f / "figures" for f in folders]), Path(out_dir))


def _callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class ClaimsCallback(_callback_base()):
    """``Trainer(..., callbacks=[ClaimsCallback(tokenizer, "out/", select="patterns", every=100, data_dir=...)])``"""

    def __init__(self, tokenizer, out_dir, select=None, every: int = 100, name: str = "model", at_start: bool = True,
                 **run_kwargs):
        self.tokenizer, self.out_dir, self.select, self.every = tokenizer, Path(out_dir), select, every
        self.name, self.at_start, self.run_kwargs = name, at_start, run_kwargs
        self.measured: dict[int, object] = {}

    def _measure(self, model, step: int) -> None:
        if step in self.measured or model is None:
            return
        was_training = model.training
        self.measured[step] = claims_along_training(model, self.tokenizer, step, self.out_dir, self.select,
                                                    name=self.name, **self.run_kwargs)
        model.train(was_training)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.at_start:
            self._measure(model, state.global_step)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.every and state.global_step % self.every == 0:
            self._measure(model, state.global_step)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        self._measure(model, state.global_step)
