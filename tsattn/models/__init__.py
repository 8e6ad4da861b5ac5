"""Forecasting models: a window [B, L, C] (+ knot times [B, L]) -> a forecast [B, H, C]."""
from .decoder import PatchDecoder
from .patchtst import PatchTST
from .registry import MODELS, get_model_class

__all__ = ["MODELS", "PatchDecoder", "PatchTST", "get_model_class"]
