"""Loads the bertattn-bench pytest plugin (options --model, --data-dir, --device, --claims-report, ...)."""
pytest_plugins = ["bertattn_bench.pytest_plugin", "bertattn_bench.short_options", "pytester"]
