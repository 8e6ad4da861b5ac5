"""Forecasting models, each registered with its task (``registry``): a window [B, L, C] (+ knot times
[B, L]) -> a forecast [B, H, C] (PatchTST, the patch decoder), or irregular observation sets ->
forecasts at query (time, variable) points (the irregular transformer)."""
from . import baselines  # noqa: F401  (registers the reference forecasts)
from .decoder import PatchDecoder
from .irregular import IrregularTransformer
from .patchtst import PatchTST
from .registry import MODELS, get_model_class, model_task, register_model

__all__ = ["MODELS", "IrregularTransformer", "PatchDecoder", "PatchTST", "get_model_class", "model_task",
           "register_model"]
