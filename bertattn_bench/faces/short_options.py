"""The short option spellings of the pytest face (``--model``, ``--data-dir``, ``--tier``, ...), as a plugin of its
own: the repository's conftest.py and the ``bertattn-bench`` command load it (``-p bertattn_bench.faces.short_options``),
the entry point does not, so installing the package never claims generic option names in another project."""
from .pytest_options import add_options


def pytest_addoption(parser):
    add_options(parser, short=True)
