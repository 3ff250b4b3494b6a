"""Floor 6, families: one module (or package) per claim family, each with its pass, ``@family`` prepare, ``@metric``
functions and ``@figure`` writer; the registry finds them by name.
"""
