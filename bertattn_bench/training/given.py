"""A user's fine-tuned task model judged as it is (issue 46): the fine-tuning families (Table 1's fine-tuned column,
the disabling sweep, importance and the pruning curve, the speed-up) read it where they would read the suite's own
fine-tune.

* :func:`resolve_task`: which task a model is a classifier for: the run's explicit option (``--task-model mrpc`` /
  ``task=``), else the model's own ``finetuning_task`` (what transformers' ``run_glue.py`` writes); never guessed
  from the number of labels (MRPC, RTE, QNLI and SST-2 all have two).
* :func:`check_shape`: the classifier's number of labels and problem type against the task's.
* :func:`as_given`: the model as a :class:`~bertattn_bench.training.glue_finetune.FineTuned` (a copy each time: the
  families prune and gate it), after the label-order check: on the task's whole dev split the model's accuracy with
  its labels as given must not be below its accuracy with them permuted (for STS-B: its Pearson r must not be
  negative); a model that fails is refused with both numbers.
"""
from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import numpy as np
import torch

from ..base.errors import BenchError, DataError
from ..claims import learned
from ..data import glue
from ..engine.batching import model_inputs
from . import glue_finetune as finetune


class GivenTaskModel(torch.nn.Module):
    """A transformers sequence-classification model behind the interface of the suite's own task model:
    ``encoder`` (its base model: the module the interventions, gates and pruning act on) and ``forward`` returning
    logits ``(B, C)`` (``(B,)`` for regression)."""

    def __init__(self, classifier: torch.nn.Module):
        super().__init__()
        self.classifier = classifier
        self.encoder = classifier.base_model
        self.config = self.encoder.config
        self.num_labels = int(classifier.config.num_labels)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        logits = self.classifier(**model_inputs(self.encoder, input_ids, attention_mask, token_type_ids)).logits
        return logits[:, 0] if self.num_labels == 1 else logits


def resolve_task(explicit: str | None, config, classifier: bool | None = None) -> tuple[str | None, str | None]:
    """(the task to judge the model as a classifier for, or None; a one-line note where a classifier is measured
    through its encoder). ``explicit``: the run's option, which must name a task; else the config's
    ``finetuning_task`` where it names one. ``classifier``: whether the model is a sequence classifier, where the
    caller knows it from the object itself (:func:`~bertattn_bench.engine.model.is_classifier_object`); None: read
    from the config's ``architectures`` (a saved folder)."""
    from ..engine.model import is_classifier_config

    if explicit is not None:
        t = glue.task_of(explicit)
        if t is None:
            raise BenchError(f"--task-model {explicit}: not a task the suite judges a classifier on (one of "
                             f"{', '.join(glue.TASKS)})")
        return t.name, None
    if not (is_classifier_config(config) if classifier is None else classifier):
        return None, None
    own = glue.task_of(getattr(config, "finetuning_task", None))
    if own is not None:
        return own.name, None
    return None, (f"{getattr(config, '_name_or_path', '') or 'the model'} is a sequence-classification model with no "
                  f"task (its config names none): measured through its encoder, and the fine-tuning families "
                  f"fine-tune that encoder; give --task-model TASK (task= in Python) to judge the classifier as it is")


def check_shape(given, t: glue.Task) -> None:
    """The classifier's labels fit the task: as many outputs, regression for STS-B, classification otherwise."""
    if given.num_labels != t.num_labels:
        raise BenchError(f"--task-model {t.name}: the classifier has {given.num_labels} label(s), GLUE {t.folder} "
                         f"has {t.num_labels} ({'regression' if t.is_regression else ', '.join(t.labels)})")
    regression = given.problem_type == "regression" or (given.problem_type is None and given.num_labels == 1)
    if regression != t.is_regression:
        raise BenchError(f"--task-model {t.name}: the classifier's problem type is {given.problem_type!r}; GLUE "
                         f"{t.folder} is {'regression' if t.is_regression else 'classification'}")


_CHECKED: dict[tuple, dict] = {}  # (classifier digest, task, dev labels) -> the label-order check's numbers


def label_check(loaded, t: glue.Task, dev: finetune.EncodedSplit, batch_size: int = 64) -> dict:
    """The label-order check on ``dev`` (the task's whole dev split), once per classifier, task and dev set: the
    primary score as given and with the labels permuted; a classifier better with them permuted is refused."""
    given = loaded.task
    labels = np.asarray(dev.labels, np.float64)
    key = (given.digest, t.name, hashlib.sha256(np.ascontiguousarray(labels).tobytes()).hexdigest())
    if key not in _CHECKED:
        model = GivenTaskModel(given.classifier).eval()
        logits = finetune.predict(model, dev, loaded.tokenizer, batch_size)
        permuted = -logits if t.is_regression else logits[:, ::-1]  # every task judged here has two labels
        what = "with the predictions negated" if t.is_regression else "with the two labels swapped"
        as_is, other = learned.glue("as given", t, logits, labels), learned.glue(what, t, permuted, labels)
        _CHECKED[key] = {"as_given": round(float(as_is.score), 4), "permuted": round(float(other.score), 4),
                         "n_dev": len(labels), "what": what, "permuted_learned": bool(other.learned),
                         "permuted_test": other.text}
    check = _CHECKED[key]
    # refused where the permuted order is better and is a model that learned (its dev score significantly above
    # the majority class): a model that is merely untrained (a callback's first step) is left to the learned guard
    if check["permuted"] > check["as_given"] and check["permuted_learned"]:
        raise DataError(f"--task-model {t.name}: {loaded.info.name} scores {check['as_given']:.2f} {t.metric} on "
                        f"{check['n_dev']} GLUE {t.folder} dev examples with its labels as given and "
                        f"{check['permuted']:.2f} {check['what']} ({check['permuted_test']}): its label order is "
                        f"not the task's ({', '.join(t.labels or ('score',))}); refused (fix id2label / the label "
                        f"column)")
    return check


def as_given(loaded, t: glue.Task, dev: finetune.EncodedSplit) -> finetune.FineTuned:
    """The user's classifier (a fresh copy) where the suite would read its own fine-tune of ``t``."""
    given = loaded.task
    check_shape(given, t)
    check = label_check(loaded, t, dev)
    model = GivenTaskModel(copy.deepcopy(given.classifier)).to(loaded.info.device).eval()
    meta = {"model": loaded.info.name, "task": t.name, "as_given": True, "seed": None,
            "weights_sha256": given.digest, "source": given.source, "label_check": check,
            "recipe": "as given (not fine-tuned here)", "path": f"as-given:{given.digest[:16]}"}
    return finetune.FineTuned(model, meta, True)


def export_classifier(tuned: finetune.TaskModel, tokenizer, task: str, folder) -> Path:
    """The suite's own fine-tune (encoder + head) saved as a standard transformers sequence-classification folder
    (``save_pretrained``), ``finetuning_task`` set: what a user who fine-tuned the model elsewhere would hold. The
    head maps one to one where the architecture's classifier is the same computation on the first token: BERT-type
    (pooler dense + tanh, then the classifier) and RoBERTa-type (``classifier.dense`` + tanh, ``out_proj``); other
    heads are refused. The exported model's logits are checked against the task model's on two pairs."""
    from transformers import AutoModelForSequenceClassification

    t = glue.task(task)
    encoder = tuned.encoder
    config = copy.deepcopy(encoder.config)
    config.num_labels, config.finetuning_task = t.num_labels, t.name
    config.problem_type = "regression" if t.is_regression else "single_label_classification"
    config.id2label = {i: (t.labels[i] if t.labels else "score") for i in range(t.num_labels)}
    config.label2id = {v: k for k, v in config.id2label.items()}
    clf = AutoModelForSequenceClassification.from_config(config)
    clf.base_model.load_state_dict(encoder.state_dict(), strict=False)
    dense, out = tuned.head[1], tuned.head[4]
    head = getattr(clf, "classifier", None)
    pooler = getattr(clf.base_model, "pooler", None)
    with torch.no_grad():
        if isinstance(head, torch.nn.Linear) and pooler is not None and isinstance(getattr(pooler, "dense", None),
                                                                                    torch.nn.Linear):
            pooler.dense.load_state_dict(dense.state_dict())
            head.load_state_dict(out.state_dict())
        elif head is not None and isinstance(getattr(head, "dense", None), torch.nn.Linear) and \
                isinstance(getattr(head, "out_proj", None), torch.nn.Linear):
            head.dense.load_state_dict(dense.state_dict())
            head.out_proj.load_state_dict(out.state_dict())
        else:
            raise BenchError(f"{type(clf).__name__}: its classification head is not the suite's computation "
                             f"(first token, dense, tanh, linear): not exported")
    clf.eval()
    check = GivenTaskModel(clf).eval()
    enc = tokenizer(["The cat sat.", "A dog ran far away."], ["It sat.", "The dog ran."], padding=True,
                    return_tensors="pt")
    device = next(tuned.parameters()).device
    with torch.no_grad():
        types = enc.get("token_type_ids")
        args = (enc["input_ids"].to(device), enc["attention_mask"].to(device), None if types is None else types.to(device))
        was = tuned.training
        tuned.eval()
        want = tuned(*args)
        tuned.train(was)
        got = check.to(device)(*args)
    if not torch.allclose(want, got, atol=1e-5):
        raise BenchError(f"{type(clf).__name__}: the exported classifier's logits differ from the task model's "
                         f"(max {float((want - got).abs().max()):.3g})")
    folder = Path(folder)
    clf.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
