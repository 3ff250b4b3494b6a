"""The norms family's two sweeps: the reducers (plain: shares in three readings, ||f(x)||, the per-token values;
masked: the mixing ratios), the masking, the frequency table, the pass and its prepare."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from ...claims.registry import family
from ...data.manifest import KOBAYASHI_RANKS
from ...data.segments import CORPORA as SEGMENT_CORPORA
from ...engine.attention import Reducer, run_reducers
from ...engine.attention_norms import RATIOS, NormsRefused, norm_reading, norm_site
from ...engine.batching import Encoded, iter_batches
from ...engine.passes import NothingToMeasure, PassResult, PreparedPass, timed
from ..common.surface_stats import FIELDS as SURFACE_FIELDS
from ..common.surface_stats import SurfaceReducer

READINGS = ("weights", "norms", "layer")  # alpha; per-head ||alpha f|| shares; layer-level ||sum_h alpha f|| shares
SHARE_FIELDS = SURFACE_FIELDS  # Clark §3.1-3.3 on each reading, by the surface family's own reducer
CATEGORIES = ("cls", "sep", "punct", "special", "other")
AFX_CATEGORIES = ("cls", "sep", "punct", "other")  # Kobayashi 2020 Fig. 2's curves (re-examine.py's four)
TOKEN_FIELDS = ("fx", "alpha", "norm_share") + RATIOS
MASK_RATE, MASK_SEED = 0.12, 0
BERT_UNCASED_CHECK = {"the": 1996, ".": 1012, ",": 1010}  # the table's ranks 1-3 (ids of bert-base-uncased)



@dataclass
class NormsResult:
    readings: dict  # reading -> SurfaceResult (stats of SHARE_FIELDS; per segment for the bootstrap)
    fx: dict  # category -> (L, H) mean ||f(x)|| over the category's key tokens
    # category -> (L, H): the raw ||alpha f|| a query gives the category's keys (summed over them), mean over the
    # segment's queries, then over segments: the authors' own quantity (re-examine.py, "afx"), not a share
    afx: dict
    alpha_fx_r: torch.Tensor  # (L, H) Pearson r between the mean alpha a key receives and its ||f^h(x)||
    tokens: dict  # TOKEN_FIELDS -> (N,) per real token occurrence (plain sweep), layer means
    token_ids: torch.Tensor  # (N,)
    token_special: torch.Tensor  # (N,) bool: [CLS] / [SEP] (the tokenizer's special tokens)
    ranks: torch.Tensor | None  # (N,) frequency rank (1 = most frequent), None where the table does not apply
    rank_note: str  # why ``ranks`` is None, or the table used
    mixing_mean: dict  # ratio -> mean over every real (token, layer) of the masked sweep
    mixing_max: dict
    mixing_min: dict
    mixing_per_layer: dict  # ratio -> (L,) mean per layer
    n_masked: int  # pieces replaced by the mask token
    residual_note: str = ""  # why AttnRes-N / AttnResLn-N are missing ("" when present)
    n_segments: int = 0
    n_tokens: int = 0
    # per segment, for the claims' bootstrap over segments (issue 61; never a map): the plain sweep's ||f(x)|| sums
    # (n_seg, C, L, H) and key counts (n_seg, C) per category, its alpha-||f(x)|| moments (n_seg, 6, L, H), each
    # token occurrence's segment (N,); the masked sweep's ratio sums over (token, layer) and real tokens per segment
    fx_per_segment: torch.Tensor | None = None
    fx_n_per_segment: torch.Tensor | None = None
    moments_per_segment: torch.Tensor | None = None
    token_segment: torch.Tensor | None = None
    mixing_per_segment: dict | None = None  # ratio -> (n_seg,)
    mixing_n_per_segment: torch.Tensor | None = None  # (n_seg,)

    def resample(self, idx) -> SimpleNamespace:
        """The result over the segments ``idx`` (with repeats: one bootstrap sample) as the segment-level metrics read
        it (``common.surface_stats.resampled_bounds``): both share readings, ||f(x)|| per category, the
        alpha-||f(x)|| correlations and the masked sweep's mean mixing ratios (the same segments, masked), each from
        its per-segment sums."""
        ix = torch.from_numpy(np.asarray(idx))
        out = SimpleNamespace(readings={k: r.resample(ix) for k, r in self.readings.items() if r.per_segment is not None},
                              n_segments=len(ix))
        if self.fx_per_segment is None:  # a result with the readings' per-segment statistics only
            return out
        fx_n = self.fx_n_per_segment[ix].sum(0).clamp_min(1)  # (C,)
        fx_sum = self.fx_per_segment[ix].double().sum(0)  # (C, L, H)
        n_tok = float(self.mixing_n_per_segment[ix].sum()) if self.mixing_n_per_segment is not None else 0.0
        L = fx_sum.shape[1]
        out.__dict__.update(
            fx={c: (fx_sum[i] / fx_n[i]).float() for i, c in enumerate(CATEGORIES)},
            alpha_fx_r=pearson_from_moments(self.moments_per_segment[ix].sum(0)).float(),
            mixing_mean={k: float(v[ix].sum()) / max(n_tok * L, 1) for k, v in (self.mixing_per_segment or {}).items()},
            mixing_max=self.mixing_max, mixing_min=self.mixing_min, n_masked=self.n_masked,
            residual_note=self.residual_note, n_tokens=self.n_tokens)
        return out


def pearson_from_moments(moments: torch.Tensor) -> torch.Tensor:
    """Pearson r per (layer, head) from the summed moments (n, a, f, a², f², af) on the first axis."""
    n, sa, sf, saa, sff, saf = moments
    cov = saf / n - (sa / n) * (sf / n)
    return cov / torch.sqrt((saa / n - (sa / n) ** 2).clamp_min(0) * (sff / n - (sf / n) ** 2).clamp_min(0))


class NormsReducer(Reducer):
    """The plain sweep's statistics, accumulated on the model's device from :class:`engine.norms.NormReader`."""

    # reads the maps and, through its reader, each layer's value projection (its hook fires before the layer's map)
    # and the layer's own weights: nothing the model computes after the last map, so the pass may stop there
    maps_only = True

    def __init__(self, reader, n_layers: int, n_heads: int, device, special_ids):
        self.reader, self.n_layers, self.dev = reader, n_layers, device
        self.special_ids = torch.tensor(sorted(special_ids), device=device)
        # Clark §3.1-3.3 on each reading: the surface family's reducer, fed the reading's distribution per query row
        # (alpha, or ||alpha f|| normalised per row; a padded key holds 0 in every reading); the layer-level
        # reading has one "head" per layer
        self.shares = {r: SurfaceReducer(n_layers, 1 if r == "layer" else n_heads, device) for r in READINGS}
        # per category (CATEGORIES / AFX_CATEGORIES order), all categories in one product per layer (issue 47)
        self.fx_sum = torch.zeros(len(CATEGORIES), n_layers, n_heads, dtype=torch.float64, device=device)
        self.fx_n = torch.zeros(len(CATEGORIES), dtype=torch.float64, device=device)
        self.afx_sum = torch.zeros(len(AFX_CATEGORIES), n_layers, n_heads, dtype=torch.float64, device=device)
        self.n_seg = 0
        self.moments = torch.zeros(6, n_layers, n_heads, dtype=torch.float64, device=device)  # n a f a2 f2 af
        self.tokens = {k: [] for k in TOKEN_FIELDS}
        self.ids, self.special = [], []
        self.seg_fx, self.seg_fx_n, self.seg_mom, self.seg_of = [], [], [], []

    def start_batch(self, batch) -> None:
        self.batch = batch
        mask = batch.token_mask
        special = batch.is_cls | batch.is_sep | batch.is_punct
        masks = None
        for shares in self.shares.values():  # one set of masks for the three readings
            masks = shares.start_batch(batch, masks)
        cats = {"cls": batch.is_cls, "sep": batch.is_sep, "punct": batch.is_punct, "special": special,
                "other": mask & ~special}
        self.cat_keys = torch.stack([cats[c] for c in CATEGORIES]).float()  # (C, B, K)
        self.cat_n = self.cat_keys.sum((1, 2)).double() / self.n_layers  # every layer counts the same tokens
        self.afx_keys = torch.stack([cats[c] for c in AFX_CATEGORIES], -1).float()  # (B, K, C')
        self.qmask = mask.float()
        self.nq = self.qmask.sum(-1).clamp(min=1)
        self.n_seg += mask.shape[0]
        self.acc = {k: torch.zeros(mask.shape, dtype=torch.float32, device=mask.device) for k in TOKEN_FIELDS}
        B, C, (L, H) = mask.shape[0], len(CATEGORIES), self.fx_sum.shape[1:]
        self.b_fx = torch.zeros(B, C, L, H, dtype=torch.float64, device=mask.device)
        self.b_mom = torch.zeros(B, 6, L, H, dtype=torch.float64, device=mask.device)

    def update(self, layer: int, probs: torch.Tensor) -> None:
        ln = self.reader.layer(layer, probs)
        p = probs.float()
        share = ln.head / ln.head.sum(-1, keepdim=True).clamp_min(1e-30)
        layer_share = (ln.summed / ln.summed.sum(-1, keepdim=True).clamp_min(1e-30))[:, None]
        for name, r in zip(READINGS, (p, share, layer_share)):
            self.shares[name].update(layer, r)
        # the raw ||alpha f|| a query gives each category's keys, mean over the segment's real queries, summed
        to = torch.einsum("bhqk,bkc->bhqc", ln.head.float(), self.afx_keys)  # (B, H, Q, C')
        per_segment = torch.einsum("bhqc,bq->bhc", to, self.qmask) / self.nq[:, None, None]
        self.afx_sum[:, layer] += per_segment.sum(0).T.double()
        per_fx = torch.einsum("bhk,cbk->bch", ln.fx, self.cat_keys).double()  # per segment, for the bootstrap
        self.b_fx[:, :, layer] = per_fx
        self.fx_sum[:, layer] += per_fx.sum(0)
        self.fx_n += self.cat_n
        received = torch.einsum("bhqk,bq->bhk", p, self.qmask) / self.nq[:, None, None]  # (B, H, K)
        got_share = torch.einsum("bhqk,bq->bhk", share, self.qmask) / self.nq[:, None, None]
        w = self.qmask[:, None, :]
        a, f = received.double(), ln.fx.double()
        per_mom = (torch.stack((torch.ones_like(a), a, f, a * a, f * f, a * f)) * w).sum(3)  # (6, B, H)
        self.b_mom[:, :, layer] = per_mom.transpose(0, 1)
        self.moments[:, layer] += per_mom.sum(1)
        self.acc["fx"] += ln.fx.mean(1)
        self.acc["alpha"] += received.mean(1)
        self.acc["norm_share"] += got_share.mean(1)
        for k, v in ln.ratios.items():
            self.acc[k] += v

    def end_batch(self, hidden_states=None) -> None:
        real = self.batch.real  # x[token_mask] without a host wait (issue 47)
        for k, v in self.acc.items():
            self.tokens[k].append(real(v / self.n_layers))
        ids = real(self.batch.input_ids)
        self.ids.append(ids)
        self.special.append(torch.isin(ids, self.special_ids))
        mask = self.batch.token_mask
        first = self.n_seg - mask.shape[0]
        self.seg_of.append(real(torch.arange(first, self.n_seg, device=mask.device)[:, None].expand(mask.shape)))
        self.seg_fx.append(self.b_fx.float())
        self.seg_fx_n.append(self.cat_keys.sum(2).T.double())  # (B, C) key tokens per category
        self.seg_mom.append(self.b_mom)

    def finalize(self) -> dict:
        r = pearson_from_moments(self.moments)
        return dict(
            readings={k: s.finalize() for k, s in self.shares.items()},
            fx={c: (self.fx_sum[i] / self.fx_n[i].clamp_min(1)).float().cpu() for i, c in enumerate(CATEGORIES)},
            afx={c: (self.afx_sum[i] / max(self.n_seg, 1)).float().cpu() for i, c in enumerate(AFX_CATEGORIES)},
            alpha_fx_r=r.float().cpu(),
            tokens={k: torch.cat(v).cpu() for k, v in self.tokens.items() if v and len(torch.cat(v)) == len(torch.cat(self.ids))},
            token_ids=torch.cat(self.ids).cpu(), token_special=torch.cat(self.special).cpu(), n_segments=self.n_seg,
            fx_per_segment=torch.cat(self.seg_fx).cpu(), fx_n_per_segment=torch.cat(self.seg_fx_n).cpu(),
            moments_per_segment=torch.cat(self.seg_mom).cpu(), token_segment=torch.cat(self.seg_of).cpu())


class MixingReducer(Reducer):
    """The masked sweep: the mixing ratios of every real (token, layer), pooled (mean, max, min) and per layer."""

    maps_only = True  # as NormsReducer: the value projection's hook fires before the map; the rest is recomputed

    def __init__(self, reader, n_layers: int, device):
        self.reader = reader
        R = len(RATIOS)  # every ratio in one (…, R) tensor: a handful of kernels per layer, not five of each
        self.sum = torch.zeros(R, n_layers, dtype=torch.float64, device=device)
        self.max = torch.full((R,), -1.0, dtype=torch.float64, device=device)  # -1: a ratio the model never gave
        self.min = torch.full((R,), 2.0, dtype=torch.float64, device=device)
        self.n = torch.zeros((), dtype=torch.float64, device=device)
        self.seg_sum, self.seg_n = [], []  # per segment, for the bootstrap
        self.cols: list[int] | None = None  # the ratios the reader gives (all but the residual ones, where refused)

    def start_batch(self, batch) -> None:
        self.batch = batch
        self.n += batch.token_mask.sum()
        self.b_sum = torch.zeros(batch.token_mask.shape[0], len(RATIOS), dtype=torch.float64, device=self.n.device)

    def update(self, layer: int, probs: torch.Tensor) -> None:
        ratios = self.reader.ratios(layer, probs)  # the per-pair norms are not needed here
        if self.cols is None:
            self.cols = [i for i, k in enumerate(RATIOS) if k in ratios]
        cols = self.cols
        v = torch.stack([ratios[RATIOS[i]] for i in cols], -1).double()  # (B, T, R')
        x = self.batch.real(v)  # v[token_mask], (N, R'), without a host wait (issue 47)
        self.sum[cols, layer] += x.sum(0)
        self.b_sum[:, cols] += v.masked_fill(~self.batch.token_mask[..., None], 0).sum(1)
        self.max[cols] = torch.maximum(self.max[cols], x.max(0).values)
        self.min[cols] = torch.minimum(self.min[cols], x.min(0).values)

    def end_batch(self, hidden_states=None) -> None:
        self.seg_sum.append(self.b_sum)
        self.seg_n.append(self.batch.token_mask.sum(-1).double())

    def finalize(self) -> dict:
        n, L = float(self.n), self.sum.shape[1]
        have = [(i, k) for i, k in enumerate(RATIOS) if float(self.max[i]) >= 0]
        per_segment = torch.cat(self.seg_sum).cpu() if self.seg_n else None
        return dict(mixing_mean={k: float(self.sum[i].sum()) / max(n * L, 1) for i, k in have},
                    mixing_max={k: float(self.max[i]) for i, k in have},
                    mixing_min={k: float(self.min[i]) for i, k in have},
                    mixing_per_layer={k: (self.sum[i] / max(n, 1)).float().cpu() for i, k in have},
                    mixing_per_segment={k: per_segment[:, i] for i, k in have} if per_segment is not None else None,
                    mixing_n_per_segment=torch.cat(self.seg_n).cpu() if self.seg_n else None)


def mask_segments(encoded: list[Encoded], special_ids, mask_id: int, rate: float = MASK_RATE,
                  seed: int = MASK_SEED) -> tuple[list[Encoded], int]:
    """Each segment with ``max(1, int(rate * n))`` of its n non-special pieces replaced by ``mask_id`` (the authors'
    random.sample from one ``random.Random(seed)``, segment by segment in data order); and how many were replaced."""
    rng, out, total = random.Random(seed), [], 0
    special = set(special_ids)
    for e in encoded:
        cand = [i for i, t in enumerate(e.input_ids) if t not in special]
        ids = list(e.input_ids)
        if cand:
            for pos in rng.sample(cand, max(1, int(len(cand) * rate))):
                ids[pos] = mask_id
                total += 1
        out.append(Encoded(e.index, ids, list(e.token_type_ids), list(e.word_index), e.n_words))
    return out, total


def read_ranks(path: Path, vocab_size: int) -> tuple[torch.Tensor, int]:
    """The frequency rank of every vocabulary id (``RANK COUNT ID`` lines); unlisted ids the bottom rank (the
    table's last + 1, as the authors' relation_with_freq.py). Bad lines raise a DataError naming file and line."""
    from ...base.errors import DataError

    ranks = np.full(vocab_size, -1, dtype=np.int64)  # filled on the host: 29k lines, not 29k tensor writes
    last = 0
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            try:
                rank, _count, tid = (int(x) for x in parts)
            except ValueError:
                raise DataError(f"{path}:{n}: expected 'RANK COUNT TOKEN_ID', got {line.strip()[:60]!r}") from None
            if 0 <= tid < vocab_size:
                ranks[tid] = rank
            last = max(last, rank)
    if last == 0:
        raise DataError(f"{path}: no ranks")
    ranks[ranks < 0] = last + 1
    return torch.from_numpy(ranks), last


@dataclass
class NormsPass(PreparedPass):
    """The two sweeps (plain, masked) under one timer; a refused model measures nothing and says why."""

    masked: list = field(default_factory=list)
    n_masked: int = 0
    refused: str = ""
    rank_path: str = ""

    def nothing_to_measure(self) -> str | None:
        return self.refused or None

    def run(self, progress: bool = False) -> PassResult:
        info, tok = self.loaded.info, self.loaded.tokenizer
        if self.refused:
            return PassResult(self.family, self.corpus, self.data, info, NothingToMeasure(self.refused), 0,
                              self.skipped)
        dev = torch.device(info.device)
        model = self.loaded.model
        self.warm_up(dev)
        ns = norm_site(model)

        def sweeps():
            with norm_reading(model) as reader:
                plain = NormsReducer(reader, info.n_layers, info.n_heads, info.device, tok.all_special_ids)
                (a,) = run_reducers(model, iter_batches(self.encoded, tok, dev, self.batch_size), [plain],
                                    progress=progress, desc=f"{self.family}:{self.corpus}")
                mixing = MixingReducer(reader, info.n_layers, info.device)
                (b,) = run_reducers(model, iter_batches(self.masked, tok, dev, self.batch_size), [mixing],
                                    progress=progress, desc=f"{self.family}:{self.corpus}+mask")
            return a, b

        (plain, mixing), seconds = timed(dev, sweeps)
        ranks, note = None, ""
        wrong = {t: i for t, i in BERT_UNCASED_CHECK.items() if tok.convert_tokens_to_ids(t) != i}
        if wrong:
            note = (f"the frequency table ({KOBAYASHI_RANKS}) is in bert-base-uncased's ids; this tokenizer differs "
                    f"({', '.join(f'{t!r} is {tok.convert_tokens_to_ids(t)}, not {i}' for t, i in wrong.items())})")
        else:
            table, last = read_ranks(Path(self.rank_path), max(len(tok), int(plain["token_ids"].max()) + 1))
            ranks = table[plain["token_ids"]]
            note = f"{KOBAYASHI_RANKS}: {last} ranked ids, unlisted ids rank {last + 1}"
        result = NormsResult(**plain, ranks=ranks, rank_note=note, **mixing, n_masked=self.n_masked,
                             residual_note=ns.no_residual_reason, n_tokens=int(len(plain["token_ids"])))
        return PassResult(self.family, self.corpus, self.data, info, result, len(self.encoded), self.skipped, seconds)


@family("norms", corpora=tuple(SEGMENT_CORPORA), default_corpus="wikitext2_types01", quick_limit=300)
def prepare_norms(loaded, data_dir: Path, corpus: str = "wikitext2_types01", max_tokens: int = 128,
                  limit: int | None = None, batch_size: int = 32) -> NormsPass:
    """Kobayashi et al. 2020/2021 on Clark's segments (see the module doc); a model whose attention output cannot be
    split into alpha f(x) from its own modules is refused with the reason (:mod:`bertattn_bench.engine.attention_norms`)."""
    from ...base.settings import data_file
    from ...data.segments import load_segment_set
    from ...engine.batching import Skipped

    paths = [data_dir / SEGMENT_CORPORA[corpus], data_dir / KOBAYASHI_RANKS]
    info, tok = loaded.info, loaded.tokenizer
    try:
        norm_site(loaded.model)
    except NormsRefused as exc:
        return NormsPass("norms", corpus, SEGMENT_CORPORA[corpus], loaded, [], Skipped(), lambda: None,
                         data_paths=paths, refused=str(exc))
    rank_path = data_file(data_dir, KOBAYASHI_RANKS)
    segs = load_segment_set(data_dir, corpus, tok, min(max_tokens, info.max_positions), limit)
    if tok.mask_token_id is None:
        masked, n_masked = segs.encoded, 0
    else:
        masked, n_masked = mask_segments(segs.encoded, tok.all_special_ids, tok.mask_token_id)
    return NormsPass("norms", corpus, f"{segs.description}; the 2021 sweep {MASK_RATE:.0%} masked, seed {MASK_SEED}",
                     loaded, segs.encoded, segs.skipped, lambda: None, batch_size=batch_size, data_paths=paths,
                     masked=masked, n_masked=n_masked, rank_path=str(rank_path))
