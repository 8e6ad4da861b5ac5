"""plot_forecast: the history, the observed future, the forecast and shaded intervals, for a regular
channel (lines) and an irregular variable (points at their own times)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tsattn.plotting import interval_columns, plot_forecast  # noqa: E402


def test_a_regular_channel_with_two_intervals():
    times = pd.date_range("2024-01-01", periods=30, freq="h")
    history = pd.DataFrame({"OT": np.arange(24.0)}, index=times[:24])
    forecast = pd.DataFrame({"OT": [24.0] * 6, "OT-lo-80": [23.0] * 6, "OT-hi-80": [25.0] * 6,
                             "OT-lo-95": [22.0] * 6, "OT-hi-95": [26.0] * 6}, index=times[24:])
    observed = pd.DataFrame({"OT": np.arange(24.0, 30.0)}, index=times[24:])
    assert interval_columns(forecast, "OT") == [(95.0, "OT-lo-95", "OT-hi-95"), (80.0, "OT-lo-80", "OT-hi-80")]
    ax = plot_forecast(forecast, "OT", history, observed)
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["history", "observed", "forecast"]
    assert len(ax.collections) == 2                          # one shaded band per interval
    np.testing.assert_allclose(ax.get_lines()[2].get_ydata(), 24.0)
    plt.close(ax.figure)


def test_irregular_variable_of_one_series_at_its_own_times():
    table = pd.DataFrame({"id": ["a", "a", "a", "b", "a"], "t": [0.0, 1.5, 4.0, 1.0, 2.5],
                          "var": ["hr", "hr", "temp", "hr", "hr"], "value": [70.0, 72, 37, 90, 71]})
    forecast = pd.DataFrame({"id": ["a", "a"], "t": [5.0, 7.0], "var": ["hr", "hr"], "value": [71.0, 70.0],
                             "value-lo-80": [68.0, 66.0], "value-hi-80": [74.0, 75.0]})
    cols = dict(series="a", id_column="id", time_column="t", variable_column="var")
    ax = plot_forecast(forecast, "hr", history=table, **cols)
    history, median = ax.get_lines()
    np.testing.assert_allclose(history.get_xdata(), [0.0, 1.5, 2.5])     # series a's hr only, in time order
    assert history.get_marker() == "o" and median.get_label() == "forecast" and len(ax.collections) == 1
    plt.close(ax.figure)
    # a backtest frame: the forecast and observed values under their own columns
    frame = forecast.rename(columns=lambda c: c.replace("value", "forecast")).assign(observed=[70.5, 69.0])
    ax = plot_forecast(frame, "hr", observed=frame, forecast_column="forecast", observed_column="observed", **cols)
    assert [line.get_label() for line in ax.get_lines()] == ["observed", "forecast"]
    plt.close(ax.figure)


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="forecast has no column 'OT'"):
        plot_forecast(pd.DataFrame({"a": [1.0]}), "OT")
    with pytest.raises(ValueError, match="variable_column= and value_column="):
        plot_forecast(pd.DataFrame({"t": [1.0], "name": ["hr"], "v": [1.0]}), "hr", time_column="t",
                      variable_column="name")
    plt.close("all")
