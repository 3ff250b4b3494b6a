"""Niven & Kao 2019 on ARCT, the model-free half: cue statistics (§4, Table 2), the adversarial set's construction (settings)."""
from __future__ import annotations






