"""Abnar & Zuidema 2020 (attention rollout and flow) and Brunner et al. 2020 (effective attention, identifiability):
does attention explain what the model uses? The ``explain`` family, as a package: its pass (``run``), one example's
readings (``measure``), its claims' metrics (``metrics``) and budgets (``constants``); docs/families/explain.md.
Re-exported here; the cache key follows the prepare's module (run.py) and what it imports."""
from .constants import *  # noqa: F401,F403
from .figures import *  # noqa: F401,F403
from .measure import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
