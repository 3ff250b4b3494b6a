"""Tokenisation, length-sorted padded batches and the piece→word pooling matrices (Clark et al. §4.1).

Word-level attention is one batched product: ``word_from (B,W,T) @ A (B,H,T,T) @ word_to (B,T,W)``, where
``word_from`` averages over the pieces a word attends *from* and ``word_to`` sums over the pieces attended *to*.
[CLS]/[SEP] belong to no word, so they drop out of word maps (Clark fn. 2); token-level statistics keep them.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

PUNCT_PIECES = (".", ",")


@dataclass
class Encoded:
    """One tokenised example. ``word_index[t]`` is the word of piece t, or -1 for special tokens."""

    index: int
    input_ids: list[int]
    token_type_ids: list[int]
    word_index: list[int]
    n_words: int


@dataclass
class Skipped:
    """Examples left out of a pass, with the reason; reported next to every measured value."""

    n: int = 0
    max_tokens: int = 0
    indices: list[int] = field(default_factory=list)  # which examples, where they are examples of the pass
    reason: str = ""  # what the n counts and why it was left out, when not "example(s) over max_tokens pieces"

    def describe(self) -> str:
        if not self.n:
            return ""
        if self.reason:
            return f"{self.n} {self.reason}"
        return f"{self.n} example(s) over {self.max_tokens} word pieces skipped"


def encode_words(tokenizer, index: int, words: Sequence[str]) -> Encoded:
    """``[CLS] w1 ... wn [SEP]`` with the piece→word map; a word the tokenizer drops becomes [UNK]."""
    enc = tokenizer(list(words), is_split_into_words=True, add_special_tokens=True, truncation=False)
    wids = enc.word_ids()
    seen = {w for w in wids if w is not None}
    if len(seen) != len(words):  # e.g. a lone control character: no pieces at all
        fixed = [w if i in seen else tokenizer.unk_token for i, w in enumerate(words)]
        enc = tokenizer(fixed, is_split_into_words=True, add_special_tokens=True, truncation=False)
        wids = enc.word_ids()
    return Encoded(
        index=index,
        input_ids=list(enc["input_ids"]),
        token_type_ids=list(enc.get("token_type_ids", [0] * len(wids))),
        word_index=[-1 if w is None else w for w in wids],
        n_words=len(words),
    )


TOKEN_TYPES = ("zeros", "ab")  # Clark's extract_attention.py l.30 feeds all 0; "ab" = 0 for A, 1 for B (BERT's)


def _check_token_types(token_types: str) -> None:
    if token_types not in TOKEN_TYPES:
        raise ValueError(f"token_types={token_types!r}: expected one of {', '.join(TOKEN_TYPES)}")


def encode_pair(tokenizer, index: int, first: str, second: str, token_types: str = "ab") -> Encoded:
    """``[CLS] first [SEP] second [SEP]`` (Clark §3 segments); no word map. ``token_types``: "ab" as the tokenizer
    gives them (0 for A, 1 for B), "zeros" all 0 (as Clark et al. fed their segments)."""
    _check_token_types(token_types)
    enc = tokenizer(first, second, add_special_tokens=True, truncation=False)
    n = len(enc["input_ids"])
    types = list(enc.get("token_type_ids", [0] * n)) if token_types == "ab" else [0] * n
    return Encoded(index, list(enc["input_ids"]), types, [-1] * n, 0)


def pair_template(tokenizer) -> tuple[list, list]:
    """How ``tokenizer`` lays out a pair, learnt from the tokenizer itself: ``(ids, types)`` of ``tokenizer("a",
    "b")`` with the A piece replaced by ``"A"`` and the B piece by ``"B"`` (BERT: ``[CLS] A [SEP] B [SEP]``;
    RoBERTa/MPNet: ``<s> A </s></s> B </s>``). Types are the tokenizer's own (0s where it gives none)."""
    cached = getattr(tokenizer, "_bertattn_pair_template", None)
    if cached is not None:
        return cached
    pieces = [tokenizer(w, add_special_tokens=False)["input_ids"] for w in ("a", "b")]
    if any(len(p) != 1 for p in pieces) or pieces[0] == pieces[1]:
        raise ValueError(f"{type(tokenizer).__name__}: 'a' and 'b' are not two single pieces; cannot learn its "
                         f"pair layout")
    enc = tokenizer("a", "b", add_special_tokens=True)
    ids = list(enc["input_ids"])
    types = list(enc.get("token_type_ids") or [0] * len(ids))
    if ids.count(pieces[0][0]) != 1 or ids.count(pieces[1][0]) != 1:
        raise ValueError(f"{type(tokenizer).__name__}: cannot find the two segments in its pair encoding {ids}")
    slots = {pieces[0][0]: "A", pieces[1][0]: "B"}
    template = ([slots.get(i, i) for i in ids], types)
    try:
        tokenizer._bertattn_pair_template = template
    except AttributeError:  # pragma: no cover - a tokenizer that takes no attributes
        pass
    return template


def encode_piece_pair(tokenizer, index: int, a: Sequence[int], b: Sequence[int], token_types: str = "zeros") -> Encoded:
    """A pair from word-piece ids, laid out as the tokenizer lays out pairs (:func:`pair_template`: BERT's
    ``[CLS] a [SEP] b [SEP]`` is the layout of Clark's preprocess_unlabeled.py l.51-60; RoBERTa-like tokenizers give
    ``<s> a </s></s> b </s>``). ``token_types``: "zeros" (extract_attention.py l.30) or "ab" (the tokenizer's)."""
    _check_token_types(token_types)
    if not a or not b:
        raise ValueError(f"segment {index}: A and B must both hold word pieces (got {len(a)} and {len(b)})")
    slots, slot_types = pair_template(tokenizer)
    ids, types = [], []
    for piece, typ in zip(slots, slot_types):
        seg = a if piece == "A" else b if piece == "B" else [piece]
        ids += list(seg)
        types += [typ] * len(seg)
    if token_types == "zeros":
        types = [0] * len(ids)
    return Encoded(index, ids, types, [-1] * len(ids), 0)


def drop_too_long(encoded: Iterable[Encoded], max_tokens: int) -> tuple[list[Encoded], Skipped]:
    kept, skipped = [], Skipped(max_tokens=max_tokens)
    for e in encoded:
        if len(e.input_ids) > max_tokens:
            skipped.indices.append(e.index)
            skipped.n += 1
        else:
            kept.append(e)
    return kept, skipped


@dataclass
class Batch:
    """A padded batch on one device. Masks are boolean ``(B, T)``; pooling matrices exist when words do."""

    examples: list[Encoded]
    input_ids: torch.Tensor
    token_type_ids: torch.Tensor
    attention_mask: torch.Tensor
    is_cls: torch.Tensor
    is_sep: torch.Tensor
    is_punct: torch.Tensor
    word_from: torch.Tensor | None = None  # (B, W, T) mean over a word's pieces
    word_to: torch.Tensor | None = None  # (B, T, W) sum over a word's pieces
    word_mask: torch.Tensor | None = None  # (B, W)
    positions: list[int] = field(default_factory=list)  # where :func:`iter_batches` took the examples from

    @property
    def token_mask(self) -> torch.Tensor:
        return self.attention_mask.bool()

    @functools.cached_property
    def real_index(self) -> torch.Tensor:
        """The real pieces' flat positions in ``(B, T)`` (row-major), from the examples' lengths on the host, sent
        once per batch: ``x.reshape(B * T, ...).index_select(0, batch.real_index)`` is ``x[batch.token_mask]``,
        value for value and in the same order, but its length is known on the host, so on a GPU nothing waits for
        the device to count the mask (boolean indexing does; issue 47)."""
        t = self.input_ids.shape[1]
        return to_device(np.concatenate([np.arange(len(e.input_ids), dtype=np.int64) + i * t
                                         for i, e in enumerate(self.examples)]), self.input_ids.device)

    def real(self, x: torch.Tensor) -> torch.Tensor:
        """``x[token_mask]`` for a ``(B, T, ...)`` tensor without a host wait (:attr:`real_index`)."""
        return x.reshape(-1, *x.shape[2:]).index_select(0, self.real_index)

    def model_inputs(self, model=None) -> dict:
        """The batch as keyword arguments for ``model`` (:func:`model_inputs`); all three fields without a model."""
        if model is None:
            return {"input_ids": self.input_ids, "token_type_ids": self.token_type_ids,
                    "attention_mask": self.attention_mask}
        return model_inputs(model, self.input_ids, self.attention_mask, self.token_type_ids)


def takes_token_types(model) -> bool:
    """Whether ``model`` has token types to give: its config's ``type_vocab_size`` is at least 2 (0, 1 or absent:
    MPNet, DeBERTa-v2/v3, ModernBERT, XLM-R XL... have none, and a B segment's 1 would not fit) and its forward
    takes ``token_type_ids`` (its class's answer is kept: a signature per forward pass is host time on a GPU)."""
    config = getattr(model, "config", None)
    if int(getattr(config, "type_vocab_size", 0) or 0) < 2:
        return False
    if "forward" in vars(model) or not hasattr(type(model), "forward"):  # an instance's own forward: asked each time
        return _forward_takes_types(model.forward)
    cls = type(model)
    if cls not in _CLASS_TAKES_TYPES:
        _CLASS_TAKES_TYPES[cls] = _forward_takes_types(cls.forward)
    return _CLASS_TAKES_TYPES[cls]


def _forward_takes_types(forward) -> bool:
    import inspect

    try:
        params = inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return True
    return "token_type_ids" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


_CLASS_TAKES_TYPES: dict[type, bool] = {}  # a model class -> whether its forward takes token types


def model_inputs(model, input_ids, attention_mask=None, token_type_ids=None) -> dict:
    """The one model-input builder: ``input_ids`` and ``attention_mask``, and ``token_type_ids`` only where the
    model takes them (:func:`takes_token_types`). ``input_ids`` may also be a tokenizer's encoding (a mapping)."""
    if not isinstance(input_ids, torch.Tensor) and hasattr(input_ids, "keys"):
        enc = input_ids
        input_ids, attention_mask = enc["input_ids"], enc.get("attention_mask", attention_mask)
        token_type_ids = enc.get("token_type_ids", token_type_ids)
    out = {"input_ids": input_ids}
    if attention_mask is not None:
        out["attention_mask"] = attention_mask
    if token_type_ids is not None and takes_token_types(model):
        out["token_type_ids"] = token_type_ids
    return out


def to_device(array: np.ndarray, device) -> torch.Tensor:
    """One host array onto ``device`` without making the host wait: a CUDA copy goes through pinned (page-locked)
    memory, so ``non_blocking`` really overlaps (from pageable memory a copy is staged synchronously); on the CPU the
    array is shared, not copied."""
    t = torch.from_numpy(array)
    if torch.device(device).type == "cuda":
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


def to_device_parts(arrays, device) -> list[torch.Tensor]:
    """Several host integer arrays onto ``device`` in one copy (:func:`to_device`), back as int64 tensors of their
    own shapes (views of that copy): a batch's index arrays travel together, not one copy each."""
    flat = to_device(np.concatenate([np.asarray(a, dtype=np.int64).ravel() for a in arrays]), device)
    parts, start = [], 0
    for a in arrays:
        n = int(np.size(a))
        parts.append(flat[start:start + n].view(np.shape(a)))
        start += n
    return parts


def padded(examples: Sequence[Encoded], pad_id: int, multiple: int = 1, cap: int | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The one padding on the host: ``(ids, token types, mask)`` of ``(B, T)``, T the longest example (rounded up
    to a multiple of ``multiple``, but not beyond ``cap`` where that is longer than the longest), ids padded with
    ``pad_id``, types with 0; the mask is boolean (True: a real piece)."""
    b, t = len(examples), max(len(e.input_ids) for e in examples)
    if multiple > 1:
        rounded = -(-t // multiple) * multiple
        t = rounded if cap is None else max(t, min(rounded, cap))
    lengths = np.array([len(e.input_ids) for e in examples])
    mask = np.arange(t)[None, :] < lengths[:, None]
    ids = np.full((b, t), pad_id, dtype=np.int64)
    types = np.zeros((b, t), dtype=np.int64)
    ids[mask] = np.concatenate([e.input_ids for e in examples])
    types[mask] = np.concatenate([e.token_type_ids for e in examples])
    return ids, types, mask


def make_batch(examples: list[Encoded], tokenizer, device, with_words: bool) -> Batch:
    """Pad on the host with numpy (one array per field), then one copy per field to ``device`` (pinned, not
    blocking: :func:`to_device`). The piece→word pooling matrices are built on the device from the (B, T) word
    index, one scatter per batch (no dense host matrices to copy)."""
    ids, types, mask = padded(examples, tokenizer.pad_token_id)
    b, t = ids.shape
    punct_ids = tokenizer.convert_tokens_to_ids(list(PUNCT_PIECES))
    to = lambda a: to_device(a, device)  # noqa: E731
    batch = Batch(
        examples=examples,
        input_ids=to(ids),
        token_type_ids=to(types),
        attention_mask=to(mask.astype(np.int64)),
        is_cls=to((ids == tokenizer.cls_token_id) & mask),
        is_sep=to((ids == tokenizer.sep_token_id) & mask),
        is_punct=to(np.isin(ids, punct_ids) & mask),
    )
    if with_words:
        w = max(e.n_words for e in examples)
        word = np.full((b, t), w, dtype=np.int64)  # w: no word (special tokens, padding), a column dropped below
        word[mask] = np.concatenate([e.word_index for e in examples])
        word[word < 0] = w
        index = to(word)
        one_hot = torch.zeros(b, t, w + 1, dtype=torch.float32, device=index.device)
        word_to = one_hot.scatter_(2, index.unsqueeze(-1), 1.0)[:, :, :w].contiguous()  # (B, T, W): piece t in word w
        counts = word_to.sum(1)  # (B, W) pieces per word (exact: sums of ones)
        batch.word_to = word_to
        batch.word_from = (word_to.transpose(1, 2) / counts.clamp(min=1).unsqueeze(-1)).contiguous()
        batch.word_mask = counts > 0
    return batch


def length_order(lengths: Sequence[int]) -> list[int]:
    """The one length sort: indices by length, ties in their original order (batches with little padding; the same
    order on every run, so batched float sums are reproducible)."""
    return sorted(range(len(lengths)), key=lambda i: (lengths[i], i))


def iter_batches(
    encoded: Sequence[Encoded], tokenizer, device, batch_size: int = 32, with_words: bool = False
) -> Iterator[Batch]:
    """The one batch loop: length-sorted padded batches (little padding; :func:`length_order`), each with the
    ``positions`` of its examples in ``encoded`` (to put per-example outputs back in data order); padding never
    reaches a statistic (see the masks)."""
    order = length_order([len(e.input_ids) for e in encoded])
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        batch = make_batch([encoded[i] for i in idx], tokenizer, device, with_words)
        batch.positions = idx
        yield batch


def in_data_order(positions: Sequence[Sequence[int]], rows: Sequence[np.ndarray]) -> np.ndarray:
    """Per-batch outputs (``rows[k]``: first axis the examples of the batch whose ``positions`` are
    ``positions[k]``) in data order."""
    stacked = np.concatenate(rows)
    out = np.empty_like(stacked)
    out[np.concatenate(positions)] = stacked
    return out
