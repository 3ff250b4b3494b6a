"""Kobayashi et al. 2020 (the norm-based reading ||alpha f(x)||) and 2021 (mixing ratios), beside Clark §3's weights.

On Clark's segments (the surface family's corpora; default ``wikitext2_types01``: token types 0 through the first
[SEP], then 1, as the authors' data_extract.py). Two forward sweeps, both through :mod:`bertattn_bench.engine.attention_norms`:

* **plain** (the 2020 analyses and the 2021 frequency table): for every (segment, layer, head) the mean over real
  queries of the share to [CLS], [SEP], "." / "," and the pooled special tokens, read three ways: alpha (Clark's
  weights), the per-head ||alpha f|| normalised per query row, and the layer-level ||sum_h alpha f|| normalised per
  query row (as re-examine.py of the authors, 5dc8fb3 emnlp2020/exp1_bert, categories pooled as there); ||f(x)||
  per category; per head the Pearson r between the mean alpha a key receives and its ||f(x)||; per token occurrence
  its mean ||f(x)||, alpha and norm share received and its five mixing ratios averaged over layers (the Spearman
  against the frequency rank of ``kobayashi_norms/rank_count_ids.txt``);
* **masked** (the 2021 Table 1): 12% of each segment's non-special pieces replaced by the mask token
  (``max(1, int(0.12 n))`` positions by ``random.Random(0).sample``, segment by segment in data order, as
  mixing_ratio_stats_bert.py l.62-72), the five mixing ratios pooled over every real (token, layer): mean, max, min,
  and the per-layer means (the figure).
"""
from __future__ import annotations

# The family as a package (its pass and reducers, its metrics, its figures), re-exported here so that
# ``bertattn_bench.families.norms`` reads as one module; the cache key follows the prepare's module (run.py) and what
# it imports, never the metrics or figures modules.
from .figures import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .run import *  # noqa: F401,F403
