"""Kovaleva et al. 2019 §4.2 (Fig. 3) and §5: heads that link a frame-evoking target to its core frame elements.

The paper: for every head, "the maximum absolute attention weight among those token pairs that correspond to the
annotated semantic link" in a sentence, averaged over the sentences; heads above the 99th percentile of the
distribution of values for all heads are the frame-semantic heads (2 of 144, 0.201 and 0.209).

**Default (corpus "notebook"): the authors' code** (text-machine-lab/dark-secrets-of-BERT, ``visualize_attention.ipynb``,
"7. BaseBERT study", ``analyze_sem_links`` and ``get_max_source_target_weight``), on the sentences of
:mod:`bertattn_bench.data.framenet_corpus`'s notebook filters: the input is ``[CLS] sentence [SEP]`` with the sentence cut
to ``NOTEBOOK_MAX_LEN - 3`` = 17 word pieces (``convert_to_bert_tokens(..., max_len=20)``); the target's pieces and the
linked FEs' pieces (concatenated in FE order) are located by the *first* occurrence of the piece string in the input
(``bert_tokens.index``); the pairs are ``zip(FE pieces, target pieces)`` (so a one-piece target pairs only with
the first FE piece) and the score is the max over those pairs of ``attn[FE piece, target piece]`` (from the FE, to
the target: direction ``f2t``); the head's value is the mean over sentences. An example whose target or FE piece is
not in the cut input (the notebook would raise) is left out and counted. ``t2f``/``both`` are the same zipped pairs
in the other / both directions.

**The project's variants** (corpora "one_per_lu", "all"): word-level attention as ``batching.py`` builds it but with
attention *to* a word the **mean** over its pieces (the paper's scale: one piece pair; a sum favours many-piece
words under any diffuse head), [CLS]/[SEP] not words; every (target word, linked FE word) pair, max over pairs, in
``t2f`` (from the target), ``f2t`` (to the target) or ``both`` (their max: those corpora's default).

* **Control** (ours): each linked pair (t, t + d) is replaced by a random pair (t', t' + d) of the same sentence at
  the same signed distance d (pieces of the sentence for the notebook corpus, words otherwise) that is not itself a
  linked pair, ``DRAWS`` seeded draws per sentence (seed = (0, sentence index): independent of batching), scored
  the same way. Where a sentence has no other pair at that distance the linked pair itself is used (conservative:
  it raises the control; counted in ``n_fallback``).
* **A frame-semantic head** must (a) score above the 99th percentile over all heads of the control's values (the
  paper's threshold taken on the null distribution: over the heads' own scores the 99th percentile is passed by
  1% of the heads by construction, e.g. 2 of 144 or 1 of 72, whatever the heads do), and (b) beat its own control:
  the per-sentence difference (score - mean of the draws) is > 0 by a one-sided paired t-test, Bonferroni over
  the L x H heads at alpha = 0.01.

Everything is reduced batch by batch on the model's device (sums, sums of squares, the paper's example sentence's
maps); padded positions never enter.
"""
from __future__ import annotations

# The family as a package (one module per job, as families/coref/): constants, the reducer (reduce.py: the result and
# the reducer), the pass (run.py: the prepare, what the cache key follows), the claims' metrics and the figure; re-
# exported here so that ``from bertattn_bench.families import framenet`` reads as one module.
from .constants import *  # noqa: F401,F403
from .figures import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
