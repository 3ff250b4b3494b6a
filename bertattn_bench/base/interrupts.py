"""Ctrl-C at any moment exits 2 with one line (issue 45), the end of a run included.

While a run finishes (its report and baseline being written, pytest's shutdown) a Ctrl-C must neither leave a
traceback nor exit 130 (Python's status for an uncaught interrupt): :class:`ShutdownGuard` takes SIGINT for that
stretch. The first Ctrl-C prints one line and lets what is being written finish (the writes are atomic, but an
interrupted report would be lost), then the run exits 2 (pytest's "interrupted"); a second one stops at once, also
with status 2. Installed only from the main thread (signal handlers cannot be set elsewhere)."""
from __future__ import annotations

import os
import signal
import sys
import threading

INTERRUPTED = 2  # pytest's ExitCode.INTERRUPTED, the suite's status for a run stopped by the user


class ShutdownGuard:
    """SIGINT during the end of a run: one line, finish, exit 2 (``hits``: how many Ctrl-Cs came)."""

    def __init__(self, what: str = "the run was finishing", stream=None):
        self.what = what
        self.stream = stream
        self.hits = 0
        self.closing = False  # past the point where an exit status can still be returned: exit at once

    def install(self) -> bool:
        if threading.current_thread() is not threading.main_thread():
            return False
        signal.signal(signal.SIGINT, self._handler)
        return True

    def _handler(self, signum, frame) -> None:
        self.hits += 1
        if self.hits == 1:
            stream = self.stream or sys.stderr
            try:
                print(f"bertattn-bench: interrupted (Ctrl-C) while {self.what}: "
                      + ("stopping now" if self.closing else "finishing the report, then exit status 2"),
                      file=stream, flush=True)
            except (OSError, ValueError):  # a closed or broken stream: the status still says it
                pass
        if self.closing or self.hits > 1:
            stop_now()

    @property
    def interrupted(self) -> bool:
        return self.hits > 0


def stop_now() -> None:
    """Exit 2 at once (output flushed first): no traceback, no further cleanup that a second Ctrl-C refused."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(INTERRUPTED)


_BEFORE_EXIT: list = []  # callables run before the start-up line is printed (pytest: suspend its output capture)


def _startup_handler(signum, frame) -> None:
    for release in _BEFORE_EXIT:
        try:
            release()
        except Exception:  # noqa: BLE001 - the line and the status matter more
            pass
    try:
        print("bertattn-bench: interrupted (Ctrl-C) while starting (nothing was run): exit status 2", file=sys.stderr,
              flush=True)
    except (OSError, ValueError):
        pass
    stop_now()


def guard_startup(before_exit=None) -> bool:
    """From here until :func:`release_startup` (the tests about to run), a Ctrl-C prints one line and exits 2 at
    once: start-up (imports, options, collection) has computed nothing that could be lost, and Python's or pytest's
    own handling would print a traceback or a banner (and exit 130 before pytest's session exists)."""
    if before_exit is not None:
        _BEFORE_EXIT.append(before_exit)
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _startup_handler):
        signal.signal(signal.SIGINT, _startup_handler)
        return True
    return False  # ignored (a background job) or someone else's handler: left as it is


def release_startup() -> None:
    """Hand SIGINT back to Python's KeyboardInterrupt (pytest's, then the run's, handling of an interrupted run)."""
    _BEFORE_EXIT.clear()
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is _startup_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
