"""Backtests on both tasks: the tidy frame's columns and alignment, nothing read at or after a cutoff,
the frame's metrics equal to ``evaluate``'s on the same windows, the reference forecasts, the
in-sample warning and the errors for windows that make no sense."""
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from tsattn import Forecaster
from tsattn.data.errors import DataError, DataWarning
from tsattn.metrics import backtest_metrics

from . import synthetic
from .synthetic import LONG

QUIET = dict(logger=False, enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)
TINY_WINDOW = {"patch_len": 8, "stride": 4, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16, "dropout": 0.0}
TINY_IRREGULAR = {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "time_features": 4}


def series(rows: int = 600, seed: int = 0) -> pd.DataFrame:
    return synthetic.series(rows, seed)


def observations(n_series: int = 10, hours: int = 48, seed: int = 0) -> pd.DataFrame:
    return synthetic.observations(n_series, hours, seed, resolution=0.5, id_format="p{:02d}")


@pytest.fixture(scope="module")
def window_model(tmp_path_factory):
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY_WINDOW, lr=3e-3, lr_schedule="constant",
                   batch_size=32, seed=0, quantiles=[0.1, 0.5, 0.9])
    return f.fit(series(), target="OT", max_epochs=1, limit_train_batches=4, limit_val_batches=2, **QUIET)


@pytest.fixture(scope="module")
def observation_model():
    f = Forecaster("irregular", lookback=24.0, horizon=24.0, model_kwargs=TINY_IRREGULAR, batch_size=4, seed=0)
    return f.fit(observations(), origins=[24.0], split_fractions=[0.6, 0.2, 0.2], max_epochs=1, **QUIET, **LONG)


# -- the window task ------------------------------------------------------------------------------------
def test_window_frame_columns_and_alignment():
    df = series()
    f = Forecaster("naive", lookback=48, horizon=12).fit(df, target="OT", **QUIET)
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # the last windows lie in the test rows: no warning
        frame = f.backtest(n_windows=3, step=5, horizon=6)
    assert list(frame.columns) == ["cutoff", "date", "variable", "step", "forecast", "observed"]
    assert len(frame) == 3 * 6 * 2 and list(frame["variable"].unique()) == ["a", "OT"]
    assert list(frame["step"].unique()) == [1, 2, 3, 4, 5, 6]
    N = len(df)
    starts = [N - 6 - 10, N - 6 - 5, N - 6]        # the last window's targets end with the data
    assert list(frame["cutoff"].unique()) == list(df["date"].iloc[[s - 1 for s in starts]])
    for s, (cutoff, window) in zip(starts, frame.groupby("cutoff", sort=True)):
        ot = window[window["variable"] == "OT"]
        np.testing.assert_array_equal(ot["date"], df["date"].iloc[s:s + 6])
        np.testing.assert_allclose(ot["observed"], df["OT"].iloc[s:s + 6])
        # the naive forecast is the value at the cutoff row: the last one the forecast could see
        np.testing.assert_allclose(ot["forecast"], df["OT"].iloc[s - 1], rtol=1e-5)


def test_window_backtest_reads_nothing_at_or_after_a_cutoff(window_model):
    df = series()
    full = window_model.backtest(df, n_windows=20, step=7)
    cutoff = full["cutoff"].unique()[4]
    start = int(np.flatnonzero(df["date"] == cutoff)[0]) + 1
    changed = df.copy()
    changed.loc[start:, ["a", "OT"]] = 1e4          # every row at and after the origin, garbage
    again = window_model.backtest(changed, n_windows=20, step=7)
    cols = ["forecast", "forecast-lo-80", "forecast-hi-80"]
    np.testing.assert_allclose(again.loc[again["cutoff"] == cutoff, cols], full.loc[full["cutoff"] == cutoff, cols],
                               rtol=1e-5, atol=1e-5)
    # and the window is the same one a backtest of the data cut just after its targets gives last
    last = window_model.backtest(df.iloc[:start + 12], n_windows=1)
    np.testing.assert_allclose(last[cols], full.loc[full["cutoff"] == cutoff, cols], rtol=1e-5, atol=1e-5)


def test_window_frame_metrics_equal_evaluate_on_the_test_windows(window_model):
    n_test = len(window_model.datamodule.split_dataset("test"))
    frame = window_model.backtest(n_windows=n_test, step=1)
    got = backtest_metrics(frame).iloc[0]
    want = window_model.evaluate("test")
    for name in ("mse", "mae", "rmse", "smape", "mase"):
        assert got[name] == pytest.approx(want[f"{name}_orig" if name != "mase" else name], rel=1e-4), name
    assert got["coverage_80"] == pytest.approx(want["coverage_80"], abs=1e-9)
    assert got["quantile_loss"] == pytest.approx(want["quantile_loss_orig"], rel=1e-4)
    by_cutoff, by_step = backtest_metrics(frame, by="cutoff"), backtest_metrics(frame, by="step")
    assert len(by_cutoff) == n_test and list(by_step.index) == list(range(1, 13))
    assert by_step["mae"].mean() == pytest.approx(got["mae"], rel=1e-9)  # equal steps per window


def test_window_backtest_warns_of_in_sample_windows_and_refuses_what_does_not_fit(window_model):
    with pytest.warns(DataWarning, match="of the train segment, which the model was fit on"):
        window_model.backtest(n_windows=400, step=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # other data: no claim about what the model saw
        window_model.backtest(series(seed=3), n_windows=400, step=1)
    with pytest.raises(DataError, match=r"n_windows=1000 do not fit the data: 600 rows hold at most 541"):
        window_model.backtest(n_windows=1000)
    with pytest.raises(DataError, match="step must be"):
        window_model.backtest(n_windows=2, step=0)
    with pytest.raises(DataError, match=r"horizon of 24 rows is longer than the model's \(12\)"):
        window_model.backtest(horizon=24)
    with pytest.raises(ValueError, match="cutoffs= applies to observation models"):
        window_model.backtest(cutoffs=["2022-01-10"])


def test_reference_forecasts_fit_without_training_and_beat_what_they_should():
    df = series(rows=1200)
    scores = {}
    for name in ("naive", "seasonal_naive", "mean"):
        f = Forecaster(name, lookback=48, horizon=24).fit(df, target="OT", **QUIET)
        assert f.module.net.trainable is False
        scores[name] = f.evaluate("test")
    # the series repeats every 24 rows: the seasonal naive forecast beats the last value
    assert scores["seasonal_naive"]["mae_orig"] < scores["naive"]["mae_orig"]
    # MASE against the in-sample seasonal naive error: about 1 for the seasonal naive forecast itself
    assert 0.8 < scores["seasonal_naive"]["mase"] < 1.25
    with pytest.raises(ValueError, match="gives point forecasts only"):
        Forecaster("naive", lookback=48, horizon=24, levels=[80]).fit(df, target="OT", **QUIET)


# -- the observation task -------------------------------------------------------------------------------
def test_observation_frame_columns_and_alignment(observation_model):
    data = observations()
    frame = observation_model.backtest(data, cutoffs=[12.0, 24.0], horizon=12.0)
    assert list(frame.columns) == ["patient", "cutoff", "hours", "name", "lead", "forecast", "observed"]
    assert set(frame["cutoff"]) == {12.0, 24.0}
    assert ((frame["lead"] >= 0) & (frame["lead"] < 12.0)).all()
    np.testing.assert_allclose(frame["hours"] - frame["cutoff"], frame["lead"])
    # every observation in [cutoff, cutoff + 12) is a target, with its own value
    want = data[(data["hours"] >= 24.0) & (data["hours"] < 36.0)]
    got = frame[frame["cutoff"] == 24.0]
    assert len(got) == len(want)
    merged = got.merge(want, on=["patient", "hours", "name"])
    np.testing.assert_allclose(merged["observed"], merged["value"])


def test_observation_backtest_reads_nothing_at_or_after_a_cutoff(observation_model):
    data = observations()
    frame = observation_model.backtest(data, cutoffs=[20.0], horizon=12.0)
    changed = data.copy()
    later = changed["hours"] >= 20.0
    changed.loc[later, "value"] = 1e4
    again = observation_model.backtest(changed, cutoffs=[20.0], horizon=12.0)
    np.testing.assert_allclose(again["forecast"], frame["forecast"], rtol=1e-5, atol=1e-5)
    assert (again["observed"] == 1e4).all()


def test_observation_frame_metrics_equal_evaluate_on_the_test_series(observation_model):
    dm = observation_model.datamodule
    ids = dm.observations.series_ids[dm.split_series("test")]
    test_rows = observations()[lambda d: d["patient"].isin(ids)]
    frame = observation_model.backtest(test_rows, cutoffs=[24.0])
    got = backtest_metrics(frame).iloc[0]
    want = observation_model.evaluate("test")  # the fit data's test series
    assert frame.attrs["per_variable"] is True
    for name in ("mse", "mae", "rmse", "smape"):
        assert got[name] == pytest.approx(want[f"{name}_orig"], rel=1e-4), name


def test_observation_rolling_cutoffs_and_errors(observation_model):
    data = observations()
    frame = observation_model.backtest(data, n_windows=2, step=6.0, horizon=12.0)
    last = data.groupby("patient")["hours"].max()
    cutoffs = frame.groupby("patient")["cutoff"].unique()
    for patient, values in cutoffs.items():
        np.testing.assert_allclose(sorted(values), [last[patient] - 18.0, last[patient] - 12.0])
    with pytest.raises(DataError, match="step=0"):
        observation_model.backtest(data, n_windows=2, step=0, horizon=12.0)
    with pytest.raises(DataError, match=r"horizon of 48 time units is longer than the model's \(24\)"):
        observation_model.backtest(data, horizon=48.0)
    with pytest.raises(DataError, match="fit no series"):
        observation_model.backtest(data, cutoffs=[500.0])
    with pytest.warns(DataWarning, match="in-sample"):
        observation_model.backtest(cutoffs=[24.0])


def test_observation_reference_forecasts():
    data = observations()
    opts = dict(origins=[24.0], split_fractions=[0.6, 0.2, 0.2], **QUIET, **LONG)
    last = Forecaster("last_observation", lookback=24.0, horizon=24.0).fit(data, **opts)
    mean = Forecaster("variable_mean", lookback=24.0, horizon=24.0).fit(data, **opts)
    a, b = last.evaluate("test"), mean.evaluate("test")
    assert np.isfinite(a["mae_orig"]) and np.isfinite(b["mae_orig"]) and a["mae_orig"] != b["mae_orig"]
    frame = last.backtest(data, cutoffs=[24.0])
    # the last-observation forecast of a target is the variable's last value before the cutoff
    hist = data[data["hours"] < 24.0].groupby(["patient", "name"])["value"].last()
    want = hist.reindex(pd.MultiIndex.from_frame(frame[["patient", "name"]])).to_numpy()
    np.testing.assert_allclose(frame["forecast"], want, rtol=1e-5)
    assert torch.isfinite(last.module.naive_scale).all()


def test_seasonal_naive_takes_the_data_season_unless_given(tmp_path):
    rng = np.random.default_rng(0)
    t = np.arange(400)
    daily = pd.DataFrame({"date": pd.date_range("2020-01-01", periods=400, freq="D"),
                          "OT": 10 + 3 * np.sin(2 * np.pi * t / 7) + 0.1 * rng.standard_normal(400)})
    f = Forecaster("seasonal_naive", lookback=28, horizon=10).fit(daily, **QUIET)
    assert f.module.net.season == 7                                       # a week of daily rows
    g = Forecaster("seasonal_naive", lookback=28, horizon=10, model_kwargs={"season": 14}).fit(daily, **QUIET)
    assert g.module.net.season == 14
    again = Forecaster.load(f.save(tmp_path / "seasonal.ckpt"))
    pd.testing.assert_frame_equal(again.predict(daily), f.predict())
    np.testing.assert_allclose(f.predict()["OT"].to_numpy()[:7], daily["OT"].to_numpy()[-7:], rtol=1e-5)
    with pytest.raises(ValueError, match=r"`season` must be an integer in \[1, lookback=28\]"):
        Forecaster("seasonal_naive", lookback=28, horizon=10, model_kwargs={"season": 48}).fit(daily, **QUIET)
