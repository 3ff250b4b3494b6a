"""Clark §5 probes: their names, sizes, training settings and budget tiers."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .structural import StructuralSettings

PROBE_NAMES = {"attn": "Attn", "attn_words": "Attn + words", "dist_words": "Distances + words",
               "random_init": "Random-init Attn + words", "right_branching": "right-branching"}
RANDOM_INIT_SEED = 1  # the random-init baseline model's weights (all but the embeddings)


@dataclass(frozen=True)
class ProbeSettings:
    """Sizes and training hyper-parameters (ours: Clark §5 gives none). Sized for the CI budget on 2 CPU cores."""

    n_train: int = 800  # sentences sampled from the GUM train documents
    n_eval: int | None = 1000  # eval sentences, a seeded sample of the corpus; None = all
    seed: int = 0  # the train and eval samples (the data: n depends on it)
    train_seed: int | None = None  # probe initialisation and training order; None = ``seed`` ($BERTATTN_SEED sets it)
    n_seeds: int = 1  # training seeds from ``training_seed`` on (the features are extracted once and shared)
    epochs: int = 6
    batch_sentences: int = 16
    lr_attn: float = 0.1
    lr_words: float = 0.01
    lr_dist: float = 0.01
    dist_hidden: int = 256  # Clark's released probe: one hidden layer of 256 tanh units
    root: bool = True  # Clark's ROOT candidate (scored from attention to/from [CLS]/[SEP]); root words are scored
    trees: str = "sd"  # gold trees: "sd" (``sd_like``, as Clark's SD) or "ud" (the corpus variants ending in _ud)
    eval_elements: int = 4_000_000  # eval buckets hold at most this many map entries (memory)
    structural: StructuralSettings = field(default_factory=StructuralSettings)  # H&M probe (Clark §5's comparison)

    @property
    def training_seed(self) -> int:
        return self.seed if self.train_seed is None else self.train_seed

    @property
    def training_seeds(self) -> tuple[int, ...]:
        return tuple(range(self.training_seed, self.training_seed + max(self.n_seeds, 1)))

    def for_seed(self, seed: int) -> "ProbeSettings":
        """These settings with one training seed of :attr:`training_seeds`, the data samples kept: the first is these
        settings themselves; each further seed moves the structural probe's seed by as much as the probes'."""
        shift = seed - self.training_seed
        return replace(self, train_seed=seed, n_seeds=1,
                       structural=replace(self.structural, seed=self.structural.seed + shift) if shift else
                       self.structural)

    @classmethod
    def with_seed(cls, seed: int | None = None) -> "ProbeSettings":
        """The defaults, with the run's training seed (its ``seed`` option, ``$BERTATTN_SEED`` as the face read it;
        None: 0, the recorded baseline's) for the three probes and the structural probe alike; the data samples keep
        seed 0."""
        seed = cls.seed if seed is None else seed
        return cls(train_seed=seed, structural=StructuralSettings(seed=seed))


# Tiers (as the fine-tuning families'): the quick tier (smoke run) trains on 300 GUM train sentences and evaluates
# 300; the regression tier trains on a seeded sample of 800 and evaluates 1000, the full tier trains on every one
# (Clark trained on all of PTB train). The regression and full tiers train three seeds from the run's on the same
# features (issue 61: judged on their own spread); the quick tier one (it reads the recorded spread).
TIERS = {"quick": {"n_train": 300, "n_eval": 300}, "regression": {"n_train": 800, "n_seeds": 3},
         "full": {"n_train": None, "n_seeds": 3}}
PROBE_CORPORA = ("ewt_dev", "ewt_test", "gum_dev", "gum_test")  # + "_ud": gold trees as UD releases them
