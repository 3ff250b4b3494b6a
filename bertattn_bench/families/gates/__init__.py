"""Voita et al. 2019 §6: pruning heads by learned Hard Concrete gates beside Michel's importance pruning (the
``gates`` family): the pass (:mod:`.run`) and the claim metrics (:mod:`.metrics`), re-exported here."""
from __future__ import annotations

from .metrics import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
