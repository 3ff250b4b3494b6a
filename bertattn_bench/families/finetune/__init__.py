"""Kovaleva et al. 2019 §4.3 and Table 1: fine-tuned, un-tuned and random-init models on GLUE, and how much
fine-tuning changes each layer's attention.

The ``finetune`` family's pass, per (model, task): the model fine-tuned with every seed of the tier (checkpoints
from ``bertattn_bench.training.glue_finetune``'s cache), the pre-trained model with an untrained head (Table 1 "pre-trained"),
the constant predictors, the randomly initialised twin fine-tuned with the same recipe (Table 1 "random init";
skipped when the model is itself the twin), and the per-layer cosine between the pre-trained and fine-tuned
attention maps on at most 1000 dev examples (Fig. 5; padded rows and columns excluded, unlike the authors'
notebook, which flattened padded 200 x 200 maps).
"""
from __future__ import annotations

# The family as a package (one module per job, as families/coref/): the pass (run.py: the result, the attention-change
# reducer, the pass and the prepare, what the cache key follows), the claims' metrics and the figure; re-exported here
# so that ``from bertattn_bench.families import finetune`` reads as one module.
from .figures import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
