"""Clark §6 (the clustering family): the query sample, the permutation test, the MDS seed, the kernel's chunk and the
§3 behaviour labels."""
from __future__ import annotations

QUERY_FRACTION = 0.05  # of the query tokens: ~6,300 on the 1,000 WikiText-2 segments
QUERY_SEED = 0
N_PERMUTATIONS = 1000
PERMUTATION_SEED = 0
MDS_SEED = 0
CHUNK_ELEMENTS = 1 << 24  # floats in one (heads, rows, keys) temporary (64 MB)

# §3 behaviours (label, statistic): a head whose mean share on the target exceeds BEHAVIOR_SHARE gets the label
BEHAVIOR_TARGETS = (("[CLS]", "to_cls"), ("[SEP]", "to_sep"), (". ,", "to_punct"),
                    ("previous", "prev"), ("next", "next"), ("current", "self"))
BEHAVIOR_SHARE = 0.5
BROAD_QUANTILE = 0.75  # "broad": mean entropy in the top quartile of the model's heads
OTHER = "other"
