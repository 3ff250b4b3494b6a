"""Niven & Kao 2019 on ARCT, the fine-tuned half (family ``arct_ft``): the paper's two-warrant model
(``bertattn_bench.training.arct_finetune``) fine-tuned from the model under test over several seeds, per setting (corpus):

* ``full``, ``w``, ``rw``, ``cw``: the input modes of P Table 3, trained/validated/tested on the original ARCT
  (1210 / 316 / 444 arguments);
* ``adv``: the adversarial protocol of the errata (train on original + warrant-swapped, 2420; validate and test on
  the claim-negated sets + originals, 632 / 888). Its accuracy is pooled over both halves of the 888 test rows, as
  Table 4 (correctly rounded; the paper's ``np.ceil`` artifact is the model-free family's business).

Beside each setting the authors' shipped per-seed runs (``results_from_paper``) are the reference distributions.
Tiers: the quick (CI, on the first 400 examples) and regression tiers train one short seed: the ``full`` setting, seed 0, one epoch (``SHORT_EPOCHS``), a
smoke run of the whole training path whose claims are judged and recorded like any other (its data column says
"1 epoch": an under-trained model, not the paper's setting); the full tier trains seeds 0-4 per setting with the
5-epoch recipe on the model and, for the negative control, ``TWIN_SEEDS`` on its random-init twin (only the ``full``
setting's claims are about learned structure; the twin is not trained in the regression tier).
"""
from __future__ import annotations

# The family as a package (one module per job, as families/coref/): constants, the pass (run.py: the recipe per tier,
# the result, the pass and the prepare, what the cache key follows), the claims' metrics and the figure; re-exported
# here so that ``from bertattn_bench.families import arct_ft`` reads as one module.
from .constants import *  # noqa: F401,F403
from .figures import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
