"""bertattn-bench: the claims of the BERT attention-analysis papers as runnable, parametrized checks."""

__version__ = "0.1.0"
