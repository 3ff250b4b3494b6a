"""Errors that name what the user must fix (file and line, option, model)."""


class BenchError(Exception):
    """Base class: a problem with the user's input or setup, not a bug."""


class ModelLoadError(BenchError):
    """A model could not be loaded; the message names it and says how to provide weights."""


class DataError(BenchError):
    """Bad or missing data; the message names the file (and line) or the option/variable to set."""


class NothingSelected(BenchError):
    """A selection (``-k`` / ``select=``) that matches no test: the command's exit status 5, a raise in the API."""


class CacheWarning(UserWarning):
    """A cache entry was not used (unreadable, foreign, another format) or a result was not cached."""
