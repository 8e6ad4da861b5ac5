"""The window seam: a model of the window task defined in this file alone (registered here, no edit
anywhere else) fits, forecasts and round-trips through ``Forecaster``, the CLI and save / load."""
from typing import Optional, Union

import numpy as np
import pandas as pd
import pytest
import torch
from torch import Tensor, nn

from tsattn import Forecaster
from tsattn.cli import main as cli_main
from tsattn.models.registry import register_model, unregister_model
from tsattn.tasks import WindowModel


class LinearWindow(nn.Module):
    """Each channel's next H rows as a linear map of its last L rows (shared over channels)."""

    channel_independent = True

    def __init__(self, n_channels: int, lookback: int, horizon: int, *, attention: str = "softmax",
                 sink: str = "zeros", rope: bool = False) -> None:
        super().__init__()
        self.map = nn.Linear(lookback, horizon)

    def forward(self, x: Tensor, t_x: Optional[Tensor] = None) -> Tensor:
        return self.map(x.transpose(1, 2)).transpose(1, 2)           # [B, L, C] -> [B, H, C]

    def training_pairs(self, x: Tensor, t_x: Optional[Tensor], y: Tensor,
                       index: Union[list[int], slice]) -> tuple[Tensor, Tensor]:
        return self(x, t_x)[..., index], y


@pytest.fixture
def registered():
    register_model("linear_window", task="window")(LinearWindow)
    yield "linear_window"
    unregister_model("linear_window")


def test_a_window_model_in_one_file_fits_predicts_and_round_trips(registered, make_frame, tmp_path):
    assert isinstance(LinearWindow(2, 24, 6), WindowModel)
    path = tmp_path / "series.csv"
    make_frame(rows=400).to_csv(path, index=False)
    f = Forecaster(registered, lookback=24, horizon=6, lr=1e-2, lr_schedule="constant", batch_size=32, seed=1)
    f.fit(path, target="OT", max_epochs=2, logger=False, enable_progress_bar=False)
    out = f.predict()
    assert out.shape == (6, 3) and np.isfinite(out.to_numpy()).all()
    assert f.evaluate("test")["mse"] < 1.0  # learnt something: the mean forecast scores 1 on scaled data
    g = Forecaster.load(f.save(tmp_path / "m.ckpt"))
    pd.testing.assert_frame_equal(g.predict(), out, check_exact=True)


def test_a_window_model_in_one_file_trains_from_the_cli(registered, make_frame, tmp_path):
    path = tmp_path / "series.csv"
    make_frame(rows=400).to_csv(path, index=False)
    root = tmp_path / "run"
    cli_main(["fit", "--model.model", registered, "--model.lr", "0.01", "--model.lr_schedule", "constant",
              "--data.data", str(path), "--data.lookback", "24", "--data.horizon", "6", "--data.target", "OT",
              "--trainer.max_epochs", "1", "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
              "--trainer.default_root_dir", str(root)])
    ckpt = next(root.rglob("*.ckpt"))
    g = Forecaster.load(ckpt)
    assert g.predict().shape == (6, 3) and g.data_record["task"] == "window"
    torch.testing.assert_close(g.module.y_mean, torch.as_tensor(g.data_record["fitted"]["scaler"]["offset"],
                                                                 dtype=torch.float32))
