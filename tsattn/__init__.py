"""tsattn: time-series forecasting transformers with continuous softmax attention."""
from .ops import continuous_attention, log_phi2

__version__ = "0.1.0"
__all__ = ["continuous_attention", "log_phi2", "__version__"]
