"""Floor 9, faces: the ways in: the Python API, claims along training, the command line, the pytest plugin and its
session, one GPU per xdist worker.
"""
