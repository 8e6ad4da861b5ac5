"""The error metrics by hand: pooled and per-group MSE / MAE / RMSE / sMAPE, MASE and its in-sample
naive scales (seasonal for regular series, last observation for irregular ones), a forecast table's
metrics."""
import numpy as np
import pandas as pd
import pytest
import torch

from tsattn.data.observations.observation_set import ObservationSet
from tsattn.data.observations.samples import naive_errors
from tsattn.data.windows.calendar import seasonal_naive_mae, seasonal_period
from tsattn.metrics import GroupedError, PerVariableError, PointError, backtest_metrics, mase


def test_pooled_and_per_group_errors_by_hand():
    pred = torch.tensor([1.0, 2.0, 0.0, 4.0])
    target = torch.tensor([2.0, 2.0, 0.0, 1.0])
    group = torch.tensor([0, 0, 1, 1])
    point = PointError(2)
    point.update(pred, target, group)
    out = point.compute()
    assert out["mse"].item() == pytest.approx((1 + 0 + 0 + 9) / 4)
    assert out["mae"].item() == pytest.approx((1 + 0 + 0 + 3) / 4)
    assert out["rmse"].item() == pytest.approx(np.sqrt(10 / 4))
    # sMAPE: 200|e| / (|y| + |p|), the point where both are 0 left out
    assert out["smape"].item() == pytest.approx((200 / 3 + 0 + 200 * 3 / 5) / 3)
    torch.testing.assert_close(point.per_group_mae(), torch.tensor([0.5, 1.5], dtype=torch.float64))
    per = PerVariableError(3)
    per.update(pred, target, group, torch.tensor([True, True, True, True]))
    assert per.compute()["mse"].item() == pytest.approx((0.5 + 4.5) / 2)  # group 2 has no point: left out
    with pytest.raises(ValueError, match="reduction"):
        GroupedError(2, "mean")


def test_mase_leaves_out_groups_without_a_scale():
    mae = torch.tensor([1.0, 2.0, float("nan"), 3.0], dtype=torch.float64)
    scale = torch.tensor([2.0, 0.0, 1.0, 3.0], dtype=torch.float64)
    assert mase(mae, scale).item() == pytest.approx((0.5 + 1.0) / 2)
    assert torch.isnan(mase(mae, torch.zeros(4, dtype=torch.float64)))


@pytest.mark.parametrize("freq, m", [("h", 24), ("15min", 96), ("10min", 144), ("D", 7), ("B", 5), ("W", 52),
                                     ("MS", 12), ("ME", 12), ("QS", 4), ("YS", 1), ("7min", 1), ("2D", 1)])
def test_seasonal_period(freq, m):
    assert seasonal_period(freq) == m


def test_seasonal_naive_mae():
    values = np.array([[1.0, 0.0], [2.0, 0.0], [4.0, 1.0], [4.0, 3.0]])
    np.testing.assert_allclose(seasonal_naive_mae(values, 1), [1.0, 1.0])
    np.testing.assert_allclose(seasonal_naive_mae(values, 2), [2.5, 2.0])
    assert np.isnan(seasonal_naive_mae(values, 4)).all()


def test_naive_errors_follow_each_variable_within_its_series():
    obs = ObservationSet(series_ids=np.array(["a", "b"]), offsets=np.array([0, 5, 7]),
                         time=np.array([0.0, 1, 2, 3, 4, 0, 1]), variable=np.array([0, 1, 0, 1, 0, 0, 0]),
                         value=np.array([1.0, 10, 3, 14, 2, 100, 101]), variables=("x", "y"))
    rows = np.ones(len(obs.value), dtype=bool)
    # x: a 1 -> 3 -> 2 (|2|, |1|), b 100 -> 101 (|1|); never across series (3 -> 100); y: 10 -> 14
    np.testing.assert_allclose(naive_errors(obs, rows), [4 / 3, 4.0])


def test_table_metrics_by_group_and_intervals():
    frame = pd.DataFrame({"cutoff": [0, 0, 1, 1], "variable": ["a", "b", "a", "b"],
                          "forecast": [1.0, 2.0, 3.0, 4.0], "forecast-lo-80": [0.0, 1.0, 2.0, 3.5],
                          "forecast-hi-80": [2.0, 3.0, 4.0, 4.5], "observed": [1.5, 2.0, 5.0, 4.0]})
    overall = backtest_metrics(frame).iloc[0]
    assert overall["mse"] == pytest.approx((0.25 + 0 + 4 + 0) / 4) and overall["coverage_80"] == 0.75
    q = {0.1: frame["forecast-lo-80"], 0.5: frame["forecast"], 0.9: frame["forecast-hi-80"]}
    want = np.mean([np.mean(np.maximum(k * (frame["observed"] - v), (k - 1) * (frame["observed"] - v)))
                    for k, v in q.items()])
    assert overall["quantile_loss"] == pytest.approx(want)
    by = backtest_metrics(frame, by="cutoff")
    assert list(by.index) == [0, 1] and by.loc[1, "mae"] == pytest.approx(1.0)
    per = backtest_metrics(frame, per_variable=True, naive_scale={"a": 2.0, "b": 1.0}).iloc[0]
    assert per["mae"] == pytest.approx(np.mean([(0.5 + 2) / 2, 0.0]))
    assert per["mase"] == pytest.approx(np.mean([1.25 / 2.0, 0.0]))
