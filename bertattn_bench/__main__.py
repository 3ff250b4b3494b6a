"""``python -m bertattn_bench COMMAND``: the command line (:mod:`bertattn_bench.faces.cli`)."""
import sys

from .faces.cli import console

sys.exit(console())
