"""The coref family's pass (``-k coref``): the result, the reducer (antecedent selection per head on word-level
maps, the ±1-neighbour mass) and the prepare."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...claims.registry import family
from ...claims.stats import paired_difference_se
from ...data.coref_corpus import corpus_variants
from ...data.coref_documents import KINDS, CorefWindow, WindowStats
from ...engine.attention import Reducer
from ...engine.batching import to_device
from ..common.head_maps import map_masks, neighbour_mass
from .constants import BASELINES


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
    # per window (issue 61: the bootstrap over windows): the ±1 mass (N, L, H), the anaphors each head resolves of
    # each kind (N, K, L, H) and the anaphors of each kind (N, K)
    neighbour_per_window: torch.Tensor | None = None
    correct_per_window: torch.Tensor | None = None
    n_per_window: torch.Tensor | None = None

    def resample(self, idx) -> "CorefResult":
        """The per-head counts and the ±1 mass over the windows ``idx`` (with repeats: one bootstrap sample)."""
        ix = torch.as_tensor(idx)
        correct = self.correct_per_window[ix].sum(0).permute(1, 0, 2)  # (L, K, H)
        return CorefResult(self.kinds, correct, self.n_per_window[ix].sum(0), n_windows=len(ix),
                           neighbour=self.neighbour_per_window[ix].mean(0))

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
        self.per_neighbour, self.per_correct, self.per_n = [], [], []  # per window, by batch (filled in place)

    def start_batch(self, batch) -> None:
        ex = batch.examples
        b, w = len(ex), batch.word_mask.shape[1]
        a = max(len(self.heads[e.index]) for e in ex)
        self.batch, self.n_anaphors = batch, a
        self.n_windows += b
        self.masks = map_masks(batch)
        L, K, _, H = self.hits.shape
        self.b_neighbour = torch.zeros(b, L, H, dtype=torch.float32, device=self.device)
        self.b_correct = torch.zeros(b, K, L, H, dtype=torch.float32, device=self.device)
        self.per_neighbour.append(self.b_neighbour)
        self.per_correct.append(self.b_correct)
        counts = np.zeros((b, K), dtype=np.int64)
        for i, e in enumerate(ex):
            counts[i] = np.bincount(self.kind_ids[e.index], minlength=K)
        self.per_n.append(counts)
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
        nm = neighbour_mass(probs, self.masks)  # (B, H)
        self.b_neighbour[:, layer] = nm
        self.neighbour[layer] += nm.sum(0).double()
        if self.n_anaphors == 0:
            return
        words = (self.from_rows.unsqueeze(1) @ probs.float()) @ self.batch.word_to.unsqueeze(1)  # (B, H, A, W)
        pred = words.masked_fill(self.invalid, float("-inf")).argmax(-1)  # (B, H, A)
        hit = self.gold.unsqueeze(1).expand(-1, pred.shape[1], -1, -1).gather(-1, pred.unsqueeze(-1)).squeeze(-1)
        # counts of 0/1 in float64: exact in any order, so every anaphor and each baseline's share in one product
        per = torch.einsum("bha,bak,bar->bkrh", hit.double(), self.kind_onehot, self.base)
        self.hits[layer] += per.sum(0)
        self.b_correct[:, :, layer] = per[:, :, 0]  # every anaphor's column, per window

    def finalize(self) -> CorefResult:
        hits = self.hits.cpu()
        return CorefResult(self.kinds, hits[:, :, 0].contiguous(), torch.from_numpy(self.n.copy()), n_windows=self.n_windows,
                           both=hits[:, :, 1:].contiguous(), neighbour=(self.neighbour / max(self.n_windows, 1)).cpu(),
                           neighbour_per_window=torch.cat(self.per_neighbour).cpu() if self.per_neighbour else None,
                           correct_per_window=torch.cat(self.per_correct).cpu() if self.per_correct else None,
                           n_per_window=torch.from_numpy(np.concatenate(self.per_n)) if self.per_n else None)


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
    from ...data.coref_corpus import (
        CORPORA,
        corpus_data_paths,
        load_documents,
        make_windows,
        parse_corpus,
        truncate_documents,
    )
    from ...engine.batching import Skipped, drop_too_long, encode_words
    from ...engine.passes import PreparedPass

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
