"""Small synthetic series and tiny models, so Lightning-level tests take seconds."""
import numpy as np
import pandas as pd
import pytest
import torch


def synthetic_frame(rows: int = 900, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.arange(rows)
    return pd.DataFrame({
        "date": pd.date_range("2021-01-01", periods=rows, freq="h"),
        "load": 10 + 3 * np.sin(2 * np.pi * t / 24) + 0.3 * rng.standard_normal(rows),
        "temp": 5 + np.cos(2 * np.pi * t / 48) + 0.2 * rng.standard_normal(rows),
        "OT": 50 + 8 * np.sin(2 * np.pi * t / 24 + 1.0) + 0.5 * rng.standard_normal(rows),
    })


@pytest.fixture
def frame() -> pd.DataFrame:
    return synthetic_frame()


@pytest.fixture
def csv_path(tmp_path, frame):
    path = tmp_path / "series.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def tiny() -> dict:
    """model_kwargs of a one-layer PatchTST that trains in well under a second per epoch."""
    return {"patch_len": 8, "stride": 4, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16, "dropout": 0.1}


@pytest.fixture
def tiny_decoder() -> dict:
    return {"patch_len": 8, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16, "dropout": 0.1}


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
