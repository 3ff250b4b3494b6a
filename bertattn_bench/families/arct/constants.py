"""Niven & Kao (the model-free arct family): the paper's cue table, splits and settings."""
from __future__ import annotations






