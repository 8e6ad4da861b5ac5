"""Attention operators."""
from .continuous import continuous_attention, log_phi2

__all__ = ["continuous_attention", "log_phi2"]
