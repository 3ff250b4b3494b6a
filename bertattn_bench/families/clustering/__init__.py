"""Clark et al. §6, Fig. 6: clustering attention heads by the Jensen–Shannon divergence of their attention.

Clark's distance between heads i and j is ``Σ_{token ∈ data} JS(H_i(token), H_j(token))``: the JS divergence
between the two heads' attention distributions from the same query token. Here it is the *mean* over query
tokens (nats, 0..ln 2), so it is comparable across corpus sizes; a mean is a rescaled sum, so every ranking,
ratio and the MDS map up to scale are Clark's.

Cost is (heads² / 2) x tokens x keys logarithms (the 1,000 §3 segments of ~127 pieces hold ~127,000 query
tokens: several minutes on 2 CPU cores for all of them), so the pass averages over a random ``QUERY_FRACTION``
(5%: ~6,300 query tokens of WikiText-2) of the query tokens: each real token
is kept with that probability, seeded per segment (batch-independent, token-weighted like Clark's sum;
``query_fraction=None`` uses every token, Clark's sum exactly). The §3
statistics of the same segments (all their tokens, :class:`~.common.surface_stats.SurfaceReducer`) come out of the same
forward pass and give each head its behaviour label (§3: [CLS], [SEP], '.'/',', previous/next/current token,
broad). Padded queries never enter (the sample is drawn among real tokens) and padded keys have probability 0.
"""
from __future__ import annotations

# The family as a package (one module per job, as families/coref/): constants, the pass (run.py: the result, the
# Jensen-Shannon kernel, the reducer and the prepare, what the cache key follows), the analyses and the claims'
# metrics, the figure; re-exported here so that ``from bertattn_bench.families import clustering`` reads as one
# module.
from .constants import *  # noqa: F401,F403
from .figures import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
