"""Small synthetic series and tiny models, so Lightning-level tests take seconds."""
import pytest


@pytest.fixture
def tiny() -> dict:
    """model_kwargs of a one-layer PatchTST that trains in well under a second per epoch."""
    return {"patch_len": 8, "stride": 4, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16, "dropout": 0.1}


@pytest.fixture
def tiny_decoder() -> dict:
    return {"patch_len": 8, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16, "dropout": 0.1}
