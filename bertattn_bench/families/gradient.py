"""Clark et al. §3.2, Fig. 3: gradient-based importance of attention to [SEP], '.'/',' and other tokens.

The statistic is the mean of |∂L_MLM/∂α_ij| per layer, split by the class of the attended token j, where L_MLM is
BERT's masked-LM loss on 15% of the word pieces of each §3 segment ``[CLS] A [SEP] B [SEP]`` (chosen with a fixed
seed per segment, every chosen piece replaced by [MASK]; Clark do not state their masking, BERT's 80/10/10 rule
is not used so that the loss is deterministic). A segment's loss is the mean over its masked pieces, and a batch
differentiates the *sum* of its segments' losses, so every gradient is the segment's own (batch-independent).

∂L/∂α is taken with respect to the probabilities as the model uses them: the attention function adds a zero
tensor that requires grad (``edit_probs``), so the gradient includes every path, also through later layers'
attention (detaching the probabilities would keep only the value path; the unit test checks against finite
differences). Statistics are reduced batch by batch on the model's device; padding never enters them.

The pass needs an MLM head with trained weights. A checkpoint without one (the embedded MiniLM) gives a pass
result :class:`NoMLMHead` and every claim of the family is skipped; transformers would silently initialise a
random head, so the checkpoint's tensors are checked first. A random-init twin gets a random head like the rest
of its weights (the negative control).
"""
from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..engine.attention import SEAM, attention_run, seam_reason
from ..engine.attention import site as attention_site

EDITS = "the attention-gradient pass edits the attention probabilities:"
from ..base.plotting import pyplot, save_figure
from ..claims.registry import Measurement, NotApplicable, family, figure, metric, relative_depth
from ..data.segments import CORPORA as SEGMENT_CORPORA
from ..engine.batching import Encoded, Skipped, iter_batches
from ..engine.passes import NothingToMeasure

MASK_RATE = 0.15
MASK_SEED = 0
# "unmasked" = Fig. 3's "All unmasked tokens" ([CLS], [SEP] and '.'/',' included): the claims' comparison set, as in
# the paper's figure (Clark et al. released no code for §3.2's gradients; the figure's legend is the definition).
# "other" (unmasked, neither [SEP] nor '.'/',') is kept for the figure's reading "other tokens" (caption).
KEY_CLASSES = ("sep", "punct", "other", "unmasked")


@dataclass
class NoMLMHead(NothingToMeasure):
    """Pass result for a model whose checkpoint has no trained MLM head (the claims are skipped)."""


@dataclass
class GradientResult:
    """Per-head means of |∂L/∂α| by key class (``(n_layers, n_heads)`` tensors on the CPU) and the [SEP] share."""

    grad: dict[str, torch.Tensor]
    to_sep: torch.Tensor  # (n_layers, n_heads) mean attention to [SEP] (real queries, then segments)
    n_segments: int
    n_masked: int  # masked word pieces (the loss terms)
    n_weights: dict[str, int]  # attention weights (query-key pairs) per layer and head in each key class
    sep_chance: float  # mean over segments of 2 / L
    mask_rate: float = MASK_RATE
    seed: int = MASK_SEED

    def per_layer(self, key_class: str) -> torch.Tensor:
        """Mean over heads: Fig. 3's curves."""
        return self.grad[key_class].mean(dim=1)

    def sep_share(self) -> torch.Tensor:
        return self.to_sep.mean(dim=1)

    @property
    def n_layers(self) -> int:
        return self.to_sep.shape[0]


# ---- masking ------------------------------------------------------------------------------------------------

@dataclass
class MaskedExample:
    encoded: Encoded  # input ids with [MASK] at the chosen positions
    positions: list[int]
    labels: list[int]  # the original ids at ``positions``


def mask_pieces(enc: Encoded, tokenizer, rate: float = MASK_RATE, seed: int = MASK_SEED) -> MaskedExample:
    """Replace ``rate`` of the word pieces (not [CLS]/[SEP]; at least one) by [MASK], chosen by (seed, index)."""
    special = set(tokenizer.all_special_ids)
    candidates = [i for i, t in enumerate(enc.input_ids) if t not in special]
    if not candidates:
        return MaskedExample(enc, [], [])
    k = max(1, int(round(rate * len(candidates))))
    rng = np.random.default_rng([seed, enc.index])
    positions = sorted(int(p) for p in rng.choice(candidates, size=k, replace=False))
    ids = list(enc.input_ids)
    labels = [ids[p] for p in positions]
    for p in positions:
        ids[p] = tokenizer.mask_token_id
    return MaskedExample(dataclasses.replace(enc, input_ids=ids), positions, labels)


@dataclass
class MaskedLabels:
    """A batch's masked positions, chosen on the host and copied to the device in one array (issue 47: the loss reads
    them by integer index, no boolean index whose size the host must learn from the device)."""

    labels: torch.Tensor  # (B, T): the original id at masked positions, -100 elsewhere
    rows: torch.Tensor  # (M,): each masked position's segment, in row-major order (as a boolean mask reads them)
    cols: torch.Tensor  # (M,): its position
    targets: torch.Tensor  # (M,): its original id
    per_segment: torch.Tensor  # (B,): masked positions per segment


def batch_labels(batch, masked: dict[int, MaskedExample]) -> MaskedLabels:
    """The batch's masked positions and their original ids (:class:`MaskedLabels`)."""
    from ..engine.batching import to_device_parts

    b, t = batch.input_ids.shape
    labels = np.full((b, t), -100, dtype=np.int64)
    picks = []  # (row, position, id), row-major
    for row, e in enumerate(batch.examples):
        m = masked[e.index]
        for pos, label in sorted(zip(m.positions, m.labels)):
            labels[row, pos] = label
            picks.append((row, pos, label))
    at = np.array(picks, dtype=np.int64).reshape(-1, 3)
    per_segment = np.bincount(at[:, 0], minlength=b)
    on_device, rows, cols, targets, counts = to_device_parts([labels, *at.T, per_segment], batch.input_ids.device)
    return MaskedLabels(on_device, rows, cols, targets, counts)


# ---- the gradient core --------------------------------------------------------------------------------------

def _head_module(model):
    """The MLM head as one module hidden → logits (BERT ``cls``, RoBERTa ``lm_head``), or None."""
    base = getattr(model, "base_model_prefix", "")
    heads = [m for n, m in model.named_children() if n != base and any(True for _ in m.parameters())]
    return heads[0] if len(heads) == 1 else None


def mlm_loss(model, batch, masked: MaskedLabels) -> torch.Tensor:
    """Sum over segments of each segment's mean cross-entropy over its masked pieces.

    Logits are computed for the masked positions only (the full ``(B, T, vocab)`` logits would dominate memory).
    """
    head = _head_module(model)
    if head is not None:
        hidden = model.base_model(**batch.model_inputs(model)).last_hidden_state
        logits = head(hidden[masked.rows, masked.cols])
    else:  # an architecture whose head is several modules: the full forward
        logits = model(**batch.model_inputs(model)).logits[masked.rows, masked.cols]
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # half precision → float32
    ce = torch.nn.functional.cross_entropy(logits, masked.targets, reduction="none")
    per_segment = torch.zeros(batch.input_ids.shape[0], dtype=ce.dtype, device=ce.device).index_add_(0, masked.rows, ce)
    return (per_segment / masked.per_segment.clamp(min=1)).sum()


def attention_gradients(model, batch, labels: MaskedLabels, n_layers: int):
    """(loss, [probs per layer], [∂loss/∂probs per layer]) for one batch; gradients enabled whatever the context."""
    deltas: dict[int, torch.Tensor] = {}
    probs_seen: dict[int, torch.Tensor] = {}

    def edit(layer, probs, key_mask):
        delta = torch.zeros_like(probs, requires_grad=True)
        deltas[layer], probs_seen[layer] = delta, probs
        return probs + delta

    with torch.inference_mode(False), torch.enable_grad(), attention_run(model, edit_probs=edit):
        loss = mlm_loss(model, batch, labels)
        grads = torch.autograd.grad(loss, [deltas[layer] for layer in range(n_layers)])
    return loss.detach(), [probs_seen[layer].detach() for layer in range(n_layers)], list(grads)


class GradientReducer:
    """Running sums of |∂L/∂α| per (layer, head, key class) and of attention to [SEP], on the model's device.

    Each statistic is a segment's mean (over its real queries and the keys of the class), then the mean over the
    segments that have such keys, as in the surface family. Pooling all weights instead would weigh [SEP] (2 keys
    per segment) and the other tokens (~L keys) by different segment lengths, and short segments have larger
    gradients: on a random-init model that alone makes [SEP]'s gradient look 1.6x the others'.
    """

    def __init__(self, n_layers: int, n_heads: int, device):
        z = lambda: torch.zeros(n_layers, n_heads, dtype=torch.float64, device=device)  # noqa: E731
        self.sums = {c: z() for c in KEY_CLASSES}
        self.counts = {c: torch.zeros((), dtype=torch.long, device=device) for c in KEY_CLASSES}  # segments
        self.weights = {c: torch.zeros((), dtype=torch.long, device=device) for c in KEY_CLASSES}
        self.sep_sum = z()
        self.sep_chance_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.n_masked = torch.zeros((), dtype=torch.long, device=device)
        self.n_segments = 0

    def start_batch(self, batch, labels: MaskedLabels) -> None:
        real = batch.token_mask
        masked = labels.labels >= 0
        unmasked = real & ~masked
        self.query = real.to(torch.float32)
        self.keys = {
            "sep": batch.is_sep.to(torch.float32),
            "punct": batch.is_punct.to(torch.float32),  # a masked '.' is [MASK]: not here
            "other": (unmasked & ~batch.is_sep & ~batch.is_punct).to(torch.float32),
            "unmasked": unmasked.to(torch.float32),
        }
        n_queries = self.query.sum(-1)  # (B,) real queries per segment
        self.n_queries = n_queries.clamp(min=1)
        self.n_pairs = {}  # (B,) query-key pairs of each class per segment
        for c, k in self.keys.items():
            pairs = n_queries * k.sum(-1)
            self.n_pairs[c] = pairs.clamp(min=1)
            self.counts[c] += (pairs > 0).sum()
            self.weights[c] += pairs.sum().long()
        self.sep_chance_sum += (batch.is_sep.sum(-1).double() / n_queries.double().clamp(min=1)).sum()  # n_sep / L
        self.n_segments += real.shape[0]
        self.n_masked += masked.sum()

    def update(self, layer: int, probs: torch.Tensor, grad: torch.Tensor) -> None:
        by_key = torch.einsum("bhqk,bq->bhk", grad.float().abs(), self.query)  # summed over real queries
        for c, k in self.keys.items():
            per_segment = torch.einsum("bhk,bk->bh", by_key, k) / self.n_pairs[c][:, None]  # 0 without such keys
            self.sums[c][layer] += per_segment.sum(0).double()
        to_sep = torch.einsum("bhqk,bq,bk->bh", probs.float(), self.query, self.keys["sep"])
        self.sep_sum[layer] += (to_sep / self.n_queries[:, None]).sum(0).double()

    def finalize(self) -> GradientResult:
        n = max(self.n_segments, 1)
        return GradientResult(
            grad={c: (self.sums[c] / max(int(self.counts[c]), 1)).float().cpu() for c in KEY_CLASSES},
            to_sep=(self.sep_sum / n).float().cpu(),
            n_segments=self.n_segments,
            n_masked=int(self.n_masked),
            n_weights={c: int(v) for c, v in self.weights.items()},
            sep_chance=float(self.sep_chance_sum) / n,
        )


def run_gradients(model, batches, masked: dict[int, MaskedExample], n_layers: int, n_heads: int, device,
                  progress: bool = False, desc: str = "gradient") -> GradientResult:
    """The family's core: one forward + backward per batch (eval mode, no dropout), reduced on the device."""
    if progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc=desc, unit="batch", leave=False, disable=None)
    reducer = GradientReducer(n_layers, n_heads, device)
    for batch in batches:
        labels = batch_labels(batch, masked)
        reducer.start_batch(batch, labels)
        _, probs, grads = attention_gradients(model, batch, labels, n_layers)
        for layer in range(n_layers):
            reducer.update(layer, probs[layer], grads[layer])
    return reducer.finalize()


# ---- finding (or refusing) the MLM head ---------------------------------------------------------------------

_WEIGHT_FILES = ("model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json",
                 "pytorch_model.bin")


def checkpoint_keys(source: str) -> list[str] | None:
    """Tensor names in a checkpoint (folder or cached hub name), read from headers only; None if none found."""
    import json

    from transformers.utils import cached_file

    from ..engine.model import LOCAL_ONLY

    for name in _WEIGHT_FILES:
        try:
            path = cached_file(source, name, _raise_exceptions_for_missing_entries=False,
                               _raise_exceptions_for_connection_errors=False, **LOCAL_ONLY.kwargs())
        except Exception:  # noqa: BLE001 - any failure to resolve a file means: not available here
            path = None
        if not path:
            continue
        if name.endswith(".index.json"):
            return list(json.loads(Path(path).read_text(encoding="utf-8"))["weight_map"])
        if name.endswith(".safetensors"):
            from safetensors import safe_open

            with safe_open(path, "pt") as f:
                return list(f.keys())
        try:
            return list(torch.load(path, map_location="meta", weights_only=True, mmap=True))
        except RuntimeError:  # a legacy (non-zip) .bin cannot be memory-mapped
            return list(torch.load(path, map_location="cpu", weights_only=True))
    return None


def missing_head_weights(config, keys: list[str]) -> list[str]:
    """The MLM head's parameters that ``keys`` lack (old ``gamma``/``beta`` names and tied aliases count)."""
    from transformers import AutoModelForMaskedLM

    with torch.device("meta"):
        skeleton = AutoModelForMaskedLM.from_config(config)
    base = skeleton.base_model_prefix
    tied = getattr(skeleton, "all_tied_weights_keys", None) or getattr(skeleton, "_tied_weights_keys", None) or {}
    aliases: dict[str, set[str]] = {}
    if isinstance(tied, dict):
        for a, b in tied.items():
            aliases.setdefault(a, set()).add(b)
            aliases.setdefault(b, set()).add(a)
    norm = {k.replace(".gamma", ".weight").replace(".beta", ".bias") for k in keys}
    head = [n for n, _ in skeleton.named_parameters() if not n.startswith(base + ".")]
    return [n for n in head if n not in norm and not (aliases.get(n, set()) & norm)]


def mlm_head_problem(info, config) -> str | None:
    """Why this (trained) model has no usable MLM head, or None when its checkpoint has one."""
    keys = checkpoint_keys(info.source)
    if keys is None:
        return f"{info.name}: no safetensors/PyTorch weights found to check for an MLM head"
    missing = missing_head_weights(config, keys)
    if missing:
        return (f"{info.name} has no masked-LM head weights (checkpoint lacks {', '.join(missing[:3])}"
                f"{', ...' if len(missing) > 3 else ''}); a head would be randomly initialised")
    return None


_MLM_MODELS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def mlm_model(loaded):
    """The MLM variant of ``loaded`` (memoised per session model): the checkpoint's head, or for a random-init
    twin a random head (same seed). Its parameters need no gradients: only the attention's are taken."""
    if loaded.model in _MLM_MODELS:
        return _MLM_MODELS[loaded.model]
    from ..engine.model import load_model, model_from_config

    info = loaded.info
    if info.random_init_seed is not None:
        mlm = model_from_config(loaded.model.config, loaded.tokenizer, info.name, info.slug, seed=info.random_init_seed,
                                device=info.device, with_mlm_head=True, source=info.source)
    else:
        mlm = load_model(info.source, device=info.device, with_mlm_head=True)
    mlm.model.requires_grad_(False)
    _MLM_MODELS[loaded.model] = mlm
    return mlm


# ---- the pass -----------------------------------------------------------------------------------------------

@dataclass
class GradientPass:
    """Prepared pass (a ``passes.Pass``): tokenised, masked segments and the MLM model to load."""

    family: str
    corpus: str
    data: str
    loaded: object
    masked: dict[int, MaskedExample]
    skipped: Skipped
    batch_size: int = 16
    no_head: str | None = None
    data_paths: list = field(default_factory=list)

    @property
    def encoded(self) -> list[Encoded]:
        return [m.encoded for m in self.masked.values()]

    def nothing_to_measure(self) -> str | None:
        return self.no_head

    def artifacts(self, progress: bool = False) -> None:
        """Nothing to make: the MLM model is loaded inside ``run`` (before its timer starts)."""

    def run(self, progress: bool = False):
        from ..engine.passes import PassResult, timed

        info = self.loaded.info
        if self.no_head:
            return PassResult(self.family, self.corpus, self.data, info, NoMLMHead(self.no_head), 0, self.skipped)
        mlm = mlm_model(self.loaded)  # not timed: loading
        dev = torch.device(info.device)
        encoded = self.encoded
        warm = next(iter_batches(encoded[:2], mlm.tokenizer, dev, 2), None)
        if warm is not None:  # untimed warm-up (CUDA context, kernels)
            attention_gradients(mlm.model, warm, batch_labels(warm, self.masked), info.n_layers)
        result, seconds = timed(dev, lambda: run_gradients(
            mlm.model, iter_batches(encoded, mlm.tokenizer, dev, self.batch_size), self.masked, info.n_layers,
            info.n_heads, info.device, progress=progress, desc=f"{self.family}:{self.corpus}"))
        model_info = dataclasses.replace(info, has_mlm_head=True,
                                         extra={**info.extra, "mlm_model_class": type(mlm.model).__name__})
        return PassResult(self.family, self.corpus, self.data, model_info, result, len(encoded), self.skipped, seconds)


@family("gradient", corpora=tuple(SEGMENT_CORPORA), default_corpus="wikitext2", quick_limit=200)
def prepare_gradient(loaded, data_dir: Path, corpus: str = "wikitext2", max_tokens: int = 128,
                     limit: int | None = None, batch_size: int = 32) -> GradientPass:
    """Clark §3.2 Fig. 3: the §3 segments, 15% of pieces masked; no pass without a trained MLM head."""
    from ..data.segments import load_segment_set

    masking = f"{MASK_RATE:.0%} masked, seed {MASK_SEED}"
    paths = [data_dir / SEGMENT_CORPORA[corpus]]
    bs = max(1, batch_size // 2)  # a backward pass holds every layer's maps: half the forward-only batch
    if loaded.info.random_init_seed is None:
        problem = mlm_head_problem(loaded.info, loaded.model.config)
    else:  # a random twin gets a random head, where transformers has a masked-LM class for the architecture
        from transformers import MODEL_FOR_MASKED_LM_MAPPING

        problem = None if type(loaded.model.config) in MODEL_FOR_MASKED_LM_MAPPING else (
            f"{loaded.info.name}: transformers has no masked-LM class for {loaded.model.config.model_type}")
    if problem is None and attention_site(loaded.model).path == SEAM:
        problem = f"{EDITS} {seam_reason(loaded.model)}"
    if problem:
        return GradientPass("gradient", corpus, f"{SEGMENT_CORPORA[corpus]} (§3 segments, {masking})", loaded,
                            {}, Skipped(), bs, no_head=problem, data_paths=paths)
    max_tokens = min(max_tokens, loaded.info.max_positions)
    segs = load_segment_set(data_dir, corpus, loaded.tokenizer, max_tokens, limit)
    tok = loaded.tokenizer
    masked = {e.index: mask_pieces(e, tok) for e in segs.encoded}
    return GradientPass("gradient", corpus, f"{segs.description}; {masking}", loaded, masked, segs.skipped, bs,
                        data_paths=paths)


# ---- claim metrics (named by reference_numbers/clark2019_gradient.toml) ---------------------------------------

def _result(pr) -> GradientResult:
    if isinstance(pr.result, NoMLMHead):
        reason = pr.result.reason
        raise NotApplicable(reason if reason.startswith(EDITS) else f"needs a masked-LM head; {reason}")
    return pr.result


def _n(res: GradientResult) -> dict:
    return {"n": res.n_segments, "n_unit": "segments"}


def _ratios(res: GradientResult, stat: str, versus: str) -> torch.Tensor:
    return res.per_layer(stat) / res.per_layer(versus).clamp(min=1e-30)


def _layers_text(values: torch.Tensor, fmt: str = ".2f") -> str:
    return " ".join(f"L{i + 1}={v:{fmt}}" for i, v in enumerate(values.tolist()))


def _from_layer0(n_layers: int, from_layer: int, of_layers: int) -> int:
    """First 0-based layer at relative depth >= from_layer / of_layers (layer 5 of 12 → layer 3 of 6)."""
    return next(l for l in range(n_layers) if relative_depth(l, n_layers) >= from_layer / of_layers - 1e-9)


@metric("gradient_ratio_from_depth")
def gradient_ratio_from_depth(pr, stat: str = "sep", versus: str = "unmasked", from_layer: int = 5,
                              of_layers: int = 12) -> Measurement:
    """Largest per-layer ratio mean|∂L/∂α| to ``stat`` over ``versus`` in the layers from relative depth
    from_layer/of_layers on (Clark §3.2, Fig. 3: from layer 5 of 12 the [SEP] gradient is small)."""
    res = _result(pr)
    ratios = _ratios(res, stat, versus)
    start = _from_layer0(res.n_layers, from_layer, of_layers)
    worst = start + int(torch.argmax(ratios[start:]))
    detail = (f"max at L{worst + 1} over L{start + 1}-L{res.n_layers}; {stat}/{versus} by layer: {_layers_text(ratios)}; "
              f"mean |dL/da| {stat}: {_layers_text(res.per_layer(stat), '.2e')}; {versus}: "
              f"{_layers_text(res.per_layer(versus), '.2e')}; {res.n_masked} masked pieces")
    return Measurement(float(ratios[worst]), detail=detail, unit="x", **_n(res))


def _first_layer_from_which(flags: list[bool]) -> int | None:
    """First 0-based layer from which every flag up to the last layer is True."""
    first = None
    for i in range(len(flags) - 1, -1, -1):
        if not flags[i]:
            break
        first = i
    return first


@metric("gradient_onset_gap")
def gradient_onset_gap(pr, stat: str = "sep", versus: str = "unmasked", small_ratio: float = 0.5,
                       peak_fraction: float = 0.5, min_peak_over_chance: float = 5.0) -> Measurement:
    """Distance in relative depth between the layer from which the ``stat`` gradient stays small (ratio to
    ``versus`` below ``small_ratio`` in every later layer) and the first layer whose attention to [SEP] reaches
    ``peak_fraction`` of its peak (Clark §3.2: both at layer 5 of 12). No such gradient layer counts as onset
    L+1 (after the last layer). Without a [SEP] peak of ``min_peak_over_chance`` times chance (2/L) attention to
    [SEP] never "becomes high" and the claim does not apply."""
    res = _result(pr)
    n = res.n_layers
    share = res.sep_share()
    peak = float(share.max())
    if peak < min_peak_over_chance * res.sep_chance:
        raise NotApplicable(f"attention to [SEP] never becomes high: peak {peak:.3f} < {min_peak_over_chance:g}x "
                            f"chance {res.sep_chance:.3f} ({_layers_text(share, '.3f')})")
    attn_onset = next(i for i, v in enumerate(share.tolist()) if v >= peak_fraction * peak)
    ratios = _ratios(res, stat, versus)
    grad_onset = _first_layer_from_which([r < small_ratio for r in ratios.tolist()])
    grad_text = f"L{grad_onset + 1}" if grad_onset is not None else "no layer"
    if grad_onset is None:
        grad_onset = n  # after the last layer
    detail = (f"{stat} gradient below {small_ratio:g}x {versus} from {grad_text}; [SEP] share >= "
              f"{peak_fraction:g} of its peak from L{attn_onset + 1} of {n}; ratios {_layers_text(ratios)}; "
              f"[SEP] share {_layers_text(share, '.3f')}")
    return Measurement(abs(grad_onset - attn_onset) / n, detail=detail, unit="rel. depth", **_n(res))


# ---- figure (Clark Fig. 3) ------------------------------------------------------------------------------------

@figure("gradient")
def gradient_figure(pass_results, directory: Path) -> list[Path]:
    """Mean |∂L/∂α| by layer for [SEP], '.'/',' and all unmasked tokens, one PNG per (model, corpus)."""
    plt = pyplot()
    paths = []
    for pr in pass_results:
        if not isinstance(pr.result, GradientResult):
            continue
        res = pr.result
        fig, ax = plt.subplots(figsize=(4.5, 3.2))
        layers = range(1, res.n_layers + 1)
        for key, label in (("unmasked", "All unmasked tokens"), ("sep", "[SEP]"), ("punct", ". or ,")):
            ax.plot(layers, res.per_layer(key).tolist(), marker="o", label=label)
        ax.set_xlabel("Layer")
        ax.set_ylabel("Average |dL/dα|")
        ax.set_title(f"{pr.model.name} / {pr.corpus} (n={res.n_segments})", fontsize=8)
        ax.legend(fontsize=7)
        paths.append(save_figure(fig, directory, f"gradient-{pr.model.slug}-{pr.corpus}.png"))
    return paths


__all__ = ["GradientResult", "NoMLMHead", "prepare_gradient", "run_gradients", "attention_gradients",
           "mask_pieces"]
