"""The ``explain`` family's budgets and names (Abnar & Zuidema 2020; Brunner et al. 2020)."""
from __future__ import annotations

# Per tier: the dev examples read (the first k of the task's dev split, after the GLUE pass's own cap) and how many
# of them also get attention flow (one max-flow per layer and input token from the [CLS] node: ~0.25 s per MRPC pair
# of ~50 pieces on one CPU core). None: all. The quick tier's 8 examples: 16 took ~81 CPU-seconds (about 5 each:
# blank-out is n forward passes of an n-piece pair, batched; the norm rollout and Brunner's readings two more passes
# and an eigendecomposition per layer), so 8 keep the pass near the 30 s the issue allows on 2 cores.
# "flow_max_examples": how many also get the flow from every output node (the authors' maximum over query rows:
# n times the max-flows of the [CLS] row, ~12 s for an MRPC pair of ~50 pieces), at most FLOW_MAX_PIECES pieces each.
# "identity_fit": the training pairs Brunner's learned (linear) identifiability map is fitted on (their every token).
TIERS = {
    "quick": {"corpora": ("mrpc", "blimp"), "examples": 8, "flow_examples": 8, "flow_max_examples": 0,
              "identity_fit": 64},
    "regression": {"corpora": ("mrpc", "blimp", "blimp-hard"), "examples": 100, "flow_examples": None,
                   "flow_max_examples": 20, "identity_fit": 500},
    # Table 3's protocol (the authors' ~100 SST-2 sentences) on the suite's SST-2 fine-tune, beside MRPC
    "full": {"corpora": ("mrpc", "sst-2", "blimp", "blimp-hard"), "examples": None, "flow_examples": 200,
             "flow_max_examples": 100, "identity_fit": 1000},
}
# Abnar & Zuidema's own task (Tables 1-2): BLiMP's agreement prefixes as verb number (families/explain/run.py
# BlimpExplainPass): the corpus -> the split of data.blimp.Agreement it reads; per tier the first k prefixes (flow
# from every output node on all: ~8 pieces each, L n^2 ~ 400 small max-flows)
BLIMP_CORPORA = {"blimp": "test", "blimp-hard": "hard"}
# "twin": whether the random-init twin (the negative control) gets its own verb-number classifier: from the
# regression tier on (a short task: three epochs of 3,196 prefixes of ~8 pieces); the quick tier leaves it out, as
# the GLUE families leave theirs, to keep command 1 within its time
BLIMP_TIERS = {"quick": {"examples": 32, "twin": False}, "regression": {"examples": 300, "twin": True},
               "full": {"examples": None, "twin": True}}
FLOW_MAX_PIECES = 64  # a longer example gets no flow_max reading (n^2 L max-flows)

TASKS = ("mrpc", "rte", "sst-2", "qnli")  # classification tasks: blank-out reads the gold class's probability

# the relevance readings of each layer (a vector over the input tokens), correlated with each importance
#   raw: the head-averaged map of the layer; rollout: the authors' compute_joint_attention; flow: compute_node_flow;
#   norm_rollout: rollout of Kobayashi's ||sum_h alpha f|| map (rows normalised), a question neither paper asked.
#   "_cls": the [CLS] row (the classifier reads [CLS]); "_max": the maximum over query rows, as the authors'
#   Table-3 script (compute_corel_distilbert_sst.py l.49, l.95, l.103)
READINGS = ("raw_cls", "raw_max", "rollout_cls", "rollout_max", "flow_cls", "flow_max", "norm_rollout_cls")
IMPORTANCES = ("blankout", "gradient")  # gradient: input x gradient, |sum over dims| (measure.importance)
