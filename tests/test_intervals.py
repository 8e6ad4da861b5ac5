"""Rolling conformal recalibration (``tsattn.intervals.rolling_calibration`` and
``Forecaster.backtest(recalibrate=N)``): nothing at or after a window's cutoff moves its interval, each
window's shift is the conformal quantile of the scores of the N windows observed before it, coverage
follows a change of regime that a fixed interval misses, and bad requests are clear errors."""
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from tsattn import Forecaster
from tsattn.data.errors import DataError
from tsattn.intervals import interval_levels, rolling_calibration
from tsattn.metrics import backtest_metrics

from . import synthetic
from .synthetic import LONG
from .test_backtest import QUIET, TINY_IRREGULAR, TINY_WINDOW


def frame(n_windows: int = 200, h: int = 4, noise: np.ndarray | None = None, seed: int = 0) -> pd.DataFrame:
    """A backtest-shaped frame: hourly cutoffs 0..K-1, targets at cutoff + 1..h, two variables, a fixed
    interval [-1, 1] around a zero forecast, observed noise of the given scale per window."""
    rng = np.random.default_rng(seed)
    noise = np.ones(n_windows) if noise is None else noise
    k, s, v = np.meshgrid(np.arange(n_windows), np.arange(1, h + 1), [0, 1], indexing="ij")
    k, s, v = k.ravel(), s.ravel(), v.ravel()
    out = pd.DataFrame({"cutoff": k.astype(float), "time": (k + s).astype(float),
                        "variable": np.where(v == 0, "a", "b"), "step": s, "forecast": 0.0,
                        "forecast-lo-80": -1.0, "forecast-hi-80": 1.0,
                        "observed": rng.normal(size=k.size) * noise[k] * np.where(v == 0, 1.0, 2.0)})
    out.attrs.update(time_column="time", variable_column="variable")
    return out


def test_a_window_reads_only_windows_observed_before_its_cutoff():
    base = frame()
    got = rolling_calibration(base, windows=30)
    cutoff = 120.0
    changed = base.copy()
    changed.loc[changed["time"] >= cutoff, "observed"] = 1e3                    # every value from the cutoff on
    again = rolling_calibration(changed, windows=30)
    upto = base["cutoff"] <= cutoff
    for column in ("forecast-lo-80", "forecast-hi-80"):
        np.testing.assert_array_equal(again.loc[upto, column], got.loc[upto, column])
    later = base["cutoff"] >= cutoff + 10
    assert (again.loc[later, "forecast-hi-80"] > got.loc[later, "forecast-hi-80"]).all()   # and later ones do see it


def test_the_shift_is_the_conformal_quantile_of_the_previous_windows_scores():
    base, n = frame(h=4), 25
    got = rolling_calibration(base, windows=n, min_points=1)
    w = 100                                                                      # cutoff 100: windows 0..95 end before
    earlier = base[(base["cutoff"] >= 95 - n + 1) & (base["cutoff"] <= 95) & (base["variable"] == "b")]
    scores = np.sort(np.maximum(-1 - earlier["observed"], earlier["observed"] - 1) / 2.0)
    q = scores[min(math.ceil((len(scores) + 1) * 0.8), len(scores)) - 1]
    row = got[(got["cutoff"] == w) & (got["variable"] == "b")]
    np.testing.assert_allclose(row["forecast-hi-80"], 1 + 2 * q)
    np.testing.assert_allclose(row["forecast-lo-80"], -1 - 2 * q)
    assert (got["forecast"] == base["forecast"]).all()
    first = got[got["cutoff"] <= 4]                                             # nothing observed before: as it was
    assert (first["forecast-hi-80"] == 1.0).all()


def test_coverage_follows_a_change_of_regime_that_a_fixed_interval_misses():
    noise = np.r_[np.full(400, 1.0), np.full(400, 3.0)]
    base = frame(800, noise=noise, seed=1)
    got = rolling_calibration(base, windows=50)
    calm, wild = base["cutoff"] < 400, base["cutoff"] >= 460
    fixed = backtest_metrics(base[wild])["coverage_80"].iloc[0]
    assert fixed < 0.45                                                          # the fixed interval misses
    for part in (base["cutoff"].between(100, 399), wild):
        assert backtest_metrics(got[part])["coverage_80"].iloc[0] == pytest.approx(0.8, abs=0.04)
    assert got.loc[wild, "forecast-hi-80"].mean() > 2.5 * got.loc[calm & (base["cutoff"] > 100), "forecast-hi-80"].mean()
    assert got.attrs["rolling_calibration"] == 50 and interval_levels(got) == ["80"]


def test_series_are_recalibrated_on_their_own_windows():
    a, b = frame(120, seed=2), frame(120, noise=np.full(120, 4.0), seed=3)
    both = pd.concat([a.assign(id="a"), b.assign(id="b")], ignore_index=True)
    both.attrs.update(a.attrs, id_column="id")
    got = rolling_calibration(both, windows=20)
    alone = rolling_calibration(a, windows=20)
    np.testing.assert_array_equal(got.loc[both["id"] == "a", "forecast-hi-80"], alone["forecast-hi-80"])


def test_bad_requests_are_errors_naming_the_fix():
    base = frame(20)
    with pytest.raises(ValueError, match="positive number of earlier windows"):
        rolling_calibration(base, windows=0)
    with pytest.raises(ValueError, match="no intervals"):
        rolling_calibration(base.drop(columns=["forecast-lo-80"]), windows=5)
    with pytest.raises(ValueError, match="lacks the column"):
        rolling_calibration(base.drop(columns=["observed"]), windows=5)


# -- through Forecaster.backtest --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def window_model():
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY_WINDOW, lr=3e-3, lr_schedule="constant",
                   batch_size=32, seed=0, quantiles=[0.1, 0.5, 0.9], calibrate=True)
    return f.fit(synthetic.series(600, 0), target="OT", max_epochs=1, limit_train_batches=4, limit_val_batches=2,
                 **QUIET)


def test_window_backtest_recalibrates_the_last_windows_on_earlier_ones(window_model):
    data = synthetic.series(600, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = window_model.backtest(data, n_windows=40)
        got = window_model.backtest(data, n_windows=40, recalibrate=30)
        longer = window_model.backtest(data, n_windows=40 + 30 + 13)
    assert got["cutoff"].nunique() == 40 and list(got.columns) == list(plain.columns)
    np.testing.assert_allclose(got["forecast"], plain["forecast"], rtol=1e-6, atol=1e-6)
    want = rolling_calibration(longer, 30)
    want = want[want["cutoff"] >= plain["cutoff"].min()].reset_index(drop=True)
    np.testing.assert_allclose(got["forecast-hi-80"], want["forecast-hi-80"], rtol=1e-6, atol=1e-6)
    assert not np.allclose(got["forecast-hi-80"], plain["forecast-hi-80"])
    with pytest.raises(DataError, match="recalibrate=500 backtests 513 earlier windows"):
        window_model.backtest(data, n_windows=40, recalibrate=500)
    with pytest.raises(ValueError, match="recalibrate=0"):
        window_model.backtest(data, n_windows=40, recalibrate=0)


def test_observation_backtest_recalibrates_per_series_and_point_models_refuse():
    data = synthetic.observations(6, 96, 0, resolution=0.5, id_format="p{:02d}")
    f = Forecaster("irregular", lookback=24.0, horizon=12.0, model_kwargs=TINY_IRREGULAR, batch_size=4, seed=0,
                   quantiles=[0.1, 0.5, 0.9])
    f.fit(data, origins=[24.0, 48.0], split_fractions=[0.5, 0.25, 0.25], max_epochs=1, **QUIET, **LONG)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = f.backtest(data, n_windows=3, step=4.0, recalibrate=4)
        plain = f.backtest(data, n_windows=3, step=4.0)
    assert got.groupby("patient")["cutoff"].nunique().eq(3).all()
    pd.testing.assert_frame_equal(got.drop(columns=["forecast-lo-80", "forecast-hi-80"]),
                                  plain.drop(columns=["forecast-lo-80", "forecast-hi-80"]))
    assert got.attrs["id_column"] == "patient"
    assert (got["forecast-hi-80"] != plain["forecast-hi-80"]).mean() > 0.5                # recalibrated
    point = Forecaster("naive", lookback=24, horizon=6).fit(synthetic.series(200, 0), target="OT")
    with pytest.raises(ValueError, match="quantile model"):
        point.backtest(n_windows=3, recalibrate=5)
