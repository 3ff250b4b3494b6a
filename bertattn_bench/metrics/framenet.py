"""Kovaleva et al. 2019 §4.2 (Fig. 3) and §5: heads that link a frame-evoking target to its core frame elements.

The paper: for every head, "the maximum absolute attention weight among those token pairs that correspond to the
annotated semantic link" in a sentence, averaged over the sentences; heads above the 99th percentile of the
distribution of values for all heads are the frame-semantic heads (2 of 144, 0.201 and 0.209).

Here, on the sentences of :mod:`bertattn_bench.data.framenet`:

* **Word-level attention** as the project does it (``batching.py``, ``metrics/syntax.py``): attention *from* a word
  averages over its pieces, attention *to* a word sums over its pieces, [CLS]/[SEP] are not words. The paper works
  on word pieces; it does not say which direction its token pairs take, so both are measured: ``t2f`` (from a
  target word to a core-FE word; the paper's example reads "agitated" -> "He"), ``f2t`` (FE -> target) and ``both``
  (the max over the pairs of both directions: the claims' default, as the catalogue's reading).
* **Score** per head and sentence: the max over the linked (target word, FE word) pairs; the head's value is the
  mean over sentences.
* **Control** (ours): each linked pair (t, t + d) is replaced by a random pair (t', t' + d) of the same sentence at
  the same signed word distance d that is not itself a linked pair, ``DRAWS`` seeded draws per sentence (seed =
  (0, sentence index): independent of batching), scored the same way. Where a sentence has no other pair at that
  distance the linked pair itself is used (conservative: it raises the control; counted in ``n_fallback``).
* **A frame-semantic head** must (a) score above the 99th percentile over all heads of the control's values (the
  paper's threshold taken on the null distribution: over the heads' own scores the 99th percentile is passed by
  1% of the heads by construction, e.g. 2 of 144 or 1 of 72, whatever the heads do), and (b) beat its own control:
  the per-sentence difference (score - mean of the draws) is > 0 by a one-sided paired t-test, Bonferroni over
  the L x H heads at alpha = 0.01.

Everything is reduced batch by batch on the model's device (sums, sums of squares, one attention row per head for
the paper's example sentence); padded positions never enter (the word pooling matrices are zero there).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..attention import Reducer, head_name
from ..passes import NothingToMeasure
from ..plotting import pyplot, save_figure
from ..registry import Measurement, NotApplicable, family, figure, metric

DIRECTIONS = ("t2f", "f2t", "both")
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
    example: dict = field(default_factory=dict)  # the paper's sentence: words, target, FE words, rows (L, H, W)
    description: str = ""

    def d(self, direction: str) -> int:
        return DIRECTIONS.index(direction)

    @property
    def shape(self) -> tuple[int, int]:
        return self.score.shape[1], self.score.shape[2]


class FrameReducer(Reducer):
    """Sums over sentences, per (direction, layer, head), of the linked pairs' max attention and of the control's."""

    def __init__(self, pairs_per_example: list[list[tuple[int, int]]], n_words: list[int], n_layers: int,
                 n_heads: int, device, draws: int = DRAWS, seed: int = CONTROL_SEED, example_index: int | None = None,
                 pooling: str = "mean"):
        if pooling not in ("mean", "sum"):
            raise ValueError(f"pooling={pooling!r}: expected 'mean' or 'sum'")
        self.pooling = pooling
        # per example, built once: rows [from word, to word, group] for both directions; the group of a pair is
        # its direction (0: target -> FE, 1: FE -> target) for the linked pairs, direction * draws + draw for the
        # control's; a batch adds 2 * (row in batch) (x draws) to them
        self.real, self.ctrl, self.n_pairs_of, self.n_fallback = [], [], [], 0
        for i, pairs in enumerate(pairs_per_example):
            p = np.array(pairs, dtype=np.int64).reshape(-1, 2)
            c, fb = control_pairs(pairs, n_words[i], draws, np.random.default_rng([seed, i]))
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
        shape = (3, n_layers, n_heads)
        z = lambda: torch.zeros(shape, dtype=torch.float64, device=device)  # noqa: E731
        self.score_sum, self.control_sum, self.diff_sum, self.diff_sq = z(), z(), z(), z()
        self.n_sentences, self.n_pairs = 0, 0
        self.example_rows = None

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
        self.real_idx = torch.from_numpy(np.concatenate(real)).to(self.device).unbind(1)
        self.ctrl_idx = torch.from_numpy(np.concatenate(ctrl)).to(self.device).unbind(1)
        self.batch = batch
        # attention to a word: the mean over its pieces (the paper's scale: one piece pair), not Clark's sum (see
        # the module docstring: a sum favours the many-piece content words of the links under any diffuse head)
        self.to_word = batch.word_to / batch.word_to.sum(1, keepdim=True).clamp_min(1) if self.pooling == "mean" \
            else batch.word_to
        self.n_sentences += len(batch.examples)
        self.b = len(batch.examples)

    def _group_max(self, words: torch.Tensor, idx, n_groups: int) -> torch.Tensor:
        """(n_groups, H): max of the word-level attention over each group's pairs."""
        b, i, j, g = idx
        vals = words[b, :, i, j]  # (P, H)
        out = torch.full((n_groups, vals.shape[1]), -1.0, dtype=vals.dtype, device=vals.device)
        return out.scatter_reduce(0, g[:, None].expand_as(vals), vals, reduce="amax", include_self=True)

    def update(self, layer: int, probs: torch.Tensor) -> None:
        bt = self.batch
        words = (bt.word_from.unsqueeze(1) @ probs.float()) @ self.to_word.unsqueeze(1)  # (B, H, W, W)
        h = words.shape[1]
        real = self._group_max(words, self.real_idx, 2 * self.b).view(self.b, 2, h)
        real = torch.cat([real, real.amax(1, keepdim=True)], dim=1)  # (B, 3, H): t2f, f2t, both
        ctrl = self._group_max(words, self.ctrl_idx, 2 * self.b * self.draws).view(self.b, 2, self.draws, h)
        ctrl = torch.cat([ctrl, ctrl.amax(1, keepdim=True)], dim=1).mean(2)  # both per draw, then mean over draws
        diff = (real - ctrl).double()
        self.score_sum[:, layer] += real.double().sum(0)
        self.control_sum[:, layer] += ctrl.double().sum(0)
        self.diff_sum[:, layer] += diff.sum(0)
        self.diff_sq[:, layer] += diff.square().sum(0)
        if self.example_row is not None:
            if self.example_rows is None:
                self.example_rows = torch.zeros(len(self.score_sum[0]), h, words.shape[2], words.shape[3],
                                                device=words.device)
            self.example_rows[layer] = words[self.example_row]

    def finalize(self) -> FrameResult:
        n = max(self.n_sentences, 1)
        mean = self.diff_sum / n
        var = (self.diff_sq / n - mean.square()).clamp_min(0) * n / max(n - 1, 1)
        cpu = lambda x: x.cpu().numpy()  # noqa: E731
        return FrameResult(score=cpu(self.score_sum / n), control=cpu(self.control_sum / n), diff_mean=cpu(mean),
                           diff_sd=cpu(var.sqrt()), n_sentences=self.n_sentences, n_pairs=self.n_pairs,
                           n_fallback=self.n_fallback, draws=self.draws,
                           example={"maps": None if self.example_rows is None else cpu(self.example_rows)})


# quick tier (CI): one record per lexical unit (3,388 sentences, seconds); full tier: also every record (8,467)
TIER_CORPORA = {"quick": ("one_per_lu",), "full": ("one_per_lu", "all")}


@family("framenet", corpora=("one_per_lu", "all"), default_corpus="one_per_lu", tier_corpora=TIER_CORPORA)
def prepare_framenet(loaded, data_dir: Path, corpus: str = "one_per_lu", limit: int | None = None,
                     batch_size: int = 32):
    """Kovaleva §4.2 on FrameNet 1.5 exemplars (filters and n per step in ``data/framenet.py``)."""
    from ..batching import drop_too_long, encode_words
    from ..data.framenet import load_corpus
    from ..passes import PreparedPass

    fn = load_corpus(data_dir, corpus, limit)
    encoded, skipped = drop_too_long([encode_words(loaded.tokenizer, i, r.words) for i, r in enumerate(fn.records)],
                                     loaded.info.max_positions)
    pairs = [r.link_pairs() for r in fn.records]
    ex_index = next(i for i, r in enumerate(fn.records) if r.annoset_id == fn.example.annoset_id)
    info = loaded.info

    def finish(result: FrameResult) -> FrameResult:
        ex = fn.records[ex_index]
        maps = result.example.pop("maps")
        target = ex.target_words[0]
        result.example = {"annoset_id": ex.annoset_id, "words": ex.words, "target": target, "lu": ex.lu,
                          "frame": ex.frame, "fe_words": sorted({w for fe in ex.links for w in fe.words}),
                          "fe_names": [fe.name for fe in ex.links],
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


def frame_heads(r: FrameResult, direction: str = "both", percentile: float = PERCENTILE, alpha: float = ALPHA):
    """The frame-semantic heads, strongest first: [(layer, head, score, control, p)], the control's percentile
    threshold, and every head's one-sided paired p-value (L, H)."""
    from scipy.stats import t as student_t

    d = r.d(direction)
    score, control = r.score[d], r.control[d]
    se = r.diff_sd[d] / np.sqrt(r.n_sentences)
    with np.errstate(divide="ignore", invalid="ignore"):
        tstat = np.where(se > 0, r.diff_mean[d] / se, np.where(r.diff_mean[d] > 0, np.inf, 0.0))
    p = student_t.sf(tstat, r.n_sentences - 1)
    threshold = float(np.percentile(control, percentile))
    n_heads = score.size
    ok = (score > threshold) & (p * n_heads < alpha)
    heads = [(int(l), int(h), float(score[l, h]), float(control[l, h]), float(p[l, h]))
             for l, h in zip(*np.nonzero(ok))]
    return sorted(heads, key=lambda x: -x[2]), threshold, p


def _n(r: FrameResult) -> dict:
    return {"n": r.n_sentences, "n_unit": "sentences"}


@metric("framenet_heads")
def framenet_heads(pr, direction: str = "both", percentile: float = PERCENTILE, alpha: float = ALPHA) -> Measurement:
    """Number of frame-semantic heads (module docstring: above the control's 99th percentile over all heads and
    beating their own matched-distance control), listed ``layer-head`` with score / control."""
    r = _result(pr)
    heads, threshold, p = frame_heads(r, direction, percentile, alpha)
    d = r.d(direction)
    score = r.score[d]
    paper_threshold = float(np.percentile(score, percentile))
    above_paper = [divmod(int(i), score.shape[1]) for i in np.argsort(-score, axis=None) if score.flat[i] > paper_threshold]
    top = [divmod(int(i), score.shape[1]) for i in np.argsort(-score, axis=None)[:5]]
    listed = ", ".join(f"{head_name(l, h)} {s:.3f} vs control {c:.3f} (p {pv:.1e})" for l, h, s, c, pv in heads)
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
def framenet_top_score(pr, direction: str = "both") -> Measurement:
    """The highest head score (mean over sentences of the max linked-pair attention) and its head (paper: 0.209)."""
    r = _result(pr)
    score = r.score[r.d(direction)]
    l, h = divmod(int(np.argmax(score)), score.shape[1])
    return Measurement(float(score[l, h]), unit="attention", head=head_name(l, h), **_n(r),
                       detail=f"{direction}: control {r.control[r.d(direction)][l, h]:.3f}; median head "
                              f"{np.median(score):.3f}")


@metric("framenet_example_argmax")
def framenet_example_argmax(pr, top: int = 2, direction: str = "both") -> Measurement:
    """In the paper's example ("He was becoming agitated"), how many of the ``top`` strongest frame-semantic heads
    attend most from the target ("agitated") to a linked FE word ("He"); special tokens and the target itself are
    not candidates. No frame-semantic head: 0."""
    r = _result(pr)
    ex = r.example
    if ex.get("rows") is None:
        raise NotApplicable("the paper's example sentence was not in the pass")
    heads, _, _ = frame_heads(r, direction)
    words, target = ex["words"], ex["target"]
    hits, parts = 0, []
    for l, h, s, c, _ in heads[:top]:
        row = ex["rows"][l, h].copy()
        self_w = float(row[target])
        row[target] = -np.inf
        arg = int(np.argmax(row))
        hits += arg in ex["fe_words"]
        parts.append(f"{head_name(l, h)}: argmax {words[arg]!r} {row[arg]:.2f} (self {self_w:.2f})")
    ranked = np.argsort(-r.score[r.d(direction)], axis=None)[:top]
    others = []
    for i in ranked:
        l, h = divmod(int(i), r.score.shape[2])
        row = ex["rows"][l, h].copy()
        row[target] = -np.inf
        others.append(f"{head_name(l, h)} -> {words[int(np.argmax(row))]!r}")
    return Measurement(float(hits), n=1, n_unit="sentence", unit=f"of top {top}",
                       detail=f"{' '.join(words)!r} ({ex['lu']}, {ex['frame']}, annoset {ex['annoset_id']}; FE "
                              f"{', '.join(ex['fe_names'])} = {', '.join(words[w] for w in ex['fe_words'])}): "
                              f"{'; '.join(parts) or 'no frame-semantic head'}; top {top} heads by score, frame-"
                              f"semantic or not: {', '.join(others)}")


@metric("framenet_heads_disable_margin")
def framenet_heads_disable_margin(pr, passes: list, direction: str = "both", seed_sd: dict | None = None
                                  ) -> Measurement:
    """Kovaleva §5: disabling a frame-semantic head does not lower the score. Per task sweep in ``passes`` (the
    ``disable`` family), the lowest Δ (mean over seeds) among the frame-semantic heads plus the noise bar (one
    example's step, seed sd): >= 0 means no head lowers the score by more than noise."""
    from .disabling import _noise
    from .finetuned import result_of

    r = _result(pr)
    heads, _, _ = frame_heads(r, direction)
    if not heads:
        raise NotApplicable("no frame-semantic head on this model (kov.framenet_heads): nothing to disable")
    margins, parts, n_dev = [], [], []
    for p in passes:
        dr = result_of(p)
        if (dr.n_layers, dr.n_heads) != r.shape:
            raise NotApplicable(f"the {dr.task} sweep has {dr.n_layers}x{dr.n_heads} heads, the FrameNet pass "
                                f"{r.shape[0]}x{r.shape[1]}")
        bar, how = _noise(dr, seed_sd)
        for l, h, *_ in heads:
            delta = float(dr.head_delta[:, l, h].mean())
            pv = dr.head_p[:, l, h]
            margins.append(delta + bar)
            ptxt = "" if np.isnan(pv).all() else f", McNemar p {', '.join(f'{x:.3g}' for x in pv)}"
            parts.append(f"{dr.task} {head_name(l, h)} {delta:+.2f}{ptxt}")
        parts.append(how)
        n_dev.append(dr.n_dev)
    return Measurement(float(min(margins)), n=int(min(n_dev)), n_unit="dev examples", unit="points over -noise",
                       head=head_name(*heads[0][:2]), detail="Δ when disabled: " + "; ".join(parts))


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
        d = r.d("both")
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
            x = np.arange(len(ex["words"]))
            for k, (l, h) in enumerate(ranked):
                ax.bar(x + (k - 0.5) * 0.4, ex["rows"][l, h], 0.4, label=head_name(l, h))
            ax.set_xticks(x, ex["words"], fontsize=7, rotation=30)
            ax.set_title(f"from {ex['words'][ex['target']]!r} ({ex['frame']})", fontsize=8)
            ax.legend(fontsize=7)
        fig.suptitle(f"{pr.model.name} / FrameNet {pr.corpus} (n = {r.n_sentences} sentences, {r.n_pairs} linked "
                     f"pairs): Kovaleva Fig. 3; boxed: frame-semantic heads", fontsize=9)
        paths.append(save_figure(fig, directory, f"framenet-{pr.model.slug}-{pr.corpus}.png"))
    return paths
