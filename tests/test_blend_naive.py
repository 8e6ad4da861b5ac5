"""Blending the forecast with the naive one per output column (``blend_naive``): the least-squares weights by
hand, the blend on both tasks' batches (a target without a naive forecast untouched), and the Forecaster end
to end: the blended validation error at most the model's and the naive forecast's, kept by save / load,
intervals calibrated after it, older checkpoints read as unblended."""
import numpy as np
import pandas as pd
import pytest
import torch

from tsattn import Forecaster
from tsattn.lightning import ForecastModule
from tsattn.lightning.module import naive_weights

from .synthetic import LONG, observations, series

QUIET = dict(logger=False, enable_progress_bar=False, enable_model_summary=False)
TINY_WINDOW = {"patch_len": 8, "stride": 4, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16, "dropout": 0.0}
TINY_IRREGULAR = {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "time_features": 4}


def test_weights_are_the_clipped_least_squares_mix_per_column():
    # column 0: error = 0.5 change -> 0.5; 1: against the change -> 0; 2: twice the change -> clipped to 1;
    # 3: one point (< min_points) -> 1; 4: the model never leaves the naive forecast -> 1
    change = torch.tensor([1.0, 2.0, 1.0, -1.0, 1.0, 3.0, 5.0, 0.0, 0.0])
    error = torch.tensor([0.5, 1.0, -1.0, 2.0, 2.0, 6.0, 1.0, 1.0, -1.0])
    column = torch.tensor([0, 0, 1, 1, 2, 2, 3, 4, 4])
    w = naive_weights(change, error, column, 6, min_points=2)
    torch.testing.assert_close(w, torch.tensor([0.5, 0.0, 1.0, 1.0, 1.0, 1.0], dtype=torch.float64))
    # unclipped, it is the minimiser of the squared error: a nudge either way is worse
    c, e = torch.tensor([1.0, -2.0, 0.5]), torch.tensor([0.3, -0.2, 0.4])
    best = float(naive_weights(c, e, torch.zeros(3, dtype=torch.long), 1, min_points=1))
    loss = lambda w: float(((e - w * c) ** 2).sum())
    assert 0 < best < 1 and loss(best) < loss(best - 1e-3) and loss(best) < loss(best + 1e-3)


def test_window_forecast_moves_towards_the_last_row_by_each_channels_weight():
    torch.manual_seed(0)
    module = ForecastModule("patchtst", n_channels=3, lookback=32, horizon=8, model_kwargs=TINY_WINDOW,
                            target_index=[0, 2]).eval()
    batch = {"x": torch.randn(4, 32, 3), "t_x": None}
    raw = module(batch)                                                   # [B, H, 2]
    module.naive_weight.copy_(torch.tensor([0.0, 0.25]))
    module.naive_blended.fill_(True)
    naive = batch["x"][:, -1, [0, 2]][:, None, :]
    torch.testing.assert_close(module(batch), naive + torch.tensor([0.0, 0.25]) * (raw - naive))


def test_observation_forecast_blends_only_variables_the_history_showed():
    torch.manual_seed(0)
    module = ForecastModule("irregular", n_channels=3, lookback=None, horizon=None, attention="continuous",
                            sink="learned", rope=True, model_kwargs={**TINY_IRREGULAR, "residual": False}).eval()
    batch = {"x_time": torch.tensor([[-5.0, -3.0, -1.0, 0.0]]), "x_var": torch.tensor([[0, 1, 0, 0]]),
             "x_value": torch.tensor([[0.1, 0.7, 0.4, 0.0]]), "x_mask": torch.tensor([[True, True, True, False]]),
             "y_time": torch.tensor([[1.0, 2.0, 3.0]]), "y_var": torch.tensor([[0, 1, 2]]),
             "y_mask": torch.ones(1, 3, dtype=torch.bool)}
    raw = module(batch)                                                   # [1, 3]
    module.naive_weight.copy_(torch.tensor([0.5, 0.0, 0.0]))
    module.naive_blended.fill_(True)
    out = module(batch)
    torch.testing.assert_close(out[0, 0], 0.4 + 0.5 * (raw[0, 0] - 0.4))  # the last of variable 0 (the padding not read)
    torch.testing.assert_close(out[0, 1], torch.tensor(0.7))             # w = 0: the naive forecast
    torch.testing.assert_close(out[0, 2], raw[0, 2])                     # never observed: the model's


def test_window_blend_is_no_worse_than_the_model_or_the_naive_forecast_and_is_saved(tmp_path):
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY_WINDOW, batch_size=64, seed=1)
    f.fit(series(), max_epochs=1, **QUIET)
    assert f.naive_weights is None
    model_mse = f.evaluate("val")["mse"]
    naive = Forecaster("naive", lookback=48, horizon=12).fit(series(), **QUIET).evaluate("val")["mse"]
    f.blend_naive()
    weights = f.naive_weights
    assert list(weights.index) == ["a", "OT"] and ((weights >= 0) & (weights <= 1)).all()
    blended = f.evaluate("val")["mse"]
    assert blended <= min(model_mse, naive) + 1e-9 and blended < max(model_mse, naive)
    frame = series()
    g = Forecaster.load(f.save(tmp_path / "blended.ckpt"))
    pd.testing.assert_series_equal(g.naive_weights, weights)
    pd.testing.assert_frame_equal(g.predict(frame), f.predict(frame), check_exact=True)


def test_observation_blend_on_fit_then_calibrated_intervals():
    table = observations()
    kwargs = dict(lookback=24.0, horizon=12.0, model_kwargs=TINY_IRREGULAR, seed=1, quantiles=[0.1, 0.9])
    plain = Forecaster("irregular", **kwargs).fit(table, max_epochs=1, **LONG, **QUIET)
    f = Forecaster("irregular", calibrate=True, blend_naive=True, **kwargs).fit(table, max_epochs=1, **LONG, **QUIET)
    assert bool(f.module.naive_blended) and bool(f.module.calibrated)
    assert sorted(f.naive_weights.index) == sorted(table["name"].unique())
    assert f.evaluate("val")["mse"] <= plain.evaluate("val")["mse"] + 1e-9   # the same weights, blended
    assert f.evaluate("val")["coverage_80"] >= 0.8                           # calibrated after the blend
    out = f.predict(at=[table["hours"].max() + 1.0])
    assert (out["value-lo-80"] <= out["value"]).all() and (out["value"] <= out["value-hi-80"]).all()


def test_checkpoints_without_the_blend_load_unblended_and_bad_calls_say_so():
    module = ForecastModule("patchtst", n_channels=2, lookback=32, horizon=8, model_kwargs=TINY_WINDOW)
    state = {k: v for k, v in module.state_dict().items() if not k.startswith("naive_")}
    other = ForecastModule("patchtst", n_channels=2, lookback=32, horizon=8, model_kwargs=TINY_WINDOW)
    other.naive_blended.fill_(True)
    other.load_state_dict(state)                                          # strict: an older checkpoint's keys
    assert not bool(other.naive_blended) and torch.equal(other.naive_weight, torch.ones(2))
    with pytest.raises(RuntimeError, match="no model yet"):
        Forecaster("patchtst").blend_naive()
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY_WINDOW, batch_size=64, seed=1)
    f.fit(series(), max_epochs=1, **QUIET)
    with pytest.raises(ValueError, match="split"):
        f.blend_naive(split="validation")
    with pytest.raises(ValueError, match="no targets"):
        f.module.blend_naive([])
    assert np.isfinite(f.evaluate("val")["mse"])                           # a failed blend left the model usable


def test_a_reference_forecast_blends_on_fit_too():
    kwargs = dict(lookback=48, horizon=12, model_kwargs={"season": 24})
    seasonal = Forecaster("seasonal_naive", **kwargs).fit(series(), **QUIET)
    blended = Forecaster("seasonal_naive", blend_naive=True, **kwargs).fit(series(), **QUIET)
    naive = Forecaster("naive", lookback=48, horizon=12).fit(series(), **QUIET)
    assert blended.naive_weights is not None and seasonal.naive_weights is None
    scores = [f.evaluate("val")["mse"] for f in (blended, seasonal, naive)]
    assert scores[0] <= min(scores[1:]) + 1e-9
