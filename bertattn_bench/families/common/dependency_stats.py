"""UD trees as the Stanford Dependencies arcs of Clark et al.'s Table 1, the fixed-offset baselines, and the reducer
that scores every head as a dependency parser (Clark §4.1-4.2), shared by the dependency family, the probes' best
single head (Hewitt & Manning's baseline) and Clark's figures (issue 44: no family imports another's module).

UD (EWT, GUM) trees are mapped to the Stanford Dependencies relations of Clark's Table 1 by one table,
:data:`UD_TO_SD` plus the two derived relations (pobj, prep) in :func:`sd_arcs`:

==========  ===================================================================================================
SD (Clark)  UD source
==========  ===================================================================================================
All         every non-root arc except ``punct`` (UAS convention; Clark does not say)
det         det (``det:predet`` is not det)
nn          compound (not compound:prt)
prt         compound:prt
dobj        obj
nsubj       nsubj (not nsubj:pass)
amod        amod; advmod: advmod; ccomp: ccomp
aux         aux, plus ``mark`` with XPOS ``TO`` (SD treats infinitival "to" as aux)
mark        mark without XPOS ``TO``
auxpass     aux:pass
poss        nmod:poss; its ``'s`` (a ``case`` child) also counts as the dependent (Clark §4.2: "counts 's as correct")
poss_s      (not in Table 1) that ``'s`` → the possessed noun: Clark's head 7-6 treats 's as the dependent
pobj        a ``case`` child c (UPOS ADP) of an obl/nmod word n (not nmod:poss): SD pobj(head=c, dependent=n)
prep        the same c, with n's head g: SD prep(head=g, dependent=c)
==========  ===================================================================================================

A head's prediction for a word is the other word it attends to most in the word-level map (sum over pieces
attended to, mean over pieces attending; [CLS]/[SEP] are not candidates, Clark fn. 2). Both directions are
scored: dependent→head and head→dependent.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
import torch

from ...engine.attention import Reducer, head_name

TABLE1 = ("All", "prep", "pobj", "det", "nn", "nsubj", "amod", "dobj", "advmod", "aux", "poss", "auxpass",
          "ccomp", "mark", "prt")
# poss_s: the possessive 's (UD case child of an nmod:poss word) → the possessed noun (Clark §4.2, head 7-6)
RELATIONS = TABLE1 + ("poss_s",)
NOMINAL_UPOS = ("NOUN", "PROPN")
DIRECTIONS = ("dependent→head", "head→dependent")
UD_TO_SD = {"det": "det", "compound": "nn", "compound:prt": "prt", "obj": "dobj", "nsubj": "nsubj",
            "amod": "amod", "advmod": "advmod", "ccomp": "ccomp", "aux": "aux", "aux:pass": "auxpass",
            "nmod:poss": "poss"}
POSSESSIVE_MARKERS = {"'s", "'", "’s", "’"}
# the most float32 elements one layer group's pooled maps may hold (the pieces attending → words, then words and
# [CLS]/[SEP]); a batch whose maps for all layers are larger is reduced in groups of layers (the same numbers). On
# the CPU 16 MB temporaries (2^22) ran as fast as any (EWT dev 0.35 s, GUM dev 0.46 s for 2^20..2^26: larger ones
# fault their pages in at each allocation); a GPU's caching allocator reuses its blocks, and fewer groups are
# fewer launches
GROUP_ELEMENTS = {"cpu": 1 << 22, "accelerator": 1 << 26}


@dataclass(frozen=True)
class Arc:
    """An SD arc over 0-based word indices; ``alt`` is a second word accepted as the dependent (poss 's), or -1."""

    relation: str
    dependent: int
    head: int
    alt: int = -1


def _is_nominal_modifier(deprel: str) -> bool:
    base = deprel.split(":")[0]
    return base in ("obl", "nmod") and deprel != "nmod:poss"


def sd_arcs(sentence) -> list[Arc]:
    """The SD arcs of one UD sentence (see the module table)."""
    arcs: list[Arc] = []
    children = defaultdict(list)
    for i, h in enumerate(sentence.heads):
        if h > 0:
            children[h - 1].append(i)
    for i, (h, rel) in enumerate(zip(sentence.heads, sentence.deprels)):
        if h == 0:
            continue
        g = h - 1
        if rel != "punct":
            arcs.append(Arc("All", i, g))
        if rel == "mark":
            arcs.append(Arc("aux" if sentence.xpos[i] == "TO" else "mark", i, g))
        elif rel == "nmod:poss":
            alt = next((c for c in children[i] if sentence.deprels[c] == "case"
                        and sentence.words[c].lower() in POSSESSIVE_MARKERS), -1)
            arcs.append(Arc("poss", i, g, alt))
            if alt >= 0:
                arcs.append(Arc("poss_s", alt, g))
        elif rel in UD_TO_SD:
            arcs.append(Arc(UD_TO_SD[rel], i, g))
        elif rel == "case" and sentence.upos[i] == "ADP" and _is_nominal_modifier(sentence.deprels[g]):
            arcs.append(Arc("pobj", g, i))
            if sentence.heads[g] > 0:
                arcs.append(Arc("prep", i, sentence.heads[g] - 1))
    return arcs


@dataclass(frozen=True)
class OffsetBaseline:
    """Clark §4.2: the best fixed offset from the dependent (+1 = the word to the right is the head)."""

    accuracy: float  # percent
    offset: int
    n: int
    right_branching: float  # percent at offset +1 (the right-branching baseline for All)


def offset_baselines(arcs_per_sentence: list[list[Arc]], relations=RELATIONS) -> dict[str, OffsetBaseline]:
    counts: dict[str, Counter] = {r: Counter() for r in relations}
    for arcs in arcs_per_sentence:
        for a in arcs:
            if a.relation in counts:
                counts[a.relation][a.head - a.dependent] += 1
    out = {}
    for r, c in counts.items():
        n = sum(c.values())
        if n:
            offset, hits = max(c.items(), key=lambda kv: (kv[1], -abs(kv[0])))
            out[r] = OffsetBaseline(100.0 * hits / n, offset, n, 100.0 * c[1] / n)
    return out


@dataclass(frozen=True)
class HeadScore:
    layer: int  # 0-based
    head: int  # 0-based
    direction: int
    accuracy: float  # percent
    n: int

    @property
    def name(self) -> str:
        return head_name(self.layer, self.head)

    def describe(self) -> str:
        return f"{self.name} {DIRECTIONS[self.direction]} {self.accuracy:.1f}%"


@dataclass
class DependencyResult:
    relations: tuple[str, ...]
    correct: torch.Tensor  # (n_layers, 2 directions, n_relations, n_heads) counts
    n_arcs: torch.Tensor  # (n_relations,)
    baselines: dict[str, OffsetBaseline]
    n_sentences: int
    n_words: int
    n_split_words: int  # words of more than one word piece
    all_correct_with_special: torch.Tensor | None = None  # (L, H): All, dependent→head, [CLS]/[SEP] candidates too
    sink_share: torch.Tensor | None = None  # (L, H, 2): mean attention to [CLS]+[SEP] from [non-nominal, nominal] words
    n_nominal: tuple[int, int] = (0, 0)  # words counted in sink_share: (non-nominal, nominal)
    sink_sq_mean: torch.Tensor | None = None  # (L, H, 2): mean squared attention to [CLS]+[SEP] (for the SE)
    max_row_sum_error: float = 0.0  # max |sum of a word's attention over words + [CLS]/[SEP] - 1|

    def accuracy(self) -> torch.Tensor:
        """Percent correct, (n_layers, 2, n_relations, n_heads)."""
        return 100.0 * self.correct / self.n_arcs.clamp(min=1).view(1, 1, -1, 1)

    def best_head(self, relation: str, direction: int | None = None) -> HeadScore:
        r = self.relations.index(relation)
        acc = self.accuracy()[:, :, r, :]  # (L, 2, H)
        if direction is not None:
            sub = acc[:, direction, :]
            flat = int(torch.argmax(sub))
            layer, head, d = flat // sub.shape[1], flat % sub.shape[1], direction
        else:
            flat = int(torch.argmax(acc))
            layer, rest = divmod(flat, acc.shape[1] * acc.shape[2])
            d, head = divmod(rest, acc.shape[2])
        return HeadScore(layer, head, d, float(acc[layer, d, head]), int(self.n_arcs[r]))


class DependencyReducer(Reducer):
    """Per (layer, direction, relation, head) counts of correct argmax predictions, accumulated on device.

    Issue 47: a batch's arcs, its "All" arcs and its nominal-word mask travel in one host array (selected on the
    host, one non-blocking copy). Per layer only the first pooling product runs (the pieces attending → words, into
    a per-batch buffer); the rest runs once for a group of layers (all of them unless the buffer would pass
    :data:`GROUP_ELEMENTS`): the second product, which pools the pieces attended to into words and gives the
    [CLS]/[SEP] columns in the same product, the row sums, one masked max (the word argmax; the argmax with
    [CLS]/[SEP] as candidates follows from comparing it with theirs), and one fused reduction of the four sink
    statistics. The arcs are scored for all layers at once when the batch ends (one gather, one ``index_add_``).
    Nothing in the batch loop reads a value back to the host (``tests/test_reducer_dispatch.py``). Every statistic
    is bit-identical to the per-layer code it replaced (docs/speed.md)."""

    maps_only = True  # reads nothing but the maps: the forward pass may stop after the last one

    def __init__(self, arcs_per_example: list[list[Arc]], n_layers: int, n_heads: int, device,
                 relations=RELATIONS, nominal_per_example: list | None = None):
        self.relations = tuple(relations)
        # per example: bool array, word is a noun/proper noun (for the no-op [SEP] claim, Clark §3.2 / Fig. 5)
        self.nominal = nominal_per_example
        self.rel_id = {r: i for i, r in enumerate(self.relations)}
        # per example: (n_arcs, 4) int arrays [dependent, head, alt, relation id], built once, not per batch
        self.arc_arrays = [np.array([(a.dependent, a.head, a.alt, self.rel_id[a.relation]) for a in arcs
                                     if a.relation in self.rel_id], dtype=np.int64).reshape(-1, 4)
                           for arcs in arcs_per_example]
        self.n_layers, self.n_heads = n_layers, n_heads
        # (relation, direction, layer, head): one index_add_ over the relations for both directions and all layers
        self.hits = torch.zeros(len(self.relations), 2, n_layers, n_heads, dtype=torch.float64, device=device)
        self.n_arcs = np.zeros(len(self.relations), dtype=np.int64)  # counted on the host, where the arcs are
        self.with_special = torch.zeros(n_layers, n_heads, dtype=torch.float64, device=device)
        # (layer, head, [sum, sum of squares], [non-nominal, nominal]) of the words' attention to [CLS]+[SEP]
        self.sink = torch.zeros(n_layers, n_heads, 2, 2, dtype=torch.float64, device=device)
        self.n_nominal = np.zeros(2, dtype=np.int64)
        self.max_row_error = torch.zeros((), dtype=torch.float64, device=device)
        self.words_split = torch.zeros(2, dtype=torch.long, device=device)  # words, words of > 1 piece
        self.all_id = self.rel_id.get("All", -1)
        self.device = device
        self.n_sentences = 0
        self.pending = False

    def start_batch(self, batch) -> None:
        self._flush()
        b_n, w = batch.word_mask.shape
        per = [self.arc_arrays[ex.index] for ex in batch.examples]
        rows = np.concatenate([np.full(len(a), b, dtype=np.int64) for b, a in enumerate(per)])
        arcs = np.concatenate(per)  # (A, 4): dependent, head, alt, relation
        self.n_arcs += np.bincount(arcs[:, 3], minlength=len(self.relations))
        is_all = arcs[:, 3] == self.all_id  # selected on the host: no data-dependent shape on the device
        nominal = np.zeros((b_n, w), dtype=np.int64)
        n_words = np.array([ex.n_words for ex in batch.examples])
        if self.nominal is not None:
            for i, ex in enumerate(batch.examples):
                nominal[i, :ex.n_words] = self.nominal[ex.index]
        n_nom = int(nominal.sum())
        self.n_nominal += (int(n_words.sum()) - n_nom, n_nom)
        a = len(arcs)
        # one copy: [rows per arc: b; dependent, alt, head (the words read); head, head, dependent (what they must
        # predict); relation; has alt], [All arcs: b, dependent, head], [nominal mask]
        from ...engine.batching import to_device_parts

        arc_t, all_t, nom_t = to_device_parts([
            np.stack([rows, arcs[:, 0], arcs[:, 2].clip(min=0), arcs[:, 1],
                      arcs[:, 1], arcs[:, 1], arcs[:, 0], arcs[:, 3], (arcs[:, 2] >= 0)]),
            np.stack([rows[is_all], arcs[is_all, 0], arcs[is_all, 1]]), nominal], self.device)
        dev = nom_t.device
        self.arc_b, self.arc_words = arc_t[0], arc_t[1:4]  # words whose prediction is read: dependent, alt, head
        self.arc_want = arc_t[4:7].view(3, a, 1, 1)  # ... and what it must be: head, head, dependent (alt below)
        self.arc_rel, self.has_alt = arc_t[7], arc_t[8].bool().view(a, 1, 1)
        self.all_b, self.all_dep, self.all_head = all_t[0], all_t[1], all_t[2].view(-1, 1, 1)
        is_nominal = nom_t.bool() & batch.word_mask
        self.classes = torch.stack([~is_nominal & batch.word_mask, is_nominal], 1).float()  # (B, 2, W)
        self.batch = batch
        self.invalid = (~batch.word_mask[:, None, None, :] | torch.eye(w, dtype=torch.bool, device=dev))
        self.pred = torch.empty(self.n_layers, b_n, self.n_heads, w, dtype=torch.long, device=dev)
        self.pred_special = torch.empty_like(self.pred)
        self.row_sum = torch.empty(self.n_layers, b_n, self.n_heads, w, dtype=torch.float32, device=dev)
        self.n_sentences += b_n
        self.words_split += torch.stack([batch.word_mask.sum(), (batch.word_to.sum(1) > 1).sum()])
        # the pieces attended to → words, and [CLS], [SEP]: one (B, T, W + 2) matrix, one product per layer group
        self.to_ext = torch.cat([batch.word_to, torch.stack([batch.is_cls, batch.is_sep], -1).float()], -1)
        n_t = batch.word_to.shape[1]
        cap = GROUP_ELEMENTS["cpu" if dev.type == "cpu" else "accelerator"]
        self.group = max(1, min(self.n_layers, cap // max(1, b_n * self.n_heads * w * (n_t + w + 2))))
        # the pieces attending → words: expanded over the heads once per batch (matmul would copy it every layer)
        self.word_from_h = batch.word_from.unsqueeze(1).expand(b_n, self.n_heads, w, n_t).contiguous()
        self.from_words = torch.empty(self.group, b_n, self.n_heads, w, n_t, dtype=torch.float32, device=dev)
        self.word_max = torch.empty(self.group, b_n, self.n_heads, w, dtype=torch.float32, device=dev)
        self.special_index = torch.full((), w, dtype=torch.long, device=dev)  # never a word's index
        self.layers: list[int] = []  # the layers whose first product waits in from_words
        self.pending = False

    def update(self, layer: int, probs: torch.Tensor) -> None:
        if self.layers and (layer != self.layers[-1] + 1 or len(self.layers) == self.group):
            self._reduce_layers()
        torch.matmul(self.word_from_h, probs.float(), out=self.from_words[len(self.layers)])  # (B, H, W, T)
        self.layers.append(layer)
        self.pending = True
        if layer == self.n_layers - 1 or len(self.layers) == self.group:
            self._reduce_layers()

    def _reduce_layers(self) -> None:
        """Everything after the first product, for the contiguous layers waiting in ``from_words``."""
        if not self.layers:
            return
        first, k = self.layers[0], len(self.layers)
        self.layers = []
        layers = slice(first, first + k)
        _, b_n, h, w, n_t = self.from_words[:k].shape
        ext = (self.from_words[:k].view(k, b_n, h * w, n_t) @ self.to_ext).view(k, b_n, h, w, w + 2)
        words, special = ext[..., :w], ext[..., w:]  # (k, B, H, W, W): sum over the pieces attended to; [CLS], [SEP]
        sink = special.sum(-1)  # (k, B, H, W)
        torch.add(words.sum(-1), sink, out=self.row_sum[layers])  # every word's attention sums to 1 (Clark §4.1)
        words.masked_fill_(self.invalid, float("-inf"))
        torch.max(words, -1, out=(self.word_max[:k], self.pred[layers]))
        # Clark fn. 2: the argmax with [CLS]/[SEP] as candidates too. In [words, CLS, SEP] the first maximum is a
        # word's unless a special column is strictly larger: the same index as an argmax over the concatenation
        torch.where(special.amax(-1) > self.word_max[:k], self.special_index, self.pred[layers],
                    out=self.pred_special[layers])
        stats = torch.stack([sink, sink.square()], 3)  # (k, B, H, 2, W)
        self.sink[layers] += (stats.unsqueeze(4) * self.classes[None, :, None, None]).sum((1, 5)).double()

    def end_batch(self, hidden_states=None) -> None:
        self._flush()

    def _flush(self) -> None:
        """Score the batch's arcs for every layer at once (after its last layer; start_batch and finalize call it
        too, for callers that drive update() alone)."""
        if not self.pending:
            return
        self._reduce_layers()
        self.pending = False
        got = self.pred[:, self.arc_b.unsqueeze(0), :, self.arc_words]  # (3, A, L, H): from dep, alt, head
        ok = got == self.arc_want  # dep→head, alt→head, head→dep
        dep_to_head = ok[0] | (self.has_alt & ok[1])
        head_to_dep = ok[2] | (self.has_alt & (got[2] == self.arc_words[1].view(-1, 1, 1)))
        self.hits.index_add_(0, self.arc_rel, torch.stack([dep_to_head, head_to_dep], 1).double())
        if self.all_id >= 0:
            hit = self.pred_special[:, self.all_b, :, self.all_dep] == self.all_head  # (A_all, L, H)
            self.with_special += hit.double().sum(0)
        err = ((self.row_sum - 1).abs() * self.batch.word_mask[None, :, None, :]).amax()
        self.max_row_error = torch.maximum(self.max_row_error, err.double())

    def finalize(self) -> DependencyResult:
        self._flush()
        n_nominal = torch.from_numpy(self.n_nominal.clip(min=1)).to(self.sink.device).view(1, 1, 2)
        return DependencyResult(
            relations=self.relations,
            correct=self.hits.permute(2, 1, 0, 3).contiguous().cpu(),
            n_arcs=torch.from_numpy(self.n_arcs.copy()),
            baselines={},
            n_sentences=self.n_sentences,
            n_words=int(self.words_split[0]),
            n_split_words=int(self.words_split[1]),
            all_correct_with_special=self.with_special.cpu(),
            sink_share=(self.sink[:, :, 0] / n_nominal).float().cpu(),
            sink_sq_mean=(self.sink[:, :, 1] / n_nominal).float().cpu(),
            n_nominal=tuple(int(x) for x in self.n_nominal),
            max_row_sum_error=float(self.max_row_error),
        )
