"""Floor 3, engine: the model-facing code: loading, reading and intervening on attention (the one module that does),
batching, the pass protocol, heads removed from the weights.
"""
