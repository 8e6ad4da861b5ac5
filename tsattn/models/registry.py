"""Model registry: the names the CLI, the API and save/load use for the model classes."""
from __future__ import annotations

from torch import nn

from .decoder import PatchDecoder
from .irregular import IrregularTransformer
from .patchtst import PatchTST

MODELS: dict[str, type[nn.Module]] = {
    "patchtst": PatchTST,
    "decoder": PatchDecoder,
    "irregular": IrregularTransformer,
}


def input_kind(cls: type[nn.Module]) -> str:
    """What a model reads: "window" (a grid window [B, L, C] + knot times) or "observations"
    (irregular observation sets, see ``IrregularTransformer.forward``)."""
    return getattr(cls, "input_kind", "window")


def get_model_class(name: str) -> type[nn.Module]:
    """The model class registered as ``name``; ValueError listing the known names otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known models: {sorted(MODELS)}") from None
