"""Floor 7, report: tables and files from plain values: the claims report (terminal, Markdown, CSV, JSON, HTML), the
claims x models matrix, the CI job summary.
"""
