"""Niven & Kao 2019 on ARCT, the model-free half: cue statistics (§4, Table 2), the adversarial set's construction
(§6), and the authors' shipped per-seed results (Tables 1, 3, 4) as reference distributions.

Cue statistics (P §4; ``../shared/papers/niven2019-notes.md`` §2), for a cue k (a unigram or bigram of a warrant's
tokens) over n arguments i with warrants T_0, T_1 (token sets) and label y_i:

* applicability α_k = #{i : k is in exactly one of the two warrants} (an integer count);
* productivity π_k = #{i applicable : the warrant holding k is the correct one} / α_k;
* coverage ξ_k = α_k / n.

The paper does not state its tokenisation, so it is a parameter (:data:`TOKENIZATIONS`); no variant reproduces
Table 2, and ``niven.not_table2`` reports that as an open discrepancy. The ``treebank`` variants use NLTK's Penn
Treebank word tokenizer (the one ``word_tokenize`` applies: ``n't``, ``'s`` split off, ``cannot`` → ``can not``,
punctuation split) per sentence split at ``.!?`` + space (``word_tokenize`` first runs Punkt, whose model is a
download; on ARCT's 5,622 sentences this split is what Punkt's would be for the cue counts). It replaced a hand copy
of the rules that left an opening single quote on its word (7 of 5,622 sentences: "'Starchitects'"), which moved
no recorded value.

The family's pass reads data files only: the model under test is not used (its name is kept in the pass result
for the table); the fine-tuned half of the paper is not here.
"""
from __future__ import annotations

from .adversarial import *  # noqa: F401,F403

# The family as a package (one module per concern), re-exported here so that
# ``from bertattn_bench.families import arct`` reads as one module; the cache key follows the prepare's
# module (run.py) and what it imports, never the claims or figures modules.
from .constants import *  # noqa: F401,F403
from .cues import *  # noqa: F401,F403
from .figures import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
from .tokens import *  # noqa: F401,F403
