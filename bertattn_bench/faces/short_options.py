"""The short option spellings of the pytest face (``--model``, ``--data-dir``, ``--tier``, ...), as a plugin of its
own: the repository's conftest.py and the ``bertattn-bench`` command load it (``-p bertattn_bench.faces.short_options``),
the entry point does not, so installing the package never claims generic option names in another project.

It also takes Ctrl-C during start-up (from its import to the end of collection) for runs of the suite itself: one
line, exit status 2, where pytest would print a traceback (exit 130) or a banner (:mod:`bertattn_bench.base.interrupts`).
"""
from ..base.interrupts import guard_startup, release_startup
from .pytest_options import add_options

guard_startup()


def pytest_addoption(parser):
    add_options(parser, short=True)


def pytest_configure(config):
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:  # the line must reach the terminal, not pytest's capture of collection's output
        guard_startup(lambda: capture.stop_global_capturing())


def pytest_collection_finish(session):
    release_startup()  # the tests run: an interrupted run is pytest's and the report's (complete: false)


def pytest_unconfigure(config):
    release_startup()
