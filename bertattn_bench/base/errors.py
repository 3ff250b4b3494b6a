"""Errors that name what the user must fix (file and line, option, model)."""


class BenchError(Exception):
    """Base class: a problem with the user's input or setup, not a bug."""


class ModelLoadError(BenchError):
    """A model could not be loaded; the message names it and says how to provide weights."""


class DataError(BenchError):
    """Bad or missing data; the message names the file (and line) or the option/variable to set."""


class NothingSelected(BenchError):
    """A selection (``-k`` / ``select=``) that matches no test: the command's exit status 5, a raise in the API."""


def one_line(exc: BaseException, limit: int = 200) -> str:
    """``"Type: first line of its message"`` (cut at ``limit`` characters): an underlying error quoted inside one of
    our own one-line messages; an exception without a message gives its type alone."""
    text = str(exc).splitlines()
    return f"{type(exc).__name__}: {text[0][:limit]}" if text else type(exc).__name__


class CacheWarning(UserWarning):
    """A cache entry was not used (unreadable, foreign, another format) or a result was not cached."""
