"""Clark et al. §5, Table 3: attention-based probing classifiers for dependency parsing.

The model's attention is held fixed; small graph-based probes are trained on its word-level attention maps
(Clark §4.1 pooling: sum over the pieces attended to, mean over the pieces attending; [CLS]/[SEP] dropped).
For dependent j and candidate head i, with α^k_ij the attention from word i to word j in head k (all L·H heads):

* **Attention-Only**: p(i | j) ∝ exp(Σ_k w_k α^k_ij + u_k α^k_ji); only w and u are trained (and ρ, below).
* **ROOT** (Clark's released probe, ``Syntax_Analysis.ipynb``): every dependent has one more candidate, ROOT, scored
  with the same per-map weights from the attention between the word and the model's special tokens:
  ρ_start α(j → [CLS]) + ρ_end α(j → [SEP]) (weighed by u) and ρ_start α([CLS] → j) + ρ_end α([SEP] → j) (by w), ρ
  two learned scalars. Root words are trained on and scored (head = ROOT), as Clark's, who skips only ``punct``.
* **Attention-and-Words**: the weights become W_k,:(v_i ⊕ v_j) and U_k,:(v_i ⊕ v_j). Clark's v are GloVe vectors;
  GloVe is not available offline, so v is **the model's own input word-piece embedding averaged over the word's
  pieces** (a deviation), L2-normalised, with a constant 1 appended (a per-head bias, started from the trained
  Attention-Only weights).
* Baselines: right-branching (the head is the next word; a root word is always a miss); **distances + words**, as
  Clark's released probe (fn. 4): one hidden layer of 256 tanh units on v_i, v_j and his distance features — how
  far the candidate is ahead, how far behind, each over the sentence length, indicators for offsets 0/±1/±2 — and
  a ROOT indicator (ROOT's word vector is zero); and
  **random init**, the Attention-and-Words probe on a model of the same config with random weights except the
  embeddings, copied from the model under test. For a model that is itself randomly initialised (the negative
  control) that baseline *is* the model, and its own probe is reused.

Candidates are the other words of the sentence and ROOT (``ProbeSettings.root``; off: no ROOT, root words neither
trained on nor scored, UAS as syntax.py's "All"); ``punct`` dependents are neither. The best single head, Table 3's
comparison, cannot pick ROOT: on the probes' arcs each root word is a miss for it. Training data: GUM train
documents (``gum/documents`` files whose ``# newdoc id`` is in neither UD GUM dev nor test), in the regression tier a
seeded sample of sentences, in ``--tier full`` every sentence (Clark trained on all of PTB train); evaluation: a
seeded sample of the dev set. Training: Adam on mini-batches of length-sorted sentences in a seeded order, a fixed
number of epochs (Clark: one epoch, one sentence per step, lr 0.002); deterministic on one device. n is reported
with every value.
"""
from __future__ import annotations

# The family as a package: settings, data, reduce (the features), models (the probes), run (the pass and its
# prepare), structural (Hewitt & Manning's probe), claims (the metrics). Re-exported here, so
# ``from bertattn_bench.families import probes`` reads as one module; importing the package registers the family,
# its metrics and nothing else.
from .constants import *  # noqa: F401,F403
from .data import *  # noqa: F401, F403
from .metrics import *  # noqa: F401,F403
from .models import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
from .structural import *  # noqa: F401,F403
