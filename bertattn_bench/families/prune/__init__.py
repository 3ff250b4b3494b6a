"""Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?" (§3-§4, §6) on the fine-tuned models.

The ``prune`` family's pass, per (model, GLUE task) and every seed of the tier, on the checkpoints that the
``finetune``/``disable`` families share (``finetune.finetuned``, same recipe: no extra fine-tune):

* **Importance** (§4.1, Eq. 2): I_h = E_x |∂L(x)/∂ξ_h| with one gate ξ_h = 1 per (example, layer, head)
  (``attention.head_gate_gradients(per_example=True)``: the paper's per-example absolute value, one forward/backward
  per batch), the model in eval mode (no dropout, as the authors' ``calculate_head_importance``), over a seeded
  subset of the **training** set (``IMPORTANCE_EXAMPLES``; never the dev set, the HF bertology pitfall). The raw
  scores are kept; the default score is ℓ2-normalised per layer (Molchanov et al., the paper's §4.1; the authors'
  ``--normalize_pruning_by_layer``). The authors' code takes |·| per token position, not per example
  (michel2019-notes.md §6): we follow the paper.
* **One batched sweep** (``sweeps.sweep(kind="mask")``: ξ_h = 0 on the head's output after dropout, each batch
  row its own configuration): none, every single head (§3.2: Δ and the exact McNemar test per head), the pruning
  curve (§4.2: 10% of all heads per step, floor(L·H·k/10) heads for k = 1..9, in order of increasing importance
  computed once, as the authors' ``heads_pruning.sh``) and the model with only each layer's most important head.
* **Full tier** (a second sweep on the first seed, ``EXTRA_SEEDS``, and more passes): the curve with importance recomputed before every step on the
  masked model (the authors' ``--exact_pruning``), in the order of the single-head Δ (the paper's Fig. 3 dashed
  curve) and in 3 seeded random orders (chance); all heads but one in a layer (§3.3, Table 3: L·H
  configurations); on MRPC the single-head sweep again on STS-B dev binarised (score ≥ 4 = paraphrase: a stated
  substitute for MNLI-matched vs mismatched, §3.4); importance at fine-tuning step 0 and after epoch 1 (a stated
  substitute for §6's training from scratch).

MNLI (the paper's BERT task) is not in the shared GLUE copy: the claims run on MRPC (regression tier), RTE, STS-B and
SST-2 (full tier). STS-B is a regression task: no paired test (its significance claims skip).
"""
from __future__ import annotations

# The family as a package (one module per concern), re-exported here so that
# ``from bertattn_bench.families import pruning`` reads as one module; the cache key follows the prepare's
# module (run.py) and what it imports, never the claims or figures modules.
from .constants import *  # noqa: F401,F403
from .figures import *  # noqa: F401,F403
from .measure import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
