"""Data loaders. Every path is resolved under the data directory setting (``--data-dir`` / ``BERTATTN_DATA_DIR``)."""
