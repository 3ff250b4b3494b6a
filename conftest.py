"""Loads the bertattn-bench pytest plugin (options --model, --data-dir, --device, --claims-report, ...)."""
pytest_plugins = ["bertattn_bench.faces.pytest_plugin", "bertattn_bench.faces.short_options", "pytester"]
