"""Clark §5 probes: the pass (features, training, baselines and the structural probe) and the family's prepare."""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import torch

from ...base.errors import DataError
from ...claims import learned, tiers
from ...claims.registry import family
from ...data import gum
from ...data.gum import train_documents as gum_train_documents
from ...engine.batching import Encoded, drop_too_long, encode_words
from ...engine.passes import PassResult, PreparedPass
from ..common.dependency_stats import DIRECTIONS, DependencyReducer, HeadScore, sd_arcs
from .constants import PROBE_CORPORA, PROBE_NAMES, RANDOM_INIT_SEED, TIERS, ProbeSettings
from .data import ROOT, TREES, gold_heads, sample_train_sentences, sd_like
from .models import ProbeScore, seeded, train_probes
from .reduce import extract
from .structural import HiddenWordStates, StructuralScore, Tree, structural_probe

# ---- the pass -----------------------------------------------------------------------------------------------------

@dataclass
class SeedProbes:
    """One training seed's probes: the scores of every trained probe and the structural probe."""

    seed: int
    probes: dict[str, ProbeScore]
    structural: StructuralScore | None = None


@dataclass
class ProbeResult:
    """The probes on one eval sample. A tier that trains several seeds (``ProbeSettings.n_seeds``) keeps each seed's
    probes in ``per_seed`` (the features are extracted once and shared); every reading (:meth:`uas`,
    :meth:`structural_uuas`) is then the mean over the seeds and the judge adds their spread
    (``claims.checks.per_seed_values``: the view of one seed holds that seed's entry only)."""

    PER_SEED: ClassVar[tuple[str, ...]] = ("per_seed",)

    probes: dict[str, ProbeScore]  # attn, attn_words, dist_words, random_init (the first seed's)
    right_branching: float  # percent, the same eval arcs
    best_head: HeadScore  # best single head (either direction) on the same eval arcs (as clark.dep_all)
    n_eval_sentences: int
    n_eval_arcs: int
    n_train_sentences: int
    n_train_arcs: int
    n_train_documents: int
    random_init: str  # how the random-init baseline was obtained
    seconds: dict[str, float] = field(default_factory=dict)
    structural: StructuralScore | None = None  # Hewitt & Manning's structural probe on the model's vectors
    train_seed: int = 0  # probe initialisation and training order ($BERTATTN_SEED)
    tier: str = tiers.RECORDED  # quick/regression: a seeded training sample; full: every GUM train sentence
    n_root_words: int = 0  # scored root words among the eval arcs (0 without a ROOT candidate)
    seeds: tuple[int, ...] = ()  # the training seeds of ``per_seed`` (empty: one seed, ``train_seed``)
    per_seed: list[SeedProbes] = field(default_factory=list)

    def seed_sets(self) -> list[SeedProbes]:
        """Each training seed's probes (one entry for a one-seed result)."""
        return self.per_seed or [SeedProbes(self.train_seed, self.probes, self.structural)]

    def uas(self, name: str) -> float:
        """UAS of a baseline (right-branching, the best head: no training) or of a trained probe (mean over seeds)."""
        if name == "right_branching":
            return self.right_branching
        if name == "best_head":
            return self.best_head.accuracy
        return float(np.mean([x.probes[name].uas for x in self.seed_sets()]))

    def structural_uuas(self) -> float | None:
        """The structural probe's UUAS (mean over seeds), None where none was trained."""
        st = [x.structural for x in self.seed_sets()]
        return None if any(x is None for x in st) else float(np.mean([x.uuas for x in st]))

    def seed_text(self) -> str:
        sets = self.seed_sets()
        return f"training seed {sets[0].seed}" if len(sets) == 1 else \
            f"training seeds {', '.join(str(x.seed) for x in sets)} (the mean of their {len(sets)} probes)"

    def label(self, name: str) -> str:
        if name == "best_head":
            return f"best single head {self.best_head.name} ({DIRECTIONS[self.best_head.direction]})"
        return PROBE_NAMES[name]

    def describe(self) -> str:
        return "; ".join(f"{self.label(k)} {self.uas(k):.1f}" for k in ("right_branching", "best_head", *self.probes))


def random_init_twin(loaded, seed: int = RANDOM_INIT_SEED):
    """Clark §5 baseline model: ``loaded``'s config with random weights, the embeddings copied from ``loaded``."""
    from ...engine.model import model_from_config

    info = loaded.info
    twin = seeded(seed, lambda: model_from_config(
        loaded.model.config, loaded.tokenizer, f"random-init({info.name}) with its embeddings",
        f"{info.slug}-random-init-embeddings", seed=seed, device=info.device, source=info.source))
    twin.model.embeddings.load_state_dict(loaded.model.embeddings.state_dict())
    return twin


@dataclass
class ProbePass(PreparedPass):
    """The probes family's pass: word maps of the train and eval sentences (the model, then its random-init twin),
    and the probes trained on them."""

    train_encoded: list[Encoded] = field(default_factory=list)
    train_heads: list[np.ndarray] = field(default_factory=list)
    eval_heads: list[np.ndarray] = field(default_factory=list)
    train_trees: list[Tree] = field(default_factory=list)  # full gold trees, for the structural probe
    eval_trees: list[Tree] = field(default_factory=list)
    eval_arcs: list = field(default_factory=list)
    n_train_documents: int = 0
    settings: ProbeSettings = field(default_factory=ProbeSettings)
    data_paths: list = field(default_factory=list)
    tier: str = tiers.RECORDED

    def run(self, progress: bool = False) -> PassResult:
        """Timed: the sweeps and the training. Building the random-init twin is not timed."""
        info = self.loaded.info
        dev = torch.device(info.device)
        sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
        twin = None if info.random_init_seed is not None else random_init_twin(self.loaded)
        self.warm_up(dev)
        sync()
        start = time.perf_counter()
        result = self.compute(twin)
        sync()
        seconds = time.perf_counter() - start
        return PassResult(self.family, self.corpus, self.data, info, result, len(self.encoded), self.skipped, seconds,
                          extra={"seconds": result.seconds}, learning=probe_learning(info.name, result))

    def compute(self, twin) -> ProbeResult:
        s, info, dev = self.settings, self.loaded.info, torch.device(self.loaded.info.device)
        secs: dict[str, float] = {}
        t = time.perf_counter()
        dep = DependencyReducer(self.eval_arcs, info.n_layers, info.n_heads, info.device, relations=("All",))
        train, (train_states,) = extract(self.loaded, self.train_encoded, self.train_heads, self.batch_size,
                                         [HiddenWordStates()])
        evals, (dep_result, eval_states) = extract(self.loaded, self.encoded, self.eval_heads, self.batch_size,
                                                   [dep, HiddenWordStates()])
        secs["features"] = time.perf_counter() - t
        runs = [s.for_seed(x) for x in s.training_seeds]  # one settings per training seed; the features shared
        t = time.perf_counter()
        sets = [SeedProbes(r.training_seed, train_probes(train, evals, r, dev)) for r in runs]
        secs["training"] = time.perf_counter() - t
        t = time.perf_counter()
        tr_states = [train_states[e.index] for e in self.train_encoded]
        ev_states = [eval_states[e.index] for e in self.encoded]
        for x, r in zip(sets, runs):
            x.structural = structural_probe(tr_states, self.train_trees, ev_states, self.eval_trees, r.structural, dev)
        del train_states, eval_states, tr_states, ev_states
        secs["structural"] = time.perf_counter() - t
        if twin is None:
            for x in sets:
                x.probes["random_init"] = x.probes["attn_words"]
            how = "the model is itself randomly initialised: its own Attn + words probe"
        else:
            del train, evals
            t = time.perf_counter()
            r_train, _ = extract(twin, self.train_encoded, self.train_heads, self.batch_size)
            r_eval, _ = extract(twin, self.encoded, self.eval_heads, self.batch_size)
            secs["random_init_features"] = time.perf_counter() - t
            t = time.perf_counter()
            for x, r in zip(sets, runs):
                x.probes["random_init"] = train_probes(r_train, r_eval, r, dev, with_dist=False)["attn_words"]
            secs["random_init_training"] = time.perf_counter() - t
            how = f"random weights (seed {RANDOM_INIT_SEED}) except the embeddings, copied from the model"
        n_eval_arcs, right = right_branching(self.eval_heads)
        n_root = int(sum((h == ROOT).sum() for h in self.eval_heads))
        best = dep_result.best_head("All")
        if n_root:  # a single head never picks ROOT (Clark's head predictor): on the probes' arcs, root words are misses
            best = HeadScore(best.layer, best.head, best.direction, best.accuracy * best.n / (best.n + n_root),
                             best.n + n_root)
        return ProbeResult(
            probes=sets[0].probes, right_branching=right, best_head=best, n_eval_sentences=len(self.encoded),
            n_eval_arcs=n_eval_arcs, n_train_sentences=len(self.train_encoded),
            n_train_arcs=int(sum((h != -1).sum() for h in self.train_heads)), n_train_documents=self.n_train_documents,
            random_init=how, seconds=secs, structural=sets[0].structural, train_seed=s.training_seed, tier=self.tier,
            n_root_words=n_root, seeds=tuple(x.seed for x in sets) if len(sets) > 1 else (),
            per_seed=sets if len(sets) > 1 else [])


def probe_learning(model_name: str, result: ProbeResult) -> tuple:
    """The learned-model guard of every trained probe (``learned.probe``), keyed by the probe's name: a claim's
    ``reads_trained`` lists the probes it compares."""
    sets = result.seed_sets()
    checks: tuple = ()
    for x in sets:
        seed = f"; training seed {x.seed}" if len(sets) > 1 else ""
        checks += tuple(learned.probe(f"{model_name}'s {PROBE_NAMES[k]} probe ({result.n_train_sentences} training "
                                      f"sentences{seed})", k, score)
                        for k, score in x.probes.items() if score.untrained_uas is not None)
        st = x.structural
        if st is not None and st.untrained_uuas is not None:
            checks += (learned.probe(f"{model_name}'s structural probe (layer {st.layer}, {st.n_train} training "
                                     f"sentences{seed})", "structural",
                                     SimpleNamespace(uas=st.uuas, untrained_uas=st.untrained_uuas, gained=st.gained,
                                                     lost=st.lost, n_arcs=st.n_edges), what="eval edges",
                                     measure="UUAS"),)
    return checks


def right_branching(heads: list[np.ndarray]) -> tuple[int, float]:
    """(scored arcs, percent whose head is the next word): Clark's right-branching baseline on the probes' arcs
    (a root word's head is ROOT, never the next word)."""
    n = correct = 0
    for h in heads:
        scored = h != -1
        n += int(scored.sum())
        correct += int((h[scored] == np.arange(len(h))[scored] + 1).sum())
    return n, 100.0 * correct / max(n, 1)




def _reindexed(encoded: list[Encoded]) -> list[Encoded]:
    return [Encoded(i, e.input_ids, e.token_type_ids, e.word_index, e.n_words) for i, e in enumerate(encoded)]




@family("probes", corpora=PROBE_CORPORA + tuple(f"{c}_ud" for c in PROBE_CORPORA), default_corpus="ewt_dev", trains=True)
def prepare_probes(loaded, data_dir: Path, corpus: str = "ewt_dev", limit: int | None = None, batch_size: int = 32,
                   settings: ProbeSettings | None = None, options: dict | None = None) -> ProbePass:
    """Clark §5: train on GUM train sentences (the regression tier: a seeded sample; ``--tier full``: all), evaluate on a
    seeded sample of ``corpus``."""
    import dataclasses

    from ...base.settings import data_file
    from ...data.ud import CORPORA, load_corpus

    tier = tiers.of_options(options, TIERS)
    s = settings or dataclasses.replace(ProbeSettings.with_seed((options or {}).get("seed")), **TIERS[tier])
    if settings is None and (options or {}).get("n_seeds") is not None:  # the run's $BERTATTN_SEEDS / seeds=
        s = dataclasses.replace(s, n_seeds=int(options["n_seeds"]))
    base = corpus[:-3] if corpus.endswith("_ud") else corpus
    if base != corpus:
        s = dataclasses.replace(s, trees="ud")
    if s.trees not in TREES:
        raise DataError(f"probe gold trees {s.trees!r}: expected one of {', '.join(TREES)}")
    convert = sd_like if s.trees == "sd" else (lambda x: x)
    max_tokens = loaded.info.max_positions
    docs = gum_train_documents(data_dir)
    train_all, n_docs = sample_train_sentences(docs, s.n_train, s.seed)
    train_all = [convert(x) for x in train_all]
    train_enc, _ = drop_too_long([encode_words(loaded.tokenizer, i, x.words) for i, x in enumerate(train_all)],
                                 max_tokens)
    train_sents = [train_all[e.index] for e in train_enc]
    sentences = [convert(x) for x in load_corpus(data_dir, base, limit)]
    n_total = len(sentences)
    n_eval = n_total if s.n_eval is None else min(s.n_eval, n_total)
    sentences = [sentences[i] for i in sorted(random.Random(s.seed).sample(range(n_total), n_eval))]
    encoded, skipped = drop_too_long([encode_words(loaded.tokenizer, i, x.words) for i, x in enumerate(sentences)],
                                     max_tokens)
    kept = [sentences[e.index] for e in encoded]  # reducers index per-example arrays by Encoded.index: 0..n-1
    data = (f"train: {len(train_enc)} sentences " + ("sampled " if s.n_train is not None else "(all) ")
            + f"from {n_docs} of the {len(docs)} GUM train documents ({tier} tier"
            + ("; REDUCED BUDGET: --tier full's verdict counts" if s.n_train is not None else "")
            + f"); eval: {len(encoded)} of the "
            f"{n_total} sentences of {CORPORA[base]} (sample seed {s.seed}, training seed"
            + (f"s {list(s.training_seeds)}" if s.n_seeds > 1 else f" {s.training_seed}") + "; UAS "
            + ("with a ROOT candidate, root words scored, without punct" if s.root else "without root and punct")
            + ("; SD-like gold trees: case heads the phrase, cc on the first conjunct)" if s.trees == "sd"
               else "; UD gold trees)"))
    return ProbePass(
        "probes", corpus, data, loaded, _reindexed(encoded), skipped, make_reducer=lambda: None, with_words=True,
        batch_size=batch_size, train_encoded=_reindexed(train_enc),
        train_heads=[gold_heads(x, s.root) for x in train_sents], eval_heads=[gold_heads(x, s.root) for x in kept],
        tier=tier, train_trees=[Tree.from_sentence(x) for x in train_sents],
        eval_trees=[Tree.from_sentence(x) for x in kept], eval_arcs=[sd_arcs(x) for x in kept], n_train_documents=n_docs,
        settings=s, data_paths=[data_file(data_dir, CORPORA[base]), data_file(data_dir, "gum/documents"),
                                *gum.split_files(data_dir)])


