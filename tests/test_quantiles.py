"""Probabilistic forecasts: quantile heads on both tasks, never crossing, the median as the point
forecast, intervals as columns in the input's layout and in units, conformal calibration, and the
errors for quantiles and levels that make no sense."""
import numpy as np
import pandas as pd
import pytest
import torch

from tsattn import Forecaster
from tsattn.lightning import ForecastModule
from tsattn.models import IrregularTransformer, PatchDecoder, PatchTST
from tsattn.tasks.base import quantile_training_loss
from tsattn.tasks.quantiles import QuantileSpec, pinball_loss, quantiles_from

from .synthetic import LONG, observations, series

QUIET = dict(logger=False, enable_progress_bar=False, enable_model_summary=False)
TINY_WINDOW = {"patch_len": 8, "stride": 4, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16, "dropout": 0.0}
TINY_IRREGULAR = {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "time_features": 4}


def test_quantiles_and_levels_are_one_vocabulary():
    assert quantiles_from(None, [80, 95]) == [0.025, 0.1, 0.5, 0.9, 0.975]
    assert quantiles_from([0.1, 0.9], None) == [0.1, 0.5, 0.9]  # the median is always there
    spec = QuantileSpec.of([0.025, 0.1, 0.5, 0.7, 0.9, 0.975])
    assert spec.pairs == ((95.0, 0, 5), (80.0, 1, 4)) and spec.median == 2 and spec.singles == (3,)
    assert [c for c, _ in spec.columns("OT")] == ["OT", "OT-lo-95", "OT-hi-95", "OT-lo-80", "OT-hi-80", "OT-q0.7"]


@pytest.mark.parametrize("kwargs, phrase", [
    (dict(quantiles=[0.1, 1.0]), r"levels in \(0, 1\); got \[1.0\]"),
    (dict(quantiles=[0.0, 0.5]), r"levels in \(0, 1\); got \[0.0\]"),
    (dict(quantiles=[0.9, 0.1]), "increasing, each given once"),
    (dict(quantiles=[0.1, 0.1, 0.9]), "increasing, each given once"),
    (dict(levels=[80, 100]), r"each in \(0, 100\); got \[100.0\]"),
    (dict(levels=[0.8]), None),  # a level of 0.8 % is a (narrow) interval, not an error
    (dict(levels=[80, 80]), "levels repeat"),
    (dict(quantiles=[0.1, 0.9], levels=[80]), "not both"),
    (dict(quantiles="0.9"), "non-empty list of numbers"),
    (dict(calibrate=True), "give quantiles"),
])
def test_bad_quantiles_are_errors_naming_the_fix(kwargs, phrase):
    if phrase is None:
        assert Forecaster("patchtst", **kwargs).config["quantiles"] == [0.496, 0.5, 0.504]
        return
    with pytest.raises(ValueError, match=phrase):
        Forecaster("patchtst", **kwargs)


def test_pinball_loss():
    pred = torch.tensor([[1.0, 2.0, 3.0]])
    loss = pinball_loss(pred, torch.tensor([2.5]), [0.1, 0.5, 0.9])
    assert torch.allclose(loss, torch.tensor([[0.15, 0.25, 0.05]]))


def test_the_centre_trains_with_the_point_loss_and_the_others_with_pinball():
    spec = QuantileSpec.of([0.1, 0.5, 0.9])
    pred, target = torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([2.5])
    pinball = pinball_loss(pred, target, spec.quantiles)[0]                      # [0.15, 0.25, 0.05]
    mixed = quantile_training_loss(pred, target, spec, "mse", 1.0)
    torch.testing.assert_close(mixed, torch.tensor([0.25 + (0.15 + 0.05) / 2]))  # (2 - 2.5)^2 + tails
    torch.testing.assert_close(quantile_training_loss(pred, target, spec, "pinball", 1.0), pinball.mean()[None])
    torch.testing.assert_close(quantile_training_loss(pred, target, spec, "mae", 1.0), torch.tensor([0.5 + 0.1]))
    with pytest.raises(ValueError, match="loss='pinball' trains quantiles"):
        Forecaster("patchtst", loss="pinball").fit(series(), max_epochs=1, **QUIET)


@pytest.mark.parametrize("model", ["patchtst", "decoder"])
def test_window_quantiles_never_cross_and_the_median_is_the_point(model):
    torch.manual_seed(0)
    kwargs = TINY_WINDOW if model == "patchtst" else {"patch_len": 8, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16}
    module = ForecastModule(model, n_channels=2, lookback=32, horizon=8, model_kwargs=kwargs, target_index=[1],
                            quantiles=[0.05, 0.25, 0.5, 0.75, 0.95])
    with torch.no_grad():  # a head whose raw outputs do cross
        module.net.head.weight.normal_(0, 3.0)
    batch = {"x": torch.randn(16, 32, 2), "t_x": None, "y": torch.randn(16, 8, 1)}
    pred = module(batch)                                                            # [B, H, 1, Q]
    assert pred.shape == (16, 8, 1, 5) and bool((pred.diff(dim=-1) >= 0).all())
    loss = module.training_step(batch, 0)
    loss.backward()
    assert torch.isfinite(loss) and module.net.head.weight.grad.abs().sum() > 0


def test_irregular_quantiles_never_cross_and_start_at_the_last_value():
    module = ForecastModule("irregular", n_channels=3, lookback=None, horizon=None, attention="continuous",
                            sink="learned", rope=True, model_kwargs={**TINY_IRREGULAR, "residual": True},
                            quantiles=[0.1, 0.5, 0.9])
    B, N = 4, 10
    batch = {"x_time": -torch.rand(B, N).sort(dim=1).values.flip(1) * 10, "x_var": torch.randint(0, 3, (B, N)),
             "x_value": torch.randn(B, N), "x_mask": torch.ones(B, N, dtype=torch.bool),
             "y_time": torch.rand(B, 5), "y_var": torch.randint(0, 3, (B, 5)), "y_mask": torch.ones(B, 5, dtype=torch.bool),
             "y_value": torch.randn(B, 5)}
    untrained = module(batch)                                                        # [B, Ny, Q]
    assert torch.allclose(untrained[..., 0], untrained[..., 2])  # zero head: all quantiles at the last value
    with torch.no_grad():
        module.net.head.weight.normal_(0, 3.0)
    assert bool((module(batch).diff(dim=-1) >= 0).all())


def test_window_intervals_in_the_inputs_layout_and_units_and_calibrated(tmp_path):
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY_WINDOW, batch_size=64, seed=1, levels=[50])
    f.fit(series(), max_epochs=1, **QUIET)
    out = f.predict()
    assert list(out.columns) == ["a", "a-lo-50", "a-hi-50", "OT", "OT-lo-50", "OT-hi-50"]
    assert (out["OT-lo-50"] <= out["OT"]).all() and (out["OT"] <= out["OT-hi-50"]).all()
    assert 30 < out["OT"].mean() < 70  # in units
    f.calibrate()
    after = f.evaluate("val")["coverage_50"]
    n = len(f.datamodule.val_dataset) * 12
    assert 0.5 <= after <= 0.5 + 2 / n + 0.01  # conformal: the level on the calibration data (up to ties)
    assert bool(f.module.calibrated) and f.module.interval_shift.shape == (1, 2)
    g = Forecaster.load(f.save(tmp_path / "q.ckpt"))
    frame = series()
    pd.testing.assert_frame_equal(g.predict(frame), f.predict(frame), check_exact=True)  # the calibration travels


def test_irregular_intervals_beside_the_value_long_and_wide():
    table = observations()
    f = Forecaster("irregular", lookback=24.0, horizon=12.0, model_kwargs=TINY_IRREGULAR, seed=1,
                   quantiles=[0.1, 0.9], calibrate=True)
    f.fit(table, max_epochs=1, **LONG, **QUIET)
    last = table.groupby("patient")["hours"].max()
    at = pd.DataFrame({"patient": ["p0", "p2"], "hours": [last["p0"] + 2, last["p2"] + 3], "name": ["hr", "temp"]})
    out = f.predict(at=at)
    assert list(out.columns) == ["patient", "hours", "name", "value", "value-lo-80", "value-hi-80"]
    assert (out["value-lo-80"] <= out["value"]).all() and (out["value"] <= out["value-hi-80"]).all()
    assert 55 < out["value"].iloc[0] < 85  # in units
    assert f.evaluate("val")["coverage_80"] >= 0.8
    wide = table.pivot(index=["patient", "hours"], columns="name", values="value").reset_index()
    wide.columns.name = None
    g = Forecaster("irregular", lookback=24.0, horizon=12.0, model_kwargs=TINY_IRREGULAR, seed=1, levels=[80])
    g.fit(wide, id_column="patient", time_column="hours", max_epochs=1, **QUIET)
    out = g.predict(at=[last.max() + 1.0])
    assert list(out.columns) == ["patient", "hours", "hr", "hr-lo-80", "hr-hi-80", "temp", "temp-lo-80", "temp-hi-80"]


def test_point_models_are_unchanged_by_the_output_kind():
    module = ForecastModule("patchtst", n_channels=2, lookback=32, horizon=8, model_kwargs=TINY_WINDOW)
    assert module.quantile_spec is None and "interval_shift" not in dict(module.named_buffers())
    assert module({"x": torch.randn(2, 32, 2)}).shape == (2, 8, 2)


@pytest.mark.parametrize("model", ["patchtst", "decoder", "irregular"])
def test_quantiles_start_together_as_one_forecast(model):
    # every quantile's head rows start as the first's: an untrained interval is a point, not noise
    torch.manual_seed(0)
    if model == "irregular":
        net = IrregularTransformer(2, residual=False, n_quantiles=3, **TINY_IRREGULAR)
        steps, g = 5, torch.Generator().manual_seed(0)
        batch = dict(x_time=-torch.rand(2, 6, generator=g) * 10, x_var=torch.randint(0, 2, (2, 6), generator=g),
                     x_value=torch.randn(2, 6, generator=g), x_mask=torch.ones(2, 6, dtype=torch.bool),
                     y_time=torch.rand(2, steps, generator=g) * 5, y_var=torch.randint(0, 2, (2, steps), generator=g),
                     y_mask=torch.ones(2, steps, dtype=torch.bool))
        out = net(**batch)                                                    # [B, Ny, Q]
    else:
        kwargs = TINY_WINDOW if model == "patchtst" else {"patch_len": 8, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16}
        cls = PatchTST if model == "patchtst" else PatchDecoder
        out = cls(2, 32, 8, n_quantiles=3, **kwargs).eval()(torch.randn(4, 32, 2))   # [B, H, C, Q]
    assert out.shape[-1] == 3 and torch.allclose(out, out[..., :1].expand_as(out))
    assert out[..., 0].std() > 0                                              # the forecast itself varies


def test_calibration_moves_both_ends_by_a_multiple_of_the_width():
    from tsattn.tasks.window import WindowTask

    spec = QuantileSpec.of([0.1, 0.5, 0.9])
    pred = torch.tensor([[[[1.0, 2.0, 3.0]], [[0.0, 2.0, 8.0]]]])               # [B=1, H=2, C=1, Q=3]
    module = ForecastModule("patchtst", n_channels=1, lookback=32, horizon=2, quantiles=spec.quantiles,
                            model_kwargs=TINY_WINDOW)
    module.interval_shift.fill_(0.5)
    module.calibrated.fill_(True)
    out = WindowTask().finish_quantiles(module, pred, None)
    # widths 2 and 8: each end moves out by half a width; the centre stays
    torch.testing.assert_close(out[0, :, 0], torch.tensor([[0.0, 2.0, 4.0], [-4.0, 2.0, 12.0]]))



def test_calibration_floors_collapsed_widths_so_that_no_interval_blows_up(monkeypatch):
    # a head that left most intervals collapsed (width 1e-6) and a few wide: scaled by their own
    # widths alone, the collapsed ones would need a shift of ~1e6 widths, which the wide ones would
    # take too; the floor (the mean absolute error) keeps the shift in typical errors
    module = ForecastModule("patchtst", n_channels=1, lookback=32, horizon=2, quantiles=[0.1, 0.5, 0.9],
                            model_kwargs=TINY_WINDOW)
    g = torch.Generator().manual_seed(0)
    n = 2000
    y = torch.randn(n, generator=g)
    width = torch.full((n,), 1e-6)
    width[:20] = 1.0
    pred = torch.stack([-width / 2, torch.zeros(n), width / 2], dim=-1)
    monkeypatch.setattr(module.task, "calibration_points", lambda m, b: (pred, y, torch.zeros(n, dtype=torch.long)))
    module.calibrate([{}])
    torch.testing.assert_close(module.interval_floor[0, 0], y.abs().mean(), rtol=1e-5, atol=1e-6)
    out = module.task.finish_quantiles(module, pred[:, None, :], None)[:, 0]    # [N, Q]
    covered = ((out[:, 0] <= y) & (y <= out[:, 2])).float().mean()
    assert abs(covered.item() - 0.8) < 0.03
    assert (out[:, 2] - out[:, 0]).max() < 10 * y.abs().mean()


def test_quantile_checkpoints_without_a_floor_still_load():
    module = ForecastModule("patchtst", n_channels=1, lookback=32, horizon=2, quantiles=[0.1, 0.5, 0.9],
                            model_kwargs=TINY_WINDOW)
    state = module.state_dict()
    state.pop("interval_floor")
    state["interval_shift"].fill_(0.25)
    module.interval_floor.fill_(3.0)
    module.load_state_dict(state)
    assert module.interval_shift.eq(0.25).all() and module.interval_floor.eq(0.0).all()


@pytest.mark.parametrize("road", ["window", "observations"])
def test_the_point_forecast_of_a_quantile_model_is_its_point_twins(road):
    # the other quantiles learn from detached features and the head starts as the point head: the
    # same seed and data train the same point forecast (up to floating-point rounding)
    if road == "window":
        make = lambda **q: Forecaster("patchtst", lookback=48, horizon=12, seed=3, batch_size=64,
                                      model_kwargs={**TINY_WINDOW, "dropout": 0.2}, **q)
        data, fit_kwargs = series(), {}
    else:
        make = lambda **q: Forecaster("irregular", lookback=24.0, horizon=12.0, seed=3, model_kwargs=TINY_IRREGULAR, **q)
        data, fit_kwargs = observations(), LONG
    point = make().fit(data, max_epochs=2, **fit_kwargs, **QUIET)
    quantile = make(quantiles=[0.1, 0.5, 0.9]).fit(data, max_epochs=2, **fit_kwargs, **QUIET)
    a, b = point.evaluate("test"), quantile.evaluate("test")
    assert a["mse"] == pytest.approx(b["mse"], rel=1e-4)
    assert b["coverage_80"] > 0                                    # and the tails did learn apart


def test_the_other_quantiles_train_at_a_higher_rate_and_point_models_are_unchanged():
    from tsattn.models.patchtst import QuantileHead

    q = ForecastModule("patchtst", n_channels=1, lookback=32, horizon=2, quantiles=[0.1, 0.5, 0.9],
                       model_kwargs=TINY_WINDOW, lr=1e-4, lr_schedule="constant")
    groups = q.configure_optimizers().param_groups
    assert [g["lr"] for g in groups] == [1e-4, 1e-4 * QuantileHead.TAIL_LR_SCALE]
    assert {id(p) for p in groups[1]["params"]} == {id(q.net.head.tail_weight), id(q.net.head.tail_bias)}
    assert sum(p.numel() for g in groups for p in g["params"]) == sum(p.numel() for p in q.parameters())
    point = ForecastModule("patchtst", n_channels=1, lookback=32, horizon=2, model_kwargs=TINY_WINDOW, lr_schedule="constant")
    assert len(point.configure_optimizers().param_groups) == 1
    assert set(point.net.head.state_dict()) == {"weight", "bias"} <= set(q.net.head.state_dict())


def test_calibration_keeps_widths_that_track_the_error_scale(monkeypatch):
    # a head whose intervals are half as wide as they should be, but in proportion to each point's
    # noise: the calibration widens them by one factor and keeps the proportion (no floor)
    module = ForecastModule("patchtst", n_channels=1, lookback=32, horizon=2, quantiles=[0.1, 0.5, 0.9],
                            model_kwargs=TINY_WINDOW)
    g = torch.Generator().manual_seed(1)
    n = 4000
    sigma = torch.where(torch.arange(n) % 2 == 0, 0.2, 2.0)
    y = sigma * torch.randn(n, generator=g)
    pred = torch.stack([-0.64 * sigma, torch.zeros(n), 0.64 * sigma], dim=-1)
    monkeypatch.setattr(module.task, "calibration_points", lambda m, b: (pred, y, torch.zeros(n, dtype=torch.long)))
    module.calibrate([{}])
    assert module.interval_floor[0, 0] < 0.1 * y.abs().mean() + 1e-6
    out = module.task.finish_quantiles(module, pred[:, None, :], None)[:, 0]
    width = out[:, 2] - out[:, 0]
    torch.testing.assert_close(width[1] / width[0], torch.tensor(10.0), rtol=1e-4, atol=0)
    for part in (slice(0, None, 2), slice(1, None, 2)):                     # each scale covered
        covered = ((out[part, 0] <= y[part]) & (y[part] <= out[part, 2])).float().mean()
        assert abs(covered.item() - 0.8) < 0.04


def test_window_units_follow_the_axes_not_the_sizes():
    # horizon = channels = quantiles = 3: a target [B, H, C] is not mistaken for quantiles [B, H, C, Q]
    module = ForecastModule("patchtst", n_channels=3, lookback=32, horizon=3, quantiles=[0.1, 0.5, 0.9],
                            model_kwargs=TINY_WINDOW)
    module.y_scale.copy_(torch.tensor([1.0, 10.0, 100.0]))
    module.y_mean.copy_(torch.tensor([0.0, 1.0, 2.0]))
    batch = None                                                              # as module.to_original(pred) passes it
    target = module.task.to_original(module, torch.ones(2, 3, 3), batch)
    torch.testing.assert_close(target, torch.tensor([1.0, 11.0, 102.0]).expand(2, 3, 3))
    quantiles = module.task.to_original(module, torch.ones(2, 3, 3, 3), batch)
    torch.testing.assert_close(quantiles, torch.tensor([1.0, 11.0, 102.0])[:, None].expand(2, 3, 3, 3))
