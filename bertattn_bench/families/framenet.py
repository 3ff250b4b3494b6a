"""Kovaleva et al. 2019 §4.2 (Fig. 3) and §5: heads that link a frame-evoking target to its core frame elements.

The paper: for every head, "the maximum absolute attention weight among those token pairs that correspond to the
annotated semantic link" in a sentence, averaged over the sentences; heads above the 99th percentile of the
distribution of values for all heads are the frame-semantic heads (2 of 144, 0.201 and 0.209).

**Default (corpus "notebook"): the authors' code** (text-machine-lab/dark-secrets-of-BERT, ``visualize_attention.ipynb``,
"7. BaseBERT study", ``analyze_sem_links`` and ``get_max_source_target_weight``), on the sentences of
:mod:`bertattn_bench.data.framenet_corpus`'s notebook filters: the input is ``[CLS] sentence [SEP]`` with the sentence cut
to ``NOTEBOOK_MAX_LEN - 3`` = 17 word pieces (``convert_to_bert_tokens(..., max_len=20)``); the target's pieces and the
linked FEs' pieces (concatenated in FE order) are located by the *first* occurrence of the piece string in the input
(``bert_tokens.index``); the pairs are ``zip(FE pieces, target pieces)`` (so a one-piece target pairs only with
the first FE piece) and the score is the max over those pairs of ``attn[FE piece, target piece]`` (from the FE, to
the target: direction ``f2t``); the head's value is the mean over sentences. An example whose target or FE piece is
not in the cut input (the notebook would raise) is left out and counted. ``t2f``/``both`` are the same zipped pairs
in the other / both directions.

**The project's variants** (corpora "one_per_lu", "all"): word-level attention as ``batching.py`` builds it but with
attention *to* a word the **mean** over its pieces (the paper's scale: one piece pair; a sum favours many-piece
words under any diffuse head), [CLS]/[SEP] not words; every (target word, linked FE word) pair, max over pairs, in
``t2f`` (from the target), ``f2t`` (to the target) or ``both`` (their max: those corpora's default).

* **Control** (ours): each linked pair (t, t + d) is replaced by a random pair (t', t' + d) of the same sentence at
  the same signed distance d (pieces of the sentence for the notebook corpus, words otherwise) that is not itself a
  linked pair, ``DRAWS`` seeded draws per sentence (seed = (0, sentence index): independent of batching), scored
  the same way. Where a sentence has no other pair at that distance the linked pair itself is used (conservative:
  it raises the control; counted in ``n_fallback``).
* **A frame-semantic head** must (a) score above the 99th percentile over all heads of the control's values (the
  paper's threshold taken on the null distribution: over the heads' own scores the 99th percentile is passed by
  1% of the heads by construction, e.g. 2 of 144 or 1 of 72, whatever the heads do), and (b) beat its own control:
  the per-sentence difference (score - mean of the draws) is > 0 by a one-sided paired t-test, Bonferroni over
  the L x H heads at alpha = 0.01.

Everything is reduced batch by batch on the model's device (sums, sums of squares, the paper's example sentence's
maps); padded positions never enter.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..base.plotting import pyplot, save_figure
from ..claims.registry import Measurement, NotApplicable, family, figure, metric
from ..claims.stats import one_sided_t_p
from ..engine.attention import Reducer, head_name
from ..engine.batching import to_device_parts
from ..engine.passes import NothingToMeasure
from .common.surface_stats import with_percentile_bounds

DIRECTIONS = ("t2f", "f2t", "both")
NOTEBOOK_MAX_LEN = 20  # analyze_sem_links: convert_to_bert_tokens(sentence, "", max_len=20)
DEFAULT_DIRECTION = {"piece": "f2t", "word": "both"}
DRAWS = 10  # random matched-distance pair sets per sentence
CONTROL_SEED = 0
PERCENTILE = 99.0  # Kovaleva §4.2
ALPHA = 0.01


def control_pairs(pairs: list[tuple[int, int]], n_words: int, draws: int, rng: np.random.Generator
                  ) -> tuple[np.ndarray, int]:
    """``draws`` random replacements of every linked pair (t, f): (t', t' + (f - t)) inside the sentence and not a
    linked pair (either order). Returns (draws, P, 2) word indices and how many had no alternative."""
    linked = {frozenset(p) for p in pairs}
    out = np.zeros((draws, len(pairs), 2), dtype=np.int64)
    fallback = 0
    for j, (t, f) in enumerate(pairs):
        d = f - t
        cand = [s for s in range(max(0, -d), min(n_words, n_words - d)) if frozenset((s, s + d)) not in linked]
        if not cand:
            out[:, j] = (t, f)
            fallback += draws
            continue
        starts = rng.choice(np.array(cand), size=draws)
        out[:, j, 0], out[:, j, 1] = starts, starts + d
    return out, fallback


@dataclass
class FrameResult:
    """Per-head means over sentences, numpy ``(3 directions, L, H)``; n = sentences."""

    score: np.ndarray  # mean over sentences of the max over linked pairs
    control: np.ndarray  # the same over the matched-distance random pairs (mean over draws)
    diff_mean: np.ndarray  # mean over sentences of (score - control)
    diff_sd: np.ndarray  # sd over sentences of that difference
    n_sentences: int
    n_pairs: int
    n_fallback: int  # control draws that had to reuse the linked pair (no other pair at that distance)
    draws: int
    example: dict = field(default_factory=dict)  # the paper's sentence: labels, the plotted row, rows (L, H, T)
    description: str = ""
    level: str = "word"  # "piece" (the notebook's scoring) or "word" (the project's variants)
    # per sentence (issue 61: the bootstrap over sentences): the linked pairs' max and the control's, (N, 3, L, H)
    score_per_sentence: np.ndarray | None = None
    control_per_sentence: np.ndarray | None = None

    def resample(self, idx: np.ndarray) -> "FrameResult":
        """The per-head means over the sentences ``idx`` (with repeats: one bootstrap sample), as the pooled ones."""
        real, ctrl = self.score_per_sentence[idx].astype(np.float64), self.control_per_sentence[idx].astype(np.float64)
        diff = real - ctrl
        return FrameResult(score=real.mean(0), control=ctrl.mean(0), diff_mean=diff.mean(0),
                           diff_sd=diff.std(0, ddof=1) if len(idx) > 1 else np.zeros_like(diff[0]),
                           n_sentences=len(idx), n_pairs=self.n_pairs, n_fallback=self.n_fallback, draws=self.draws,
                           level=self.level)

    def d(self, direction: str | None) -> int:
        return DIRECTIONS.index(self.direction(direction))

    def direction(self, direction: str | None) -> str:
        """``None``: the corpus' own direction (the notebook: FE -> target; the project's variants: both)."""
        if direction is None:
            return DEFAULT_DIRECTION[self.level]
        if direction not in DIRECTIONS:
            raise ValueError(f"direction={direction!r}: expected one of {', '.join(DIRECTIONS)}")
        return direction

    @property
    def shape(self) -> tuple[int, int]:
        return self.score.shape[1], self.score.shape[2]


class FrameReducer(Reducer):
    """Sums over sentences, per (direction, layer, head), of the linked pairs' max attention and of the control's."""

    maps_only = True  # reads nothing but the maps: each forward pass may stop after the last one

    def __init__(self, pairs_per_example: list[list[tuple[int, int]]], n_words: list[int], n_layers: int,
                 n_heads: int, device, draws: int = DRAWS, seed: int = CONTROL_SEED, example_index: int | None = None,
                 pooling: str = "mean", level: str = "word", offset: int = 0):
        """``level`` "word": pairs are word indices (word-level maps); "piece": positions in the input, with
        ``n_words[i]`` the sentence's pieces starting at ``offset`` (1: after [CLS]) for the control's draws."""
        if pooling not in ("mean", "sum"):
            raise ValueError(f"pooling={pooling!r}: expected 'mean' or 'sum'")
        if level not in DEFAULT_DIRECTION:
            raise ValueError(f"level={level!r}: expected one of {', '.join(DEFAULT_DIRECTION)}")
        self.pooling, self.level = pooling, level
        # per example, built once: rows [from word, to word, group] for both directions; the group of a pair is
        # its direction (0: target -> FE, 1: FE -> target) for the linked pairs, direction * draws + draw for the
        # control's; a batch adds 2 * (row in batch) (x draws) to them
        self.real, self.ctrl, self.n_pairs_of, self.n_fallback = [], [], [], 0
        for i, pairs in enumerate(pairs_per_example):
            p = np.array(pairs, dtype=np.int64).reshape(-1, 2)
            c, fb = control_pairs([(t - offset, f - offset) for t, f in pairs], n_words[i], draws,
                                  np.random.default_rng([seed, i]))
            c = c + offset
            self.n_fallback += fb
            n = len(p)
            self.real.append(np.concatenate([np.stack([p[:, 0], p[:, 1], np.zeros(n, np.int64)], 1),
                                             np.stack([p[:, 1], p[:, 0], np.ones(n, np.int64)], 1)]))
            k = np.repeat(np.arange(draws), n)
            cf = c.reshape(-1, 2)
            self.ctrl.append(np.concatenate([np.stack([cf[:, 0], cf[:, 1], k], 1),
                                             np.stack([cf[:, 1], cf[:, 0], draws + k], 1)]))
            self.n_pairs_of.append(n)
        self.draws, self.device, self.example_index = draws, device, example_index
        self.n_layers, self.n_heads = n_layers, n_heads
        self.n_sentences, self.n_pairs = 0, 0
        self.example_rows = None
        self.per_real, self.per_ctrl = [], []  # per sentence, (B, 3, L, H) per batch

    def start_batch(self, batch) -> None:
        self.example_row = None
        real, ctrl = [], []
        for b, ex in enumerate(batch.examples):
            if ex.index == self.example_index:
                self.example_row = b
            r, c = self.real[ex.index], self.ctrl[ex.index]
            real.append(np.column_stack([np.full(len(r), b), r[:, :2], r[:, 2] + 2 * b]))
            ctrl.append(np.column_stack([np.full(len(c), b), c[:, :2], c[:, 2] + 2 * b * self.draws]))
            self.n_pairs += self.n_pairs_of[ex.index]
        real_t, ctrl_t = to_device_parts([np.concatenate(real), np.concatenate(ctrl)], self.device)  # one copy
        self.real_idx, self.ctrl_idx = real_t.unbind(1), ctrl_t.unbind(1)
        self.batch = batch
        # attention to a word: the mean over its pieces (the paper's scale: one piece pair), not Clark's sum (see
        # the module docstring: a sum favours the many-piece content words of the links under any diffuse head)
        if self.level == "word":
            self.to_word = batch.word_to / batch.word_to.sum(1, keepdim=True).clamp_min(1) \
                if self.pooling == "mean" else batch.word_to
        self.n_sentences += len(batch.examples)
        self.b = len(batch.examples)
        self.b_real = torch.zeros(self.b, 3, self.n_layers, self.n_heads, dtype=torch.float64, device=self.device)
        self.b_ctrl = torch.zeros_like(self.b_real)
        self.per_real.append(self.b_real)  # filled in place by the batch's layers
        self.per_ctrl.append(self.b_ctrl)

    def _group_max(self, words: torch.Tensor, idx, n_groups: int) -> torch.Tensor:
        """(n_groups, H): max of the word-level attention over each group's pairs."""
        b, i, j, g = idx
        vals = words[b, :, i, j]  # (P, H)
        out = torch.full((n_groups, vals.shape[1]), -1.0, dtype=vals.dtype, device=vals.device)
        return out.scatter_reduce(0, g[:, None].expand_as(vals), vals, reduce="amax", include_self=True)

    def update(self, layer: int, probs: torch.Tensor) -> None:
        bt = self.batch
        if self.level == "piece":
            words = probs.float()  # (B, H, T, T): the notebook's piece-level maps
        else:
            words = (bt.word_from.unsqueeze(1) @ probs.float()) @ self.to_word.unsqueeze(1)  # (B, H, W, W)
        h = words.shape[1]
        real = self._group_max(words, self.real_idx, 2 * self.b).view(self.b, 2, h)
        real = torch.cat([real, real.amax(1, keepdim=True)], dim=1)  # (B, 3, H): t2f, f2t, both
        ctrl = self._group_max(words, self.ctrl_idx, 2 * self.b * self.draws).view(self.b, 2, self.draws, h)
        ctrl = torch.cat([ctrl, ctrl.amax(1, keepdim=True)], dim=1).mean(2)  # both per draw, then mean over draws
        # per sentence (float64): the sums, the paired differences and their squares are made from them at the end
        self.b_real[:, :, layer], self.b_ctrl[:, :, layer] = real, ctrl
        if self.example_row is not None:
            if self.example_rows is None:
                self.example_rows = torch.zeros(self.n_layers, h, words.shape[2], words.shape[3],
                                                device=words.device)
            self.example_rows[layer] = words[self.example_row]

    def finalize(self) -> FrameResult:
        n = max(self.n_sentences, 1)
        # the sums over sentences, made from the per-sentence values (none read: zeros)
        real = torch.cat(self.per_real) if self.per_real else \
            torch.zeros(0, 3, self.n_layers, self.n_heads, dtype=torch.float64, device=self.device)
        ctrl = torch.cat(self.per_ctrl) if self.per_ctrl else torch.zeros_like(real)  # (N, 3, L, H)
        diff = real - ctrl
        mean = diff.sum(0) / n
        var = (diff.square().sum(0) / n - mean.square()).clamp_min(0) * n / max(n - 1, 1)
        cpu = lambda x: x.cpu().numpy()  # noqa: E731
        return FrameResult(score=cpu(real.sum(0) / n), control=cpu(ctrl.sum(0) / n), diff_mean=cpu(mean),
                           diff_sd=cpu(var.sqrt()), n_sentences=self.n_sentences, n_pairs=self.n_pairs,
                           n_fallback=self.n_fallback, draws=self.draws, level=self.level,
                           example={"maps": None if self.example_rows is None else cpu(self.example_rows)},
                           score_per_sentence=cpu(torch.cat(self.per_real).float()) if self.per_real else None,
                           control_per_sentence=cpu(torch.cat(self.per_ctrl).float()) if self.per_ctrl else None)


# every tier: the notebook's population (439 sentences, seconds); full tier: also the project's variants
TIER_CORPORA = {"quick": ("notebook",), "regression": ("notebook",), "full": ("notebook", "one_per_lu", "all")}


def notebook_pairs(tokenizer, text: str, target: tuple[int, int], links: list, max_len: int = NOTEBOOK_MAX_LEN):
    """``analyze_sem_links`` for one sentence: (input pieces, [(target position, FE position)] as zipped by
    ``get_max_source_target_weight``) or (pieces, None) when a target/FE piece is not in the cut input."""
    cls, sep = tokenizer.cls_token, tokenizer.sep_token
    if cls is None or sep is None:
        raise ValueError(f"{type(tokenizer).__name__} has no cls/sep token: cannot build [CLS] sentence [SEP]")
    pieces = [cls, *tokenizer.tokenize(text)[:max_len - 3], sep]
    try:
        target_idx = [pieces.index(p) for p in tokenizer.tokenize(text[target[0]:target[1]])]
        source_idx = [pieces.index(p) for fe in links for p in tokenizer.tokenize(text[fe.start:fe.end])]
    except ValueError:
        return pieces, None
    return pieces, [(t, f) for f, t in zip(source_idx, target_idx)]


def _prepare_notebook(loaded, fn, batch_size: int):
    from ..engine.batching import Encoded, Skipped
    from ..engine.passes import PreparedPass

    tok, info = loaded.tokenizer, loaded.info
    encoded, pairs, lengths, kept_records = [], [], [], []
    skipped = Skipped(reason="")
    for k, r in enumerate(fn.records):
        pieces, pr = notebook_pairs(tok, r.text, r.target_spans[0], r.links)
        if pr is None:
            skipped.n += 1
            skipped.indices.append(k)
            continue
        ids = tok.convert_tokens_to_ids(pieces)
        i = len(encoded)
        encoded.append(Encoded(i, ids, [0] * len(ids), [-1] * len(ids), 0))
        pairs.append(pr)
        lengths.append(len(pieces) - 2)
        kept_records.append((r, pieces))
    skipped.reason = ("sentence(s) whose target or FE piece is not in the 20-piece input (the notebook's "
                      "bert_tokens.index would raise)") if skipped.n else ""
    ex_index = next((i for i, (r, _) in enumerate(kept_records) if r.annoset_id == fn.example.annoset_id), None)

    def finish(result: FrameResult) -> FrameResult:
        maps = result.example.pop("maps")
        result.description = fn.description
        if ex_index is None or maps is None:
            return result
        ex, pieces = kept_records[ex_index]
        (t0, f0) = pairs[ex_index][0]
        # cell 71/72: the row of the first FE piece ("he"); a hit is its argmax on a target piece
        row_of = f0
        result.example = {"annoset_id": ex.annoset_id, "labels": pieces, "row": row_of, "lu": ex.lu,
                          "frame": ex.frame, "hits": sorted({t for t, _ in pairs[ex_index]}),
                          "exclude": [0, len(pieces) - 1, row_of], "fe_names": [fe.name for fe in ex.links],
                          "what": f"the row of {pieces[row_of]!r} (the FE's first piece, notebook cells 71-72), argmax "
                                  f"over the other sentence pieces", "rows": maps[:, :, row_of, :len(pieces)]}
        return result

    return PreparedPass("framenet", "notebook", fn.description, loaded, encoded, skipped,
                        lambda: FrameReducer(pairs, lengths, info.n_layers, info.n_heads, info.device,
                                             example_index=ex_index, level="piece", offset=1),
                        finish=finish, with_words=False, batch_size=batch_size, data_paths=fn.paths)


@family("framenet", corpora=("notebook", "one_per_lu", "all"), default_corpus="notebook", tier_corpora=TIER_CORPORA)
def prepare_framenet(loaded, data_dir: Path, corpus: str = "notebook", limit: int | None = None,
                     batch_size: int = 32):
    """Kovaleva §4.2 on FrameNet 1.5 exemplars (filters and n per step in ``data/framenet_corpus.py``)."""
    from ..data.framenet_corpus import load_corpus
    from ..engine.batching import drop_too_long, encode_words
    from ..engine.passes import PreparedPass

    fn = load_corpus(data_dir, corpus, limit)
    if corpus == "notebook":
        return _prepare_notebook(loaded, fn, batch_size)
    encoded, skipped = drop_too_long([encode_words(loaded.tokenizer, i, r.words) for i, r in enumerate(fn.records)],
                                     loaded.info.max_positions)
    pairs = [r.link_pairs() for r in fn.records]
    ex_index = next(i for i, r in enumerate(fn.records) if r.annoset_id == fn.example.annoset_id)
    info = loaded.info

    def finish(result: FrameResult) -> FrameResult:
        ex = fn.records[ex_index]
        maps = result.example.pop("maps")
        target = ex.target_words[0]
        result.example = {"annoset_id": ex.annoset_id, "labels": ex.words, "row": target, "lu": ex.lu,
                          "frame": ex.frame, "hits": sorted({w for fe in ex.links for w in fe.words}),
                          "exclude": [target], "fe_names": [fe.name for fe in ex.links],
                          "what": f"the row of the target {ex.words[target]!r} (word-level), argmax over the other words",
                          "rows": None if maps is None else maps[:, :, target, :len(ex.words)]}
        result.description = fn.description
        return result

    return PreparedPass("framenet", corpus, fn.description, loaded, encoded, skipped,
                        lambda: FrameReducer(pairs, [len(r.words) for r in fn.records], info.n_layers, info.n_heads,
                                             info.device, example_index=ex_index),
                        finish=finish, with_words=True, batch_size=batch_size, data_paths=fn.paths)


# ---- claim metrics (named by reference_numbers/kovaleva2019_framenet.toml) -------------------------------------

def _result(pr) -> FrameResult:
    r = pr.result
    if isinstance(r, NothingToMeasure):
        raise NotApplicable(r.reason)
    if r.n_sentences < 2:
        raise NotApplicable(f"{r.n_sentences} sentence(s): no spread over sentences to test against the control")
    return r


def frame_heads(r: FrameResult, direction: str | None = None, percentile: float = PERCENTILE, alpha: float = ALPHA):
    """The frame-semantic heads, strongest first: [(layer, head, score, control, p)], the control's percentile
    threshold, and every head's one-sided paired p-value (L, H)."""
    d = r.d(direction)
    score, control = r.score[d], r.control[d]
    _, _, p = one_sided_t_p(r.diff_mean[d], r.diff_sd[d], r.n_sentences)
    threshold = float(np.percentile(control, percentile))
    n_heads = score.size
    ok = (score > threshold) & (p * n_heads < alpha)
    heads = [(int(l), int(h), float(score[l, h]), float(control[l, h]), float(p[l, h]))
             for l, h in zip(*np.nonzero(ok))]
    return sorted(heads, key=lambda x: -x[2]), threshold, p


def _n(r: FrameResult) -> dict:
    return {"n": r.n_sentences, "n_unit": "sentences"}


@metric("framenet_heads")
def framenet_heads(pr, direction: str | None = None, percentile: float = PERCENTILE, alpha: float = ALPHA) -> Measurement:
    """Number of frame-semantic heads (module docstring: above the control's 99th percentile over all heads and
    beating their own matched-distance control), listed ``layer-head`` with score / control."""
    r = _result(pr)
    heads, threshold, p = frame_heads(r, direction, percentile, alpha)
    m = _framenet_heads(r, heads, threshold, p, direction, percentile, alpha)
    if r.score_per_sentence is None or r.n_sentences < 2:
        return m
    return with_percentile_bounds(
        m, lambda idx: float(len(frame_heads(r.resample(idx), direction, percentile, alpha)[0])), r.n_sentences,
        "sentences")


def _framenet_heads(r: FrameResult, heads, threshold, p, direction, percentile: float, alpha: float) -> Measurement:
    d = r.d(direction)
    score = r.score[d]
    paper_threshold = float(np.percentile(score, percentile))
    above_paper = [divmod(int(i), score.shape[1]) for i in np.argsort(-score, axis=None) if score.flat[i] > paper_threshold]
    top = [divmod(int(i), score.shape[1]) for i in np.argsort(-score, axis=None)[:5]]
    listed = ", ".join(f"{head_name(l, h)} {s:.3f} vs control {c:.3f} (p {pv:.1e})" for l, h, s, c, pv in heads)
    direction = r.direction(direction)
    return Measurement(float(len(heads)), unit="heads", **_n(r), head=head_name(*heads[0][:2]) if heads else None,
                       detail=f"{direction}: {listed or 'none'}; control p{percentile:g} over {score.size} heads "
                              f"{threshold:.3f}; paper's criterion (p{percentile:g} of the heads' own scores, "
                              f"{paper_threshold:.3f}): {', '.join(head_name(*x) for x in above_paper)}; top 5 by "
                              f"score: " + ", ".join(f"{head_name(l, h)} {score[l, h]:.3f}/{r.control[d][l, h]:.3f}"
                                                     for l, h in top)
                              + f"; {r.n_pairs} linked pairs, {r.draws} control draws per sentence "
                                f"({r.n_fallback // max(r.draws, 1)} pairs without another at their distance reuse "
                                f"themselves); {int((p * p.size < alpha).sum())} heads beat their control by the paired "
                                f"test alone")


@metric("framenet_top_score")
def framenet_top_score(pr, direction: str | None = None) -> Measurement:
    """The highest head score (mean over sentences of the max linked-pair attention) and its head (paper: 0.209)."""
    r = _result(pr)
    score = r.score[r.d(direction)]
    l, h = divmod(int(np.argmax(score)), score.shape[1])
    return Measurement(float(score[l, h]), unit="attention", head=head_name(l, h), **_n(r),
                       detail=f"{r.direction(direction)} ({r.level} level): control {r.control[r.d(direction)][l, h]:.3f}; median head "
                              f"{np.median(score):.3f}")


@metric("framenet_example_argmax")
def framenet_example_argmax(pr, top: int = 2, direction: str | None = None) -> Measurement:
    """In the paper's example ("He was becoming agitated"), how many of the ``top`` strongest frame-semantic heads
    put the argmax of the plotted row on the linked partner: the notebook corpus plots the row of "he" (cells
    71-72, the FE's first piece) and a hit is its argmax on a piece of "agitated"; the project's word-level
    variants read the row of "agitated" and a hit is "He". [CLS]/[SEP] and the row's own token are not candidates.
    No frame-semantic head: 0."""
    r = _result(pr)
    ex = r.example
    if ex.get("rows") is None:
        raise NotApplicable("the paper's example sentence was not in the pass")
    heads, _, _ = frame_heads(r, direction)
    labels, row_of = ex["labels"], ex["row"]

    def argmax(l, h):
        row = np.asarray(ex["rows"][l, h], dtype=float).copy()
        row[ex["exclude"]] = -np.inf
        return int(np.argmax(row)), row

    hits, parts = 0, []
    for l, h, s, c, _ in heads[:top]:
        arg, row = argmax(l, h)
        hits += arg in ex["hits"]
        parts.append(f"{head_name(l, h)}: argmax {labels[arg]!r} {row[arg]:.2f}")
    ranked = np.argsort(-r.score[r.d(direction)], axis=None)[:top]
    others = [f"{head_name(*divmod(int(i), r.score.shape[2]))} -> "
              f"{labels[argmax(*divmod(int(i), r.score.shape[2]))[0]]!r}" for i in ranked]
    return Measurement(float(hits), n=1, n_unit="sentence", unit=f"of top {top}",
                       detail=f"{' '.join(labels)!r} ({ex['lu']}, {ex['frame']}, annoset {ex['annoset_id']}; FE "
                              f"{', '.join(ex['fe_names'])}; {ex['what']}; a hit: "
                              f"{', '.join(repr(labels[i]) for i in ex['hits'])}): "
                              f"{'; '.join(parts) or 'no frame-semantic head'}; top {top} heads by score, frame-"
                              f"semantic or not: {', '.join(others)}")


EQUIVALENCE_MARGIN = 1.0  # points: the scale of the paper's single-head effects (§4.6: best gains 0.1 to 1.2)
EQUIVALENCE_ALPHA = 0.05
Z_INTERVAL = 1.96  # claims.Claim.interval_z: the claim's interval is value ± 1.96 SE


@metric("framenet_heads_disable_equivalence")
def framenet_heads_disable_equivalence(pr, passes: list, margin: float = EQUIVALENCE_MARGIN,
                                       alpha: float = EQUIVALENCE_ALPHA, direction: str | None = None) -> Measurement:
    """Kovaleva §5: disabling a frame-semantic head does not lower the score, judged as an *absence* must be: by
    an equivalence test, not by a failure to reject. For every task sweep in ``passes`` (the ``disable`` family)
    and every frame-semantic head: the paired difference Δ (disabled − intact, same dev examples), mean over the
    sweep's seeds, and its SE (each seed's paired SE from its discordant counts, :func:`stats.paired_counts_se`;
    their mean bounds the mean's SE whatever the seeds' correlation), tested one-sided against −``margin`` points
    (the lower half of :func:`stats.tost`: a gain is no drop), Bonferroni over the m (task, head) tests at
    ``alpha``.

    Value: Δ + margin of the head whose Δ is least clear of the margin (smallest (Δ + margin) / SE), points; its
    standard error is that SE x z_(1−alpha/m) / 1.96, so the claim's interval value ± 1.96 SE (threshold 0) is the
    Bonferroni one-sided bound: *holds* when every head's drop is shown to be within the margin (Δ − z·SE >
    −margin for all), *does not hold* when some head's drop is significantly beyond it (Δ + z·SE < −margin),
    otherwise *inconclusive*. A regression sweep (STS-B, Pearson) is paired by each head's predictions' r with the
    undisabled model's: its SE is the one that reproduces the bound for two overlapping correlations at the test's
    level (:func:`common.sweep_scoring.head_gain_se`); a sweep stored before it kept that r is left out and named."""
    from ..claims.stats import tost
    from ..training.glue_pass import result_of
    from .common.sweep_scoring import head_gain_se, paired_by_correlation, pairing_text

    r = _result(pr)
    heads, _, _ = frame_heads(r, direction)
    if not heads:
        raise NotApplicable("no frame-semantic head on this model (kov.framenet_heads): nothing to disable")
    sweeps, unjudged = [], []
    for p in passes:
        dr = result_of(p)
        if (dr.n_layers, dr.n_heads) != r.shape:
            raise NotApplicable(f"the {dr.task} sweep has {dr.n_layers}x{dr.n_heads} heads, the FrameNet pass "
                                f"{r.shape[0]}x{r.shape[1]}")
        try:
            paired_by_correlation(dr)
        except NotApplicable as e:
            unjudged.append(str(e))
            continue
        sweeps.append(dr)
    if not sweeps:
        raise NotApplicable("; ".join(unjudged))
    m = len(sweeps) * len(heads)
    level = alpha / m  # the one-sided level each test runs at (tost's z)
    tests, parts = [], []
    for dr in sweeps:
        S = range(len(dr.seeds))
        for l, h, *_ in heads:
            deltas = [float(dr.head_delta[s, l, h]) for s in S]
            ses = [head_gain_se(dr, s, l, h, level) for s in S]
            # the mean over seeds (fine-tunes of the same task on the same dev examples): its SE is at most the
            # mean of the seeds' SEs (Cauchy-Schwarz, whatever their correlation), used as it stands
            t = tost(float(np.mean(deltas)), float(np.mean(ses)), margin, alpha, m)
            ratio = (t["delta"] + margin) / t["se"]
            tests.append((ratio, t, dr.task, (l, h), dr.n_dev))
            seeds = "" if len(deltas) == 1 else " = mean of " + ", ".join(
                f"seed {seed} {d:+.2f}" for seed, d in zip(dr.seeds, deltas))
            pairing = ", ".join(pairing_text(dr, "head", s, l * dr.n_heads + h) for s in S)
            parts.append(f"{dr.task} {head_name(l, h)} {t['delta']:+.2f} ± {t['se']:.2f}{seeds} ({pairing} of "
                         f"{dr.n_dev}; bound {t['delta'] - t['z'] * t['se']:+.2f}: {t['lower']})")
    ratio, t, task, (l, h), n_dev = min(tests, key=lambda x: x[0])
    z = t["z"]
    n_within = sum(1 for x in tests if x[1]["lower"] == "within")
    n_beyond = sum(1 for x in tests if x[1]["lower"] == "beyond")
    summary = ("every drop shown within the margin" if n_within == m else
               f"{n_beyond} drop(s) significantly beyond the margin" if n_beyond else
               f"{m - n_within} of {m} not shown within the margin (too few examples to tell)")
    return Measurement(t["delta"] + margin, n=int(min(x[4] for x in tests)), n_unit="dev examples",
                       unit=f"points above the -{margin:g} margin (least clear head)", head=head_name(l, h),
                       standard_error=t["se"] * z / Z_INTERVAL,
                       values={"margin": margin, "tests": m, "z": z, "within": n_within, "beyond": n_beyond,
                               "worst_delta": t["delta"], "worst_se": t["se"]},
                       detail=f"Δ when disabled (mean over seeds) vs -{margin:g} points, one-sided at {alpha:g}/{m} "
                              f"(Bonferroni over {m} heads x tasks, z {z:.2f}; paired SE from the discordant counts, "
                              f"floored at one pair's, or for Pearson from the overlapping-correlation bound; mean "
                              f"over seeds): {summary}; least clear {task} "
                              f"{head_name(l, h)}: "
                              + "; ".join(parts + unjudged))


@figure("framenet")
def framenet_figure(pass_results, directory: Path) -> list[Path]:
    """Kovaleva Fig. 3: per-head score, its matched-distance control and the difference (frame-semantic heads
    boxed), and the example sentence's attention from the target in the two strongest heads."""
    plt = pyplot()
    paths = []
    for pr in pass_results:
        r = pr.result
        if not isinstance(r, FrameResult) or r.n_sentences < 2:
            continue
        d = r.d(None)
        heads, threshold, _ = frame_heads(r)
        fig, axes = plt.subplots(1, 4, figsize=(14, 3.6), gridspec_kw={"width_ratios": [1, 1, 1, 1.1]})
        panels = (("score (mean max attention)", r.score[d], "viridis"),
                  (f"matched-distance control (p99 {threshold:.3f})", r.control[d], "viridis"),
                  ("score - control", r.diff_mean[d], "RdBu_r"))
        vmax = float(max(r.score[d].max(), r.control[d].max()))
        for ax, (title, values, cmap) in zip(axes, panels):
            lim = float(np.abs(values).max()) or 1.0
            kw = {"vmin": -lim, "vmax": lim} if cmap == "RdBu_r" else {"vmin": 0, "vmax": vmax}
            im = ax.imshow(values, cmap=cmap, aspect="auto", **kw)
            ax.set_xticks(range(values.shape[1]), [str(h + 1) for h in range(values.shape[1])], fontsize=6)
            ax.set_yticks(range(values.shape[0]), [str(l + 1) for l in range(values.shape[0])], fontsize=6)
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            ax.set_title(title, fontsize=8)
            for l, h, *_ in heads:
                ax.add_patch(plt.Rectangle((h - 0.5, l - 0.5), 1, 1, fill=False, ec="red", lw=1.5))
            fig.colorbar(im, ax=ax, fraction=0.046)
        ex, ax = r.example, axes[3]
        if ex.get("rows") is not None:
            ranked = [(l, h) for l, h, *_ in heads[:2]] or [divmod(int(i), r.shape[1])
                                                          for i in np.argsort(-r.score[d], axis=None)[:2]]
            x = np.arange(len(ex["labels"]))
            for k, (l, h) in enumerate(ranked):
                ax.bar(x + (k - 0.5) * 0.4, ex["rows"][l, h], 0.4, label=head_name(l, h))
            ax.set_xticks(x, ex["labels"], fontsize=7, rotation=30)
            ax.set_title(f"from {ex['labels'][ex['row']]!r} ({ex['frame']})", fontsize=8)
            ax.legend(fontsize=7)
        fig.suptitle(f"{pr.model.name} / FrameNet {pr.corpus} (n = {r.n_sentences} sentences, {r.n_pairs} linked "
                     f"pairs, {r.direction(None)}, {r.level} level): Kovaleva Fig. 3; boxed: frame-semantic heads",
                     fontsize=9)
        paths.append(save_figure(fig, directory, f"framenet-{pr.model.slug}-{pr.corpus}.png"))
    return paths
