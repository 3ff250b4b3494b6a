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

# The family as a package (one module per job, as families/prune/): constants, the reducer (masking and the gradient
# core), the MLM head's check and load, the pass (run.py: the pass and its prepare, what the cache key follows),
# the claims' metrics and the figure; re-exported here so that ``from bertattn_bench.families import gradient``
# reads as one module.
from .constants import *  # noqa: F401,F403
from .figures import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .mlm_head import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
