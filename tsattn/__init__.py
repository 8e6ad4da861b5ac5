"""tsattn: time-series forecasting transformers with continuous softmax attention.

- ``continuous_attention``: the op (fp64 reference, PyTorch path, Triton kernel, CPU kernel).
- ``tsattn.nn`` / ``tsattn.models``: attention layer, PatchTST and a causal patch decoder.
- ``tsattn.data``: CSV -> validated, split, scaled windows; the benchmark dataset registry.
- ``tsattn.lightning``: ``ForecastModule``, ``CSVDataModule``, ``AttentionSwitch``.
- ``Forecaster``: fit / predict / evaluate / save / load on a CSV file; ``tsattn`` CLI.
"""
from .ops import continuous_attention, log_phi2

__version__ = "0.1.0"
__all__ = ["Forecaster", "continuous_attention", "log_phi2", "__version__"]


def __getattr__(name: str):
    # Forecaster pulls in Lightning, pandas and scikit-learn: import it on first use only.
    if name == "Forecaster":
        from .api import Forecaster

        return Forecaster
    raise AttributeError(f"module 'tsattn' has no attribute {name!r}")
