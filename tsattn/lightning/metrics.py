"""``tsattn.metrics`` under its earlier name."""
from ..metrics import PerVariableError, per_variable_mean

__all__ = ["PerVariableError", "per_variable_mean"]
