"""Kovaleva et al. 2019 §4.1 (five attention-map types), §4.4 (attention to special tokens and linguistic features)
and §4.5 (token-to-token attention, the final layer's [CLS] row), on GLUE dev sets and UD English EWT.

**Map types (§4.1).** The authors' CNN and its ~400 hand labels were never released (kovaleva2019-methods-notes.md
§2), so every map (one example, one head) is typed by a stated rule on three features reduced on the device, each
a mean over the map's real query rows (padding never enters):

* ``v``: mass on the special-token columns ([CLS] and every [SEP]: the tokenizer's cls/sep tokens, whichever of
  them is the model's sink);
* ``d``: mass on the previous and next token (the ±1 diagonals), special-token keys excluded (counted in ``v``);
* ``b``: for sentence pairs, how much of a query's attention to ordinary tokens stays in its own sentence, chance-
  corrected: ``(own share - c) / (1 - c)`` with ``c`` the own sentence's share of the ordinary tokens (what uniform
  attention gives), averaged over the ordinary queries; 0 for single sentences (no block type there).

Rule (thresholds :data:`STRUCTURED`, :data:`MIX`, :data:`BLOCK`): a map with ``v + d >= 0.5`` (most of its mass on
special tokens and neighbours) is *vertical* when ``d`` is under a quarter of ``v + d``, *diagonal* when ``v`` is,
else *vertical+diagonal*; an unstructured map of a pair whose ``b >= 0.6`` is *block*; everything else is
*heterogeneous* (so the five types are exhaustive, as the paper's). Uniform attention over n tokens has
``v ~ 3/n``, ``d ~ 2/n``, ``b = 0``: heterogeneous. Why these thresholds: 0.5 = the map's majority of mass is
explained by the two "pre-training" patterns (the paper's first three types); a quarter of that mass is the least a
second component needs to be visible as a mix (Fig. 1's vertical+diagonal example shows both clearly); 0.6 = well
clear of chance (0) and of an even blend of own-sentence and uniform attention (b = 0.5), so only maps whose rows
mostly stay inside their sentence are blocks. No labels exist to tune them on (the paper's ~400 were not released):
they are fixed here, proved on planted maps and mixtures on both sides of each (tests/test_patterns.py), and the
measured shares are reported with n.

**Features (§4.4)**: the paper's score of a feature in one head and input: the attention the feature's token
receives from every input token, summed and divided by the input's length, the maximum over the tokens of that type
when there are several (two [SEP]s in a pair, several nouns); inputs without the feature are left out. [CLS],
[SEP] and punctuation on the GLUE task; nouns (NOUN, PROPN), pronouns, verbs, subjects (nsubj, nsubj:pass), direct
objects (obj), punctuation and the footnote's negation words on UD EWT (GLUE has no tags, and no tagger runs
offline; UD splits "don't" into "do" + "n't", so the footnote's contractions are its "n't" word).

**§4.5**: per head the attention from a verb to its nominal subject (word level: from = mean over the verb's pieces,
to = sum over the subject's pieces, Clark §4.1) on UD EWT, beside the head's ±1-neighbour mass ``d``; and the final
layer's [CLS] query row split into [CLS], [SEP], punctuation and other tokens: each class's largest weight on one of
its tokens (the notebook's ``cls_last_layer``, visualize_attention.ipynb cell 53), its per-token mean and its total.

Each pass runs the pre-trained model and, where the tier has one, the fine-tuned checkpoint of the task (from
``finetune``'s cache, the same as the ``finetune``/``disable`` families: regression tier MRPC seed 0;
``BERTATTN_SEED=k`` reads seed k's checkpoint instead, which is how scripts/spread.py measures the seed spread behind
the fine-tuned claims' tolerances).
"""
from __future__ import annotations

# The family as a package (one module per concern), re-exported here so that
# ``from bertattn_bench.families import patterns`` reads as one module; the cache key follows the prepare's
# module (run.py) and what it imports, never the claims or figures modules.
from .constants import *  # noqa: F401,F403
from .figures import *  # noqa: F401,F403
from .maps import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
