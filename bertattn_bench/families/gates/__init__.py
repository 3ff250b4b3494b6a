"""Voita et al. 2019 §6: pruning heads by learned Hard Concrete gates beside Michel's importance pruning (the
``gates`` family): the pass (:mod:`.run`), the claim metrics (:mod:`.metrics`, the head roles they read:
:mod:`.roles_read`) and the figure (:mod:`.figures`), re-exported here."""
from __future__ import annotations

from .figures import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
