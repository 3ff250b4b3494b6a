"""Floor 5, training: fine-tuning an encoder (GLUE, ARCT), the shared GLUE pass of the fine-tuning families,
checkpoints, prefix-shared sweeps of head configurations, the probe training loop.
"""
