"""Floor 2, claims: the claims as data and their verdicts: the catalog (``reference_numbers/*.toml``), the metric and
family registry, tiers, the statistics layer, the learned-model guard, recorded baselines. Knows no model.
"""
