"""Continuous softmax attention: the op (reference, PyTorch path, Triton kernel, CPU kernel)."""
from .api import BACKENDS, continuous_attention
from .phi import log_phi2
from .reference import continuous_attention_reference

__all__ = ["BACKENDS", "continuous_attention", "continuous_attention_reference", "log_phi2"]
