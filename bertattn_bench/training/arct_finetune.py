"""Niven & Kao 2019's ARCT model on any encoder the suite loads: each warrant scored from
``[CLS] claim. reason. [SEP] warrant [SEP]`` by one shared scorer on the first token, softmax over the two warrants,
cross-entropy on the correct one (P §2, Fig. 3; IKMLab/arct2 ``arct/bert.py:BERT``), fine-tuned with
``bertattn_bench.training.glue_finetune``'s train loop, optimiser, seeding and per-epoch resume, cached like its checkpoints.

How the two-warrant model goes through ``finetune.train`` and ``finetune.predict`` unchanged: an argument is ONE
packed example ``[CLS] a [SEP] w0 [SEP] [CLS] a [SEP] w1 [SEP]`` whose second sequence has token types + 2 (the
"packing" marker); :class:`PairScorer` unpacks every row into its two sequences (each re-padded, its own attention
mask), scores both with the same :class:`finetune.TaskModel` (one output: pooler dense + tanh + linear, the shared
layer) and returns the pair of logits ``(B, 2)``, so ``finetune.loss_per_example`` is the softmax cross-entropy over
the two warrants. Padding never reaches a score (the sequences are re-padded with their own masks).

Input modes (P §5; ``arct/bert.py`` DataLoaders*): ``full`` = claim + reason / warrant (claim first, periods appended
as ``append_claim_reason``), ``rw`` = reason / warrant, ``cw`` = claim / warrant, ``w`` = the warrant alone
(``[CLS] w [SEP]``). At most 80 pieces per sequence (36 for W), the authors' ``max_seq_length``, longest first.

Seeds: everything random is drawn from generators seeded by the run's seed (head init; per epoch the data order and
dropout, ``finetune.train``), and the global seeds are set before any data is built, so the authors' bug (data
loaders built before the seed was set, IKMLab/arct2 README) cannot happen here; a run is reproducible and resumable.
Model selection as the authors' ``util/training.py``: the weights of the epoch with the best dev accuracy are kept.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..base.errors import DataError
from ..data import arct_corpus as arct
from ..data.glue import Task
from ..engine.batching import Encoded
from . import checkpoints
from . import glue_finetune as finetune

ARCT_VERSION = "1"  # bump when a change here changes the weights a run produces
MODES = ("full", "w", "rw", "cw")
MAX_TOKENS = {"full": 80, "rw": 80, "cw": 80, "w": 36}  # the authors' max_seq_length per input mode
PACK_OFFSET = 2  # token type + 2 marks the second warrant's sequence in a packed example
TASK = Task("arct", "ARCT", "argument", "warrant", "correctLabelW0orW1", ("warrant0", "warrant1"), "acc")
# ours (the paper: BERT Large lr 2e-5 / 20 epochs, Base 8e-5 / 30 epochs, batch 8): finetune.py's learning rate
# 5e-5 (between the two) and its warm-up, decay and clipping; batch 16; 5 epochs with best-dev selection (CPU budget:
# about 85 s per epoch for all-MiniLM-L6-v2 on one CPU thread)
RECIPE = finetune.Recipe(epochs=5, batch_size=16, lr=5e-5, max_tokens=80)


def append_claim_reason(claim: str, reason: str) -> str:
    """The authors' segment A (``arct/bert.py``): each ends with a period, claim first."""
    claim, reason = claim.strip(), reason.strip()
    return f"{claim if claim.endswith('.') else claim + '.'} {reason if reason.endswith('.') else reason + '.'}"


def segments(item: arct.ArctItem, mode: str) -> tuple[str | None, str, str]:
    """(segment A or None, warrant 0, warrant 1) of one argument in an input mode."""
    if mode == "full":
        a = append_claim_reason(item.claim, item.reason)
    elif mode == "rw":
        a = item.reason
    elif mode == "cw":
        a = item.claim
    elif mode == "w":
        a = None
    else:
        raise ValueError(f"input mode {mode!r}: expected one of {', '.join(MODES)}")
    return a, item.warrant0, item.warrant1


def _sequence(tokenizer, a: str | None, b: str, max_tokens: int) -> tuple[list[int], list[int], bool]:
    if a is None:
        full = tokenizer(b, truncation=False)["input_ids"]
        enc = tokenizer(b, truncation=True, max_length=max_tokens)
    else:
        full = tokenizer(a, b, truncation=False)["input_ids"]
        enc = tokenizer(a, b, truncation="longest_first", max_length=max_tokens)
    ids = list(enc["input_ids"])
    types = list(enc["token_type_ids"]) if "token_type_ids" in enc else [0] * len(ids)
    return ids, types, len(full) > max_tokens


def encode_items(tokenizer, items: Sequence[arct.ArctItem], mode: str, max_tokens: int | None = None
                 ) -> finetune.EncodedSplit:
    """Every argument as one packed example (see the module doc); labels = index of the correct warrant."""
    if not items:
        raise DataError("no ARCT arguments to encode")
    max_tokens = max_tokens or MAX_TOKENS[mode]
    examples, n_trunc = [], 0
    for i, item in enumerate(items):
        a, w0, w1 = segments(item, mode)
        ids0, t0, cut0 = _sequence(tokenizer, a, w0, max_tokens)
        ids1, t1, cut1 = _sequence(tokenizer, a, w1, max_tokens)
        if max(t0 + t1) >= PACK_OFFSET:
            raise DataError(f"{item.source}: token types above {PACK_OFFSET - 1}: cannot pack the two warrants")
        n_trunc += cut0 or cut1
        ids = ids0 + ids1
        examples.append(Encoded(i, ids, t0 + [t + PACK_OFFSET for t in t1], [-1] * len(ids), 0))
    return finetune.EncodedSplit(examples, np.array([it.label for it in items], dtype=np.float32), n_trunc, max_tokens,
                             [it.source for it in items])


def unpack(input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor, pad_id: int = 0):
    """Packed rows ``(B, T)`` → the two sequences of each row stacked ``(2B, T')`` (warrant 0 rows first), with
    their masks and token types (marker removed); T' = the longest sequence in the batch."""
    mask = attention_mask.bool()
    second = mask & (token_type_ids >= PACK_OFFSET)
    l1 = second.sum(1)
    l0 = mask.sum(1) - l1
    t_out = int(torch.maximum(l0, l1).max())
    pos = torch.arange(t_out, device=input_ids.device)[None, :]
    last = input_ids.shape[1] - 1
    idx0, idx1 = pos.clamp(max=last).expand(len(l0), -1), (l0[:, None] + pos).clamp(max=last)
    m0, m1 = pos < l0[:, None], pos < l1[:, None]
    ids = torch.cat([torch.where(m0, input_ids.gather(1, idx0), pad_id),
                     torch.where(m1, input_ids.gather(1, idx1), pad_id)])
    types = torch.cat([torch.where(m0, token_type_ids.gather(1, idx0), 0),
                       torch.where(m1, token_type_ids.gather(1, idx1) - PACK_OFFSET, 0)])
    return ids, torch.cat([m0, m1]).long(), types


class PairScorer(torch.nn.Module):
    """The paper's model: one shared scorer (``finetune.TaskModel`` with one output) on each warrant's sequence;
    ``forward`` returns the two warrants' logits ``(B, 2)`` of packed examples."""

    def __init__(self, encoder: torch.nn.Module, seed: int):
        super().__init__()
        self.scorer = finetune.TaskModel(encoder, 1, seed)
        self.config = encoder.config  # attention.attention_modules checks the attention implementation here

    @property
    def encoder(self) -> torch.nn.Module:
        return self.scorer.encoder

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        if token_type_ids is None:
            raise ValueError("PairScorer needs the packed token types (encode with arct_ft.encode_items)")
        pad = getattr(self.config, "pad_token_id", None) or 0
        ids, mask, types = unpack(input_ids, attention_mask, token_type_ids, pad)
        scores = self.scorer(ids, mask, types)  # (2B,): the shared layer on every sequence
        b = input_ids.shape[0]
        return torch.stack([scores[:b], scores[b:]], dim=1)


def pair_model(loaded, seed: int) -> PairScorer:
    """A fresh pair model on the loaded encoder (deep-copied), head seeded by ``seed``."""
    model = PairScorer(copy.deepcopy(loaded.model), seed).to(loaded.info.device)
    model.eval()
    return model


def accuracy(model: PairScorer, data: finetune.EncodedSplit, tokenizer) -> tuple[float, np.ndarray]:
    """Accuracy and per-argument predictions (0/1: which warrant wins; a tie goes to warrant 0, argmax)."""
    pred = finetune.predict(model, data, tokenizer).argmax(-1)
    return float((pred == data.labels).mean()), pred


# ---- settings, data, the cached run -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    name: str
    mode: str
    train: str  # splits of data.arct: original (train/dev/test) or adversarial (train_swapped/dev_adv/test_adv)
    dev: str
    test: str

    @property
    def adversarial(self) -> bool:
        return self.test == "test_adv"


SETTINGS = {
    "full": Setting("full", "full", "train", "dev", "test"),
    "w": Setting("w", "w", "train", "dev", "test"),
    "rw": Setting("rw", "rw", "train", "dev", "test"),
    "cw": Setting("cw", "cw", "train", "dev", "test"),
    # the errata's protocol (IKMLab/arct2 README, experiments/bert_large_adv.py → DataLoadersAdvOriginal): train on the
    # original arguments + their warrant-swapped copies, validate and test on the claim-negated sets (+ originals)
    "adv": Setting("adv", "full", "train_swapped", "dev_adv", "test_adv"),
}


def load_setting(data_dir: Path, setting: Setting, limit: int | None = None) -> dict[str, list[arct.ArctItem]]:
    """train / dev / test arguments of a setting (``limit``: the first N of each, for development runs)."""
    splits = arct.load_adversarial(data_dir) if setting.adversarial else arct.load_original(data_dir)
    out = {}
    for role in ("train", "dev", "test"):
        items = splits[getattr(setting, role)]
        out[role] = items[:limit] if limit else items
    return out


@dataclass
class Run:
    """One fine-tuned run: accuracies of the best-dev epoch's weights and the per-argument test predictions."""

    seed: int
    train_acc: float
    dev_acc: float
    test_acc: float
    test_pred: list[int]
    meta: dict
    cached: bool

    @property
    def degenerate(self) -> bool:
        return self.train_acc < DEGENERATE_TRAIN


DEGENERATE_TRAIN = 0.8  # P §3: runs with train accuracy below 80% are "degenerate"
EPOCHS, BEST = "epochs.json", "best.safetensors"  # a run's dev accuracy per epoch, the best epoch's weights


def _digest(data: finetune.EncodedSplit) -> str:
    h = hashlib.sha256()
    for e in data.examples:
        h.update(np.asarray(e.input_ids, dtype=np.int64).tobytes())
        h.update(np.asarray(e.token_type_ids, dtype=np.int64).tobytes())
        h.update(b"|")
    h.update(data.labels.tobytes())
    return h.hexdigest()[:16]


def code_version() -> str:
    """The code part of an ARCT run's key (:func:`.checkpoints.sources_version`)."""
    return checkpoints.sources_version(__name__, ARCT_VERSION)


def run_dir(cache_dir: Path, loaded, setting: Setting, seed: int, recipe: finetune.Recipe,
            data: dict[str, finetune.EncodedSplit]) -> Path:
    from ..base.hashing import model_fingerprint

    doc = {"model": model_fingerprint(loaded.info), "setting": setting.__dict__, "recipe": recipe.key(), "seed": seed,
           "data": {k: _digest(v) for k, v in data.items()}, "code": code_version()}
    return checkpoints.checkpoint_dir(cache_dir, "arct_ft", loaded.info.slug, f"{setting.name}-seed{seed}", doc)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def fine_tune(loaded, setting: Setting, seed: int, data: dict[str, finetune.EncodedSplit], directory: Path,
              recipe: finetune.Recipe = RECIPE, progress: bool = False) -> tuple[PairScorer, dict]:
    """Train epoch by epoch (``finetune.train``, resumable from ``directory/partial-state.pt``), score dev after
    each epoch and keep the best epoch's weights (ties: the earlier epoch)."""
    from safetensors.torch import load_file, save_file

    model = pair_model(loaded, seed)
    state, best_path, log_path = directory / checkpoints.STATE, directory / BEST, directory / EPOCHS
    epochs = json.loads(log_path.read_text()) if log_path.is_file() and state.is_file() else {"dev_acc": []}
    t0 = time.perf_counter()
    log = {}
    while len(epochs["dev_acc"]) < recipe.epochs:
        done = len(epochs["dev_acc"])
        log = finetune.train(model, TASK, data["train"], loaded.tokenizer, recipe, seed, state, progress,
                             f"arct {setting.name}/{seed} epoch {done + 1}", stop_after_epoch=done + 1)
        acc, _ = accuracy(model, data["dev"], loaded.tokenizer)
        n_done = len(log["loss_per_epoch"])  # epochs in the train state (one more than scored after a crash)
        earlier = epochs["dev_acc"][:n_done - 1]
        epochs["dev_acc"] = earlier + [float("nan")] * (n_done - 1 - len(earlier)) + [acc]
        if acc > max((a for a in earlier if a == a), default=-1.0):
            tmp = best_path.with_suffix(f".tmp{os.getpid()}")
            save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp))
            os.replace(tmp, best_path)
            epochs["best_epoch"] = len(epochs["dev_acc"])
        epochs["log"] = log
        log_path.write_text(json.dumps(epochs))
    model.load_state_dict(load_file(str(best_path), device=str(loaded.info.device)))
    model.eval()
    meta = {"model": loaded.info.name, "setting": setting.__dict__, "seed": seed, "recipe": recipe.key(),
            "n": {k: len(v.examples) for k, v in data.items()},
            "n_truncated": {k: v.n_truncated for k, v in data.items()}, "max_tokens": data["train"].max_tokens,
            "dev_acc_per_epoch": epochs["dev_acc"], "best_epoch": epochs["best_epoch"], "log": epochs.get("log", log),
            "train_seconds_this_call": time.perf_counter() - t0, "device": str(loaded.info.device),
            "threads": torch.get_num_threads()}
    return model, meta


def finetuned_run(loaded, setting: Setting, seed: int, data: dict[str, finetune.EncodedSplit], cache_dir: Path | None,
                  recipe: finetune.Recipe = RECIPE, progress: bool = False, force: bool = False) -> Run:
    """One run from the cache (``<cache>/arct_ft/<model>/<setting>-seed<k>-<key>/``: best-dev weights + meta with
    the scores), else trained (resuming an interrupted run; a file lock makes two workers share it) and cached."""

    def evaluate(model, meta) -> dict:
        t0, scores = time.perf_counter(), {}
        for role in ("train", "dev", "test"):
            acc, pred = accuracy(model, data[role], loaded.tokenizer)
            scores[role] = acc
            if role == "test":
                scores["test_pred"] = pred.astype(int).tolist()
        meta["scores"] = scores
        meta["eval_seconds"] = time.perf_counter() - t0
        return meta

    def as_run(meta, cached):
        s = meta["scores"]
        return Run(seed, s["train"], s["dev"], s["test"], s["test_pred"], meta, cached)

    def train(directory: Path | None) -> tuple[PairScorer, dict]:
        if directory is None:  # no cache: the epochs' state and the best weights in a folder of their own
            with tempfile.TemporaryDirectory() as tmp:
                model, meta = fine_tune(loaded, setting, seed, data, Path(tmp), recipe, progress)
                return model, evaluate(model, meta)
        model, meta = fine_tune(loaded, setting, seed, data, directory, recipe, progress)
        meta = evaluate(model, meta)
        meta["path"] = str(directory)
        return model, meta

    seed_everything(seed)  # before anything is built (the authors' bug was the reverse)
    directory = None if cache_dir is None else run_dir(cache_dir, loaded, setting, seed, recipe, data)
    # a run is judged by its scores (in the meta): the weights are kept for whoever reads them later, not read
    done = checkpoints.trained(directory, train, None, force, (checkpoints.STATE, EPOCHS, BEST), kept=(EPOCHS,))
    return as_run(done.meta, done.cached)
