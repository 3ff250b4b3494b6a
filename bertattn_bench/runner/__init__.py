"""Floor 8, runner: the run as a library (models, selections, passes, the pass cache, claims, baselines, the report),
and the architecture matrix. Imports no face.
"""
