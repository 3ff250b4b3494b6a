"""Voita et al. 2019, "Analyzing Multi-Head Self-Attention: Specialized Heads Do the Heavy Lifting": head roles.

One pass over UD sentences (EWT dev by default) reads every head's role:

* confidence: the mean over query pieces of the head's largest attention weight. Voita exclude EOS; here the end
  token ([SEP] / ``</s>``, the batch's ``is_sep`` mask) is no query (the authors' code at efaa0dd computes no
  confidence: ``notebooks/2_Look_at_attention_maps.ipynb`` only draws maps, their ticks end in ``<eos>``; the rule
  is the paper's, as printed per issue 64). Padding is never a query or a key.
* positional: the share of those queries whose argmax key is the piece at offset +1, and at -1 (and, reported
  beside, at 0: the query itself, where a random-init map leans: issue 64's trap) (Voita: a
  positional head points to ±1 at least 90% of the time; all of theirs have confidence above 0.8).
* syntactic: per relation and direction (Voita Table 1: nsubj, dobj, amod, advmod, both directions), the best head's
  accuracy minus the offset baseline, from the dependency statistics the dependency family computes
  (:class:`.common.dependency_stats.DependencyReducer`, run inside this reducer on the same maps).
* rare words: per sentence, the word the head attends to most (its word-level map summed over the query words,
  per piece of the attended word: a plain sum favours words of many pieces, which rare words are) and
  whether it is one of the sentence's least frequent words, by lower-cased word counts of WikiText-2 (the test split
  the data folder holds: ``wikitext2_raw/wiki.test.raw``, counted at run time by :func:`word_counts`; Voita count
  tokens of their NMT training data). Ties at the minimum (often several unseen words) all count; the chance rate
  (a uniformly chosen word being one of them) is the baseline.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from ..base.plotting import save_figure
from ..claims.registry import Measurement, NotApplicable, family, figure, metric
from ..claims.stats import binomial_se_points, difference_se, wilson_counts
from ..engine.attention import Reducer, head_name
from ..engine.batching import drop_too_long, encode_words, to_device
from ..engine.passes import PreparedPass
from .common.dependency_stats import DependencyReducer, DependencyResult, offset_baselines, sd_arcs

FREQUENCY_FILE = "wikitext2_raw/wiki.test.raw"
POSITIONAL_SHARE, POSITIONAL_CONFIDENCE = 90.0, 0.8  # Voita, as printed per issue 64


@lru_cache(maxsize=4)
def word_counts(path: str) -> Counter:
    """Lower-cased whitespace-token counts of a text file (WikiText-2 raw: its tokens are space-separated)."""
    with open(path, encoding="utf-8") as f:
        return Counter(tok.lower() for line in f for tok in line.split())


def rarest_mask(words: list[str], counts: Counter) -> np.ndarray:
    """Which words have the sentence's lowest count (ties all True)."""
    c = np.array([counts.get(w.lower(), 0) for w in words])
    return c == c.min()


@dataclass
class RolesResult:
    confidence: torch.Tensor  # (L, H): mean max weight over the query pieces (end token excluded)
    offset_share: torch.Tensor  # (3, L, H): percent of those queries whose argmax is at +1, -1, 0 (itself)
    n_queries: int
    rare_hits: torch.Tensor  # (L, H): sentences whose most attended word is one of the rarest
    rare_chance: float  # percent: mean over sentences of (rarest words / words)
    n_sentences: int
    dependency: DependencyResult


class RolesReducer(Reducer):
    maps_only = True

    def __init__(self, arcs, rarest: list[np.ndarray], n_layers: int, n_heads: int, device):
        self.dep = DependencyReducer(arcs, n_layers, n_heads, device)
        self.rarest = rarest
        self.n_layers, self.n_heads, self.device = n_layers, n_heads, device
        self.conf = torch.zeros(n_layers, n_heads, dtype=torch.float64, device=device)
        self.offset = torch.zeros(3, n_layers, n_heads, dtype=torch.float64, device=device)
        self.rare = torch.zeros(n_layers, n_heads, dtype=torch.float64, device=device)
        self.queries_seen = torch.zeros((), dtype=torch.float64, device=device)  # read once, at the end (no sync)
        self.n_sentences, self.chance_sum = 0, 0.0

    def start_batch(self, batch) -> None:
        self.dep.start_batch(batch)
        b_n, w = batch.word_mask.shape
        self.queries = (batch.token_mask & ~batch.is_sep).float()  # (B, T): no padding, no end token
        self.queries_seen += self.queries.sum()
        pos = torch.arange(batch.input_ids.shape[1], device=self.device)
        self.want = torch.stack([pos + 1, pos - 1, pos])  # (3, T): the keys at offset +1, -1 and 0
        rare = np.zeros((b_n, w), dtype=bool)
        for i, ex in enumerate(batch.examples):
            rare[i, :ex.n_words] = self.rarest[ex.index]
            self.chance_sum += 100.0 * rare[i].sum() / ex.n_words
        self.rare_mask = to_device(rare, self.device)
        self.n_sentences += b_n
        self.word_weight = batch.word_from.sum(1, keepdim=True)  # (B, 1, T): 1 on a word's pieces, 0 elsewhere
        self.word_to, self.word_mask = batch.word_to, batch.word_mask
        self.pieces = batch.word_to.sum(1).clamp(min=1).unsqueeze(1)  # (B, 1, W): pieces per word

    def update(self, layer: int, probs: torch.Tensor) -> None:
        self.dep.update(layer, probs)
        top, arg = probs.float().max(-1)  # (B, H, T): padded keys are 0 and a real key always carries weight
        q = self.queries.unsqueeze(1)
        self.conf[layer] += (top * q).sum((0, 2)).double()
        at = (arg.unsqueeze(0) == self.want.view(3, 1, 1, -1)).float() * q  # (3, B, H, T)
        self.offset[:, layer] += at.sum((1, 3)).double()
        # the attention each word receives from the query words, per piece of it: a sum over its pieces would favour
        # words of many pieces, and rare words are split into more pieces (the random-init twin showed it)
        column = (self.word_weight.unsqueeze(1) @ probs.float()).squeeze(2) @ self.word_to / self.pieces  # (B, H, W)
        most = column.masked_fill(~self.word_mask.unsqueeze(1), float("-inf")).argmax(-1)  # (B, H)
        self.rare[layer] += self.rare_mask.gather(1, most).double().sum(0)

    def end_batch(self, hidden_states=None) -> None:
        self.dep.end_batch(hidden_states)

    def finalize(self) -> RolesResult:
        n_queries = int(self.queries_seen)
        n = max(n_queries, 1)
        return RolesResult((self.conf / n).float().cpu(), (100.0 * self.offset / n).float().cpu(), n_queries,
                           self.rare.cpu(), self.chance_sum / max(self.n_sentences, 1), self.n_sentences,
                           self.dep.finalize())


# ---- claim metrics (named by reference_numbers/voita2019_roles.toml) --------------------------------------------

def positional_heads(res: RolesResult, share: float = POSITIONAL_SHARE) -> list[tuple[int, int, int]]:
    """(layer, head, offset index 0 = +1 / 1 = -1) of every head pointing to ±1 at least ``share`` % of the time."""
    best, which = res.offset_share[:2].max(0)
    return [(int(li), int(hi), int(which[li, hi])) for li, hi in (best >= share).nonzero().tolist()]


@metric("role_positional_count")
def role_positional_count(pr, share: float = POSITIONAL_SHARE) -> Measurement:
    """How many heads point to the piece at +1 or -1 for at least ``share`` % of their queries (Voita)."""
    res: RolesResult = pr.result
    found = positional_heads(res, share)
    best, _ = res.offset_share[:2].max(0)
    flat = int(torch.argmax(best))
    layer, head = divmod(flat, best.shape[1])
    diagonal = res.offset_share[2]  # the random-init twin's trap (issue 64): a map leaning on the token itself
    d_layer, d_head = divmod(int(torch.argmax(diagonal)), diagonal.shape[1])
    names = ", ".join(f"{head_name(li, hi)} ({'+1' if o == 0 else '-1'} {float(res.offset_share[o, li, hi]):.1f}%, "
                      f"conf {float(res.confidence[li, hi]):.2f})" for li, hi, o in found)
    # bounds (issue 61): a head is surely positional where Wilson's 95% lower bound on its share of the queries is
    # >= share, possibly where the upper bound is (the queries of a sentence taken as independent: this errs narrow)
    sure, maybe = wilson_counts([round(float(x) * res.n_queries / 100) for x in best.flatten().tolist()],
                                res.n_queries, share)
    return Measurement(float(len(found)), n=res.n_queries, n_unit="query pieces", unit="heads",
                       head=head_name(layer, head), bounds=(float(sure), float(maybe)),
                       detail=f"{names or 'none'}; the most positional head {head_name(layer, head)} "
                              f"{float(best[layer, head]):.1f}% at ±1; itself (offset 0): "
                              f"{head_name(d_layer, d_head)} {float(diagonal[d_layer, d_head]):.1f}% at most, "
                              f"{int((diagonal >= share).sum())} heads >= {share:g}%; Wilson bounds on each head's "
                              f"share: {sure} surely, {maybe} possibly positional")


@metric("role_positional_confidence")
def role_positional_confidence(pr, share: float = POSITIONAL_SHARE) -> Measurement:
    """The lowest confidence among the positional heads (Voita: all above 0.8)."""
    res: RolesResult = pr.result
    found = positional_heads(res, share)
    if not found:
        raise NotApplicable(f"no head points to ±1 for {share:g}% of its queries")
    conf = [(float(res.confidence[li, hi]), li, hi) for li, hi, _ in found]
    low, li, hi = min(conf)
    # SE (issue 61): a mean of weights in [0, 1] has variance <= mu (1 - mu) (Bhatia & Davis 2000), so
    # sqrt(mu (1 - mu) / n) bounds its standard error from the mean alone
    se = math.sqrt(max(low * (1 - low), 0.0) / max(res.n_queries, 1))
    return Measurement(low, n=res.n_queries, n_unit="query pieces", unit="mean max weight", head=head_name(li, hi),
                       standard_error=se,
                       detail=f"{len(found)} positional heads, confidence {min(conf)[0]:.3f}..{max(conf)[0]:.3f}; SE "
                              f"<= {se:.3g} (Bhatia-Davis: a mean of weights in [0, 1])")


@metric("role_syntactic_gap")
def role_syntactic_gap(pr, relation: str, direction: int) -> Measurement:
    """The best head in one direction (0 dependent→head, 1 head→dependent) minus the relation's offset baseline."""
    dep: DependencyResult = pr.result.dependency
    if relation not in dep.baselines:
        raise NotApplicable(f"no {relation!r} arc in the data read")
    best, base = dep.best_head(relation, direction), dep.baselines[relation]
    return Measurement(best.accuracy - base.accuracy, n=best.n, n_unit="arcs", head=best.name, unit="points",
                       standard_error=difference_se((best.accuracy, best.n), (base.accuracy, base.n)),
                       detail=f"best {best.describe()} vs offset ({base.offset:+d}) {base.accuracy:.1f}%")


@metric("role_rare_word_gap")
def role_rare_word_gap(pr, layer: int = 0) -> Measurement:
    """The best head of ``layer`` (0 = the first): percent of sentences whose most attended word is one of the
    rarest, minus the chance rate, in points (binomial SE of the head's share; the chance rate is fixed)."""
    res: RolesResult = pr.result
    share = 100.0 * res.rare_hits[layer] / max(res.n_sentences, 1)
    head = int(torch.argmax(share))
    value = float(share[head])
    return Measurement(value - res.rare_chance, n=res.n_sentences, n_unit="sentences", head=head_name(layer, head),
                       unit="points", standard_error=binomial_se_points(value, res.n_sentences),
                       detail=f"{head_name(layer, head)} points to a rarest word in {value:.1f}% of sentences, "
                              f"chance {res.rare_chance:.1f}%; best of all layers "
                              f"{float(100.0 * res.rare_hits.max() / max(res.n_sentences, 1)):.1f}%")


# ---- the pass ---------------------------------------------------------------------------------------------------

@family("roles", corpora=("ewt_dev", "gum_dev", "pud_test"), default_corpus="ewt_dev", quick_limit=200)
def prepare_roles(loaded, data_dir: Path, corpus: str = "ewt_dev", limit: int | None = None,
                  batch_size: int = 32) -> PreparedPass:
    from ..base.settings import data_file
    from ..data.ud import CORPORA, load_corpus

    sentences = load_corpus(data_dir, corpus, limit)
    encoded, skipped = drop_too_long([encode_words(loaded.tokenizer, i, s.words) for i, s in enumerate(sentences)],
                                     loaded.info.max_positions)
    counts = word_counts(str(data_file(data_dir, FREQUENCY_FILE)))
    rarest = [rarest_mask(s.words, counts) for s in sentences]
    arcs = [sd_arcs(s) for s in sentences]
    info = loaded.info

    def finish(result):
        result.dependency.baselines = offset_baselines([arcs[e.index] for e in encoded])
        return result

    return PreparedPass("roles", corpus, f"{CORPORA[corpus]} (UD trees mapped to SD; WikiText-2 word counts)", loaded,
                        encoded, skipped, lambda: RolesReducer(arcs, rarest, info.n_layers, info.n_heads, info.device),
                        finish=finish, with_words=True, batch_size=batch_size,
                        data_paths=[data_dir / CORPORA[corpus], data_dir / FREQUENCY_FILE])


# ---- figure -----------------------------------------------------------------------------------------------------

@figure("roles", result=RolesResult, each=True)
def roles_figure(pr, plt, directory: Path) -> list[Path]:
    """The head-role map (issue 64): confidence, the ±1 share (positional heads boxed) and the rare-word share per
    head, the best head of each of Voita's relation-directions marked S on the confidence panel."""
    res = pr.result
    if not res.n_sentences:
        return []
    rare = 100.0 * res.rare_hits / res.n_sentences
    panels = (("confidence (mean max weight)", res.confidence, 0, 1),
              ("% of queries → ±1 (boxed: >= 90%)", res.offset_share[:2].max(0).values, 0, 100),
              (f"% sentences → a rarest word (chance {res.rare_chance:.0f}%)", rare, 0, 100))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, (title, values, lo, hi) in zip(axes, panels):
        im = ax.imshow(values.numpy(), cmap="viridis", aspect="auto", vmin=lo, vmax=hi)
        ax.set_xticks(range(values.shape[1]), [str(h + 1) for h in range(values.shape[1])], fontsize=6)
        ax.set_yticks(range(values.shape[0]), [str(l + 1) for l in range(values.shape[0])], fontsize=6)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(title, fontsize=8)
        fig.colorbar(im, ax=ax, fraction=0.046)
    for li, hi, _ in positional_heads(res):
        axes[1].add_patch(plt.Rectangle((hi - 0.5, li - 0.5), 1, 1, fill=False, ec="red", lw=1.5))
    dep = res.dependency
    for relation in ("nsubj", "dobj", "amod", "advmod"):
        if relation in dep.baselines:
            for direction in (0, 1):
                best = dep.best_head(relation, direction)
                axes[0].text(best.head, best.layer, "S", ha="center", va="center", color="red", fontsize=7)
    fig.suptitle(f"{pr.model.name} / {pr.corpus}: head roles (Voita et al. 2019; S: best head of a Table 1 "
                 f"relation and direction; n = {res.n_sentences} sentences)", fontsize=9)
    return [save_figure(fig, directory, f"roles-{pr.model.slug}-{pr.corpus}.png")]
