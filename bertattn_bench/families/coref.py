"""Clark et al. §4.3 (Table 2): attention heads as antecedent selectors, against three baselines without a model.

Antecedent-selection accuracy: a coreferent mention that is not the first of its entity (in its window, see
``bertattn_bench.data.coref_corpus``) is resolved by a head when its head word attends most to the head word of *any*
earlier mention of the same entity. Word-level maps as in §4.1 (``metrics/syntax.py``): attention to a word sums
over its pieces, attention from a word averages over its pieces, [CLS]/[SEP] and the word itself are not
candidates; every word of the window is a candidate (the head is not told where the mentions are).

Baselines on the same anaphors (Clark §4.3, computed from the data): the nearest preceding mention; the nearest
preceding mention with the same lower-cased head word (no fallback: none found counts as wrong); a rule-based
system of four sieves after Lee et al. (2011): full string match, head-word match, number/gender/person agreement
(UD FEATS; for LitBank surface guesses, see ``bertattn_bench.data.litbank``), any mention; the nearest mention
passing the earliest sieve.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..base.plotting import pyplot, save_figure
from ..claims.registry import Measurement, NotApplicable, family, figure, metric
from ..claims.stats import binomial_se_points, difference_se, paired_difference_se
from ..data.coref_corpus import corpus_variants
from ..data.coref_documents import KINDS, CorefWindow, WindowStats
from ..engine.attention import Reducer, head_name, parse_head_name
from ..engine.batching import to_device
from .common.head_maps import map_masks, neighbour_mass, top_heads_neighbour_ratio

BASELINES = ("nearest", "head_word", "rules")
BASELINE_NAMES = {"nearest": "nearest mention", "head_word": "head-word match", "rules": "rule-based"}
TYPES = ("all",) + KINDS


@dataclass
class CorefResult:
    kinds: tuple[str, ...]
    correct: torch.Tensor  # (n_layers, n_kinds, n_heads) anaphors resolved by each head, per mention type
    n: torch.Tensor  # (n_kinds,) anaphors per type
    baseline_correct: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> (n_kinds,) counts
    n_windows: int = 0
    n_documents: int = 0
    n_mentions: int = 0
    stats: WindowStats | None = None
    # (n_layers, n_kinds, n_baselines, n_heads): anaphors both the head and the baseline (BASELINES order) resolve
    both: torch.Tensor | None = None
    neighbour: torch.Tensor | None = None  # (n_layers, n_heads) mean ±1-neighbour mass per window (Kovaleva §4.5)

    def count(self, kind: str = "all") -> int:
        return int(self.n.sum()) if kind == "all" else int(self.n[self.kinds.index(kind)])

    def accuracy(self, kind: str = "all") -> torch.Tensor:
        """Percent of anaphors resolved, (n_layers, n_heads)."""
        c = self.correct.sum(1) if kind == "all" else self.correct[:, self.kinds.index(kind)]
        return 100.0 * c / max(self.count(kind), 1)

    def best_head(self, kind: str = "all") -> tuple[int, int, float]:
        """0-based (layer, head) of the most accurate head on ``kind`` and its accuracy."""
        acc = self.accuracy(kind)
        layer, head = divmod(int(torch.argmax(acc)), acc.shape[1])
        return layer, head, float(acc[layer, head])

    def head_accuracy(self, layer: int, head: int, kind: str = "all") -> float:
        return float(self.accuracy(kind)[layer, head])

    def paired_se(self, layer: int, head: int, name: str, kind: str = "all") -> float | None:
        """Standard error (points) of head accuracy − baseline accuracy on the same anaphors, paired: from the
        discordant anaphors (head right/baseline wrong b, the reverse c), sqrt(((b + c) − (b − c)²/n) / n²)."""
        if self.both is None:
            return None
        kinds = slice(None) if kind == "all" else [self.kinds.index(kind)]
        both = float(self.both[layer, kinds, BASELINES.index(name), head].sum())
        n = self.count(kind)
        head_hits = float(self.correct[layer, kinds, head].sum())
        c_base = self.baseline_correct[name]
        base_hits = float(c_base.sum()) if kind == "all" else float(c_base[self.kinds.index(kind)])
        return paired_difference_se(head_hits - both, base_hits - both, n)

    def baseline(self, name: str, kind: str = "all") -> float:
        c = self.baseline_correct[name]
        hits = float(c.sum()) if kind == "all" else float(c[self.kinds.index(kind)])
        return 100.0 * hits / max(self.count(kind), 1)


class CorefReducer(Reducer):
    """Per (layer, mention type, head) counts of anaphors whose head word's argmax is an antecedent's head word."""

    maps_only = True  # reads nothing but the maps: each forward pass may stop after the last one

    def __init__(self, windows: list[CorefWindow], n_layers: int, n_heads: int, device, kinds=KINDS):
        self.kinds = tuple(kinds)
        kid = {k: i for i, k in enumerate(self.kinds)}
        # per example: anaphor head words, type ids and antecedent head words, built once
        self.heads = [np.array([a.head for a in w.anaphors], dtype=np.int64) for w in windows]
        self.kind_ids = [np.array([kid[a.kind] for a in w.anaphors], dtype=np.int64) for w in windows]
        self.golds = [[a.antecedent_heads for a in w.anaphors] for w in windows]
        self.base_flags = [np.array([[getattr(a, b) for b in BASELINES] for a in w.anaphors], dtype=np.float64)
                           .reshape(len(w.anaphors), len(BASELINES)) for w in windows]
        # (layer, kind, [every anaphor, then each baseline's right ones], head): hits counted in one product
        self.hits = torch.zeros(n_layers, len(self.kinds), 1 + len(BASELINES), n_heads, dtype=torch.float64,
                                device=device)
        self.n = np.zeros(len(self.kinds), dtype=np.int64)  # anaphors of each kind, counted on the host
        # Kovaleva §4.5's check on the pronoun heads: each head's ±1-neighbour mass, summed over the windows' maps
        self.neighbour = torch.zeros(n_layers, n_heads, dtype=torch.float64, device=device)
        self.device = device
        self.n_windows = 0

    def start_batch(self, batch) -> None:
        ex = batch.examples
        b, w = len(ex), batch.word_mask.shape[1]
        a = max(len(self.heads[e.index]) for e in ex)
        self.batch, self.n_anaphors = batch, a
        self.n_windows += b
        self.masks = map_masks(batch)
        if a == 0:
            return
        idx = np.zeros((b, a), dtype=np.int64)
        kind = np.zeros((b, a), dtype=np.int64)
        valid = np.zeros((b, a), dtype=bool)
        gold = np.zeros((b, a, w), dtype=bool)
        base = np.zeros((b, a, 1 + len(BASELINES)), dtype=np.float64)  # column 0: every anaphor
        for i, e in enumerate(ex):
            k = len(self.heads[e.index])
            idx[i, :k], kind[i, :k], valid[i, :k] = self.heads[e.index], self.kind_ids[e.index], True
            base[i, :k, 0], base[i, :k, 1:] = 1.0, self.base_flags[e.index]
            for j, heads in enumerate(self.golds[e.index]):
                gold[i, j, list(heads)] = True
        kind_onehot = (kind[..., None] == np.arange(len(self.kinds))) & valid[..., None]  # on the host: no sync
        self.n += kind_onehot.sum((0, 1))
        to = lambda x: to_device(x, self.device)  # noqa: E731
        idx_t, self.gold, self.base, self.kind_onehot = to(idx), to(gold), to(base), to(kind_onehot.astype(np.float64))
        t = batch.word_from.shape[-1]
        self.from_rows = batch.word_from.gather(1, idx_t.unsqueeze(-1).expand(-1, -1, t))  # (B, A, T)
        self_word = idx_t.unsqueeze(-1) == torch.arange(w, device=idx_t.device)  # (B, A, W): the anaphor itself
        self.invalid = (~batch.word_mask[:, None, :] | self_word).unsqueeze(1)  # (B, 1, A, W)

    def update(self, layer: int, probs: torch.Tensor) -> None:
        self.neighbour[layer] += neighbour_mass(probs, self.masks).sum(0).double()
        if self.n_anaphors == 0:
            return
        words = (self.from_rows.unsqueeze(1) @ probs.float()) @ self.batch.word_to.unsqueeze(1)  # (B, H, A, W)
        pred = words.masked_fill(self.invalid, float("-inf")).argmax(-1)  # (B, H, A)
        hit = self.gold.unsqueeze(1).expand(-1, pred.shape[1], -1, -1).gather(-1, pred.unsqueeze(-1)).squeeze(-1)
        # counts of 0/1 in float64: exact in any order, so every anaphor and each baseline's share in one product
        self.hits[layer] += torch.einsum("bha,bak,bar->krh", hit.double(), self.kind_onehot, self.base)

    def finalize(self) -> CorefResult:
        hits = self.hits.cpu()
        return CorefResult(self.kinds, hits[:, :, 0].contiguous(), torch.from_numpy(self.n.copy()), n_windows=self.n_windows,
                           both=hits[:, :, 1:].contiguous(), neighbour=(self.neighbour / max(self.n_windows, 1)).cpu())


def baseline_counts(windows: list[CorefWindow], kinds=KINDS) -> dict[str, torch.Tensor]:
    """Correct anaphors per type for each baseline (no model)."""
    out = {name: torch.zeros(len(kinds), dtype=torch.float64) for name in BASELINES}
    for w in windows:
        for a in w.anaphors:
            for name in BASELINES:
                out[name][kinds.index(a.kind)] += float(getattr(a, name))
    return out


@family("coref", corpora=corpus_variants(), default_corpus="gum_dev")
def prepare_coref(loaded, data_dir: Path, corpus: str = "gum_dev", limit: int | None = None, batch_size: int = 32,
                  max_tokens: int = 128):
    """Clark §4.3: by default each GUM (or LitBank) document truncated to its first ``max_tokens`` pieces, as the
    paper (footnote 3); a ``_windows`` corpus variant cuts every document into windows of whole sentences instead,
    a ``_ud`` variant types mentions by UPOS with UD name heads (``bertattn_bench.data.coref_corpus.parse_corpus``).
    ``limit`` = at most that many windows. Windows without an anaphor are not run (they add nothing)."""
    from ..data.coref_corpus import (
        CORPORA,
        corpus_data_paths,
        load_documents,
        make_windows,
        parse_corpus,
        truncate_documents,
    )
    from ..engine.batching import Skipped, drop_too_long, encode_words
    from ..engine.passes import PreparedPass

    base, all_windows, typing, name_heads = parse_corpus(corpus)
    max_tokens = min(max_tokens, loaded.info.max_positions)
    docs = load_documents(data_dir, corpus)
    windows, stats = (make_windows if all_windows else truncate_documents)(docs, loaded.tokenizer, max_tokens)
    windows = [w for w in windows if w.anaphors]
    if limit is not None:
        windows = windows[:limit]
    encoded, too_long = drop_too_long([encode_words(loaded.tokenizer, i, w.words) for i, w in enumerate(windows)],
                                      max_tokens)
    if too_long.n:  # cannot happen: windows are cut by the same tokenizer
        raise AssertionError(f"{too_long.n} coreference windows exceed {max_tokens} pieces")
    kept = [windows[e.index] for e in encoded]
    skipped = Skipped(n=stats.n_skipped_sentences, max_tokens=max_tokens)  # sentences that fit in no window
    info = loaded.info
    n_docs = len({w.doc_id for w in kept})

    def finish(result: CorefResult) -> CorefResult:
        result.baseline_correct = baseline_counts(kept, result.kinds)
        result.n_documents, result.stats = n_docs, stats
        result.n_mentions = sum(w.n_mentions for w in kept)
        return result

    if base == "litbank":
        source = f"LitBank ({len(docs)} docs; CoNLL-2012 chains, heuristic head words and types"
    else:
        moved = sum(d.n_name_heads_moved for d in docs)
        source = (f"GUM {CORPORA[base]} ({len(docs)} docs; Entity= chains, UD heads"
                  + (f" with a flat name's last word as its head ({moved} mentions)" if name_heads == "last" else "")
                  + f", {'Penn XPOS' if typing == 'ptb' else 'UPOS'} mention types")
    cut = (f"windows of whole sentences <= {max_tokens} pieces, non-overlapping" if all_windows
           else f"each document truncated to its first {max_tokens} pieces")
    return PreparedPass(
        "coref", corpus, f"{source}; {cut})",
        loaded, encoded, skipped, lambda: CorefReducer(windows, info.n_layers, info.n_heads, info.device),
        finish=finish, with_words=True, batch_size=batch_size,
        data_paths=corpus_data_paths(data_dir, corpus))


# ---- claim metrics (named by reference_numbers/clark2019_coref.toml) ------------------------------------------

def _res(pr) -> CorefResult:
    res = pr.result
    if res.count() == 0:
        raise NotApplicable("no anaphor with an antecedent in its window")
    return res


def _baselines_text(res: CorefResult, kinds=TYPES) -> str:
    return "; ".join(f"{BASELINE_NAMES[b]} " + "/".join(f"{res.baseline(b, k):.1f}" for k in kinds)
                     for b in BASELINES) + " (" + "/".join(kinds) + ", n " + "/".join(
        str(res.count(k)) for k in kinds) + ")"


def _data_text(res: CorefResult) -> str:
    s = res.stats
    text = f"{res.n_documents} docs, {res.n_windows} windows, {res.n_mentions} mentions"
    if s is not None:
        text += (f" ({res.n_mentions - res.count()} first in their window); in the corpus {s.n_singletons} singleton "
                 f"and {s.n_dropped_links} appositive/predicate mentions dropped, {s.n_cut_mentions} cut by a window "
                 f"boundary, {s.n_skipped_sentences} sentences longer than a window")
    return text


def _best_text(res: CorefResult) -> str:
    layer, head, acc = res.best_head()
    per = "/".join(f"{res.head_accuracy(layer, head, k):.1f}" for k in KINDS)
    return f"best head {head_name(layer, head)} {acc:.1f}% ({'/'.join(KINDS)} {per})"


@metric("coref_best_head_gap")
def coref_best_head_gap(pr, baselines: tuple = ("head_word",), margins: tuple = (0.0,), kind: str = "all") -> Measurement:
    """min over the baselines of (best head − baseline − margin), points: >= 0 means every bar is cleared
    (Clark §4.3: head 5-4 65 vs head-word 52 vs nearest 27)."""
    res = _res(pr)
    layer, head, acc = res.best_head(kind)
    gaps = [acc - res.baseline(b, kind) - m for b, m in zip(baselines, margins)]
    bars = ", ".join(f"{BASELINE_NAMES[b]} {res.baseline(b, kind):.1f}" + (f" + {m:g}" if m else "")
                     for b, m in zip(baselines, margins))
    n = res.count(kind)
    binding = baselines[int(np.argmin(gaps))]
    se = res.paired_se(layer, head, binding, kind)
    if se is None:  # no paired counts (a result built by hand): the two accuracies taken as independent
        se = difference_se((acc, n), (res.baseline(binding, kind), n))
    return Measurement(min(gaps), n=n, n_unit="anaphors", head=head_name(layer, head), unit="points",
                       standard_error=se,
                       detail=f"{kind}: {_best_text(res)} vs {bars}; {_baselines_text(res)}; {_data_text(res)}")


@metric("coref_type_order")
def coref_type_order(pr, order: tuple = ("proper", "pronoun", "nominal")) -> Measurement:
    """The best head (on all anaphors): min of the successive differences along ``order`` (Clark Table 2: proper
    73 >= pronoun 64 >= nominal 58). Gated: the head must beat the nearest-mention baseline, else there is no
    coreference head whose types could be ordered (NotApplicable)."""
    res = _res(pr)
    layer, head, acc = res.best_head()
    if acc <= res.baseline("nearest"):
        raise NotApplicable(f"no coreference head: best head {head_name(layer, head)} {acc:.1f}% <= nearest-mention "
                            f"baseline {res.baseline('nearest'):.1f}% (n={res.count()})")
    vals = [res.head_accuracy(layer, head, k) for k in order]
    diffs = [a - b for a, b in zip(vals, vals[1:])]
    i = int(np.argmin(diffs))
    se = difference_se((vals[i], res.count(order[i])), (vals[i + 1], res.count(order[i + 1])))
    return Measurement(min(diffs), n=res.count(), n_unit="anaphors", head=head_name(layer, head), unit="points",
                       standard_error=se,
                       detail=(" >= ".join(f"{k} {v:.1f} (n={res.count(k)})" for k, v in zip(order, vals))
                               + f"; {_best_text(res)}"))


@metric("coref_baseline_rank")
def coref_baseline_rank(pr, baseline: str, rank: int) -> Measurement:
    """Mention types (all + the three) on which ``baseline`` ranks ``rank`` among the three baselines
    (1 = lowest, 3 = highest; ties count for the claimed rank). Data only (Clark Table 2: nearest < head-word <
    rule-based on every type)."""
    res = _res(pr)
    ok = []
    for k in TYPES:
        mine = res.baseline(baseline, k)
        others = [res.baseline(b, k) for b in BASELINES if b != baseline]
        below = sum(o < mine for o in others)
        above = sum(o > mine for o in others)
        ok.append(below <= rank - 1 <= len(others) - above)
    return Measurement(float(sum(ok)), n=res.count(), n_unit="anaphors", unit=f"of {len(TYPES)} types",
                       detail=(f"{BASELINE_NAMES[baseline]} rank {rank} on " + ", ".join(k for k, o in zip(TYPES, ok) if o)
                               + f"; {_baselines_text(res)}"))


@metric("coref_nominal_gap")
def coref_nominal_gap(pr, kind: str = "nominal", versus: str = "rules", string_match: str = "head_word") -> Measurement:
    """Clark §4.3 "particularly good with nominal mentions": for the best head (on all anaphors), min of
    (a) its gap to the rule-based baseline on ``kind`` minus the largest such gap on the other types and
    (b) its ``kind`` accuracy minus the head-word baseline on ``kind`` (fuzzy matching beyond string match)."""
    res = _res(pr)
    layer, head, _ = res.best_head()
    gaps = {k: res.head_accuracy(layer, head, k) - res.baseline(versus, k) for k in KINDS}
    other = max((k for k in gaps if k != kind), key=lambda k: gaps[k])
    relative = gaps[kind] - gaps[other]
    over_string = res.head_accuracy(layer, head, kind) - res.baseline(string_match, kind)
    cells = lambda k, *bases: [(res.head_accuracy(layer, head, k), res.count(k))] + [  # noqa: E731
        (res.baseline(b, k), res.count(k)) for b in bases]
    se = (difference_se(*cells(kind, versus), *cells(other, versus)) if relative <= over_string
          else difference_se(*cells(kind, string_match)))
    return Measurement(min(relative, over_string), n=res.count(kind), n_unit=f"{kind} anaphors",
                       head=head_name(layer, head), unit="points", standard_error=se, detail=(
                           f"gap to {BASELINE_NAMES[versus]}: " + ", ".join(f"{k} {v:+.1f}" for k, v in gaps.items())
                           + f"; {kind} vs {BASELINE_NAMES[string_match]} {over_string:+.1f}; {_best_text(res)}"))


def _named_head(res: CorefResult, head: str, kind: str):
    """(accuracy per head on ``kind``, layer, head) for a paper-named head; not applicable if the model lacks it."""
    layer, h = parse_head_name(head)
    acc = res.accuracy(kind)
    if layer >= acc.shape[0] or h >= acc.shape[1]:
        raise NotApplicable(f"head {head} does not exist in a {acc.shape[0]}x{acc.shape[1]} model")
    return acc, layer, h


@metric("coref_named_head")
def coref_named_head(pr, head: str, kind: str = "all") -> Measurement:
    """Rank (1 = best) of a paper-named head, e.g. Clark's 5-4, among all heads on ``kind``."""
    res = _res(pr)
    acc, layer, h = _named_head(res, head, kind)
    rank = int((acc > acc[layer, h]).sum()) + 1
    return Measurement(float(rank), n=res.count(kind), n_unit="anaphors", head=head,
                       detail=f"{head}: {acc[layer, h]:.1f}%; {_best_text(res)}")


@metric("coref_named_head_accuracy")
def coref_named_head_accuracy(pr, head: str, kind: str = "all") -> Measurement:
    """Accuracy of a paper-named head (Clark Table 2: 5-4, 65 on all anaphors), percent."""
    res = _res(pr)
    acc, layer, h = _named_head(res, head, kind)
    return Measurement(float(acc[layer, h]), n=res.count(kind), n_unit="anaphors", head=head, unit="%",
                       standard_error=binomial_se_points(float(acc[layer, h]), res.count(kind)),
                       detail=f"{_best_text(res)}; {_baselines_text(res)}")


# ---- figure (Clark Table 2 as bars) ---------------------------------------------------------------------------

@metric("coref_pronoun_heads_diagonal")
def coref_pronoun_heads_diagonal(pr, k: int = 3, kind: str = "pronoun") -> Measurement:
    """Kovaleva §4.5's noun-pronoun half, on Clark's coreference pass: the mean ±1-neighbour mass of the ``k`` heads
    that resolve the most ``kind`` anaphors (argmax on an antecedent's head word), over the median head's."""
    res = _res(pr)
    if res.neighbour is None:
        raise NotApplicable("this coreference pass has no per-head ±1-neighbour mass (an older cached result)")
    n = res.count(kind)
    if n == 0:
        raise NotApplicable(f"no {kind} anaphors in the windows")
    value, text = top_heads_neighbour_ratio(res.accuracy(kind).numpy(), res.neighbour.numpy(), k, "acc%")
    return Measurement(value, n, f"{kind} anaphors", unit="x median head",
                       detail=f"top {kind} -> antecedent heads {text}; {res.n_windows} windows")


@figure("coref")
def coref_figure(pass_results, directory: Path) -> list[Path]:
    """Accuracy by mention type: the best head (on all anaphors) against the three baselines, one PNG per pass."""
    plt = pyplot()
    paths = []
    for pr in pass_results:
        res = pr.result
        if not isinstance(res, CorefResult) or res.count() == 0:
            continue
        layer, head, _ = res.best_head()
        series = [(BASELINE_NAMES[b], [res.baseline(b, k) for k in TYPES]) for b in BASELINES]
        series.append((f"head {head_name(layer, head)}", [res.head_accuracy(layer, head, k) for k in TYPES]))
        fig, ax = plt.subplots(figsize=(5.5, 3.4))
        x = np.arange(len(TYPES))
        width = 0.8 / len(series)
        for i, (label, values) in enumerate(series):
            ax.bar(x + (i - (len(series) - 1) / 2) * width, values, width, label=label)
        ax.set_xticks(x, [f"{k}\n(n={res.count(k)})" for k in TYPES], fontsize=7)
        ax.set_ylabel("antecedent selection accuracy (%)")
        ax.set_ylim(0, 118)
        ax.set_yticks(range(0, 101, 20))
        ax.set_title(f"{pr.model.name} / {pr.corpus} ({res.n_windows} windows)", fontsize=8)
        ax.legend(fontsize=7, ncol=2)
        paths.append(save_figure(fig, directory, f"coref-{pr.model.slug}-{pr.corpus}.png"))
    return paths


__all__ = ["CorefResult", "CorefReducer", "baseline_counts", "prepare_coref", "coref_figure"]
