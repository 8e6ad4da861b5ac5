"""Knot times: a regular series gives arange; an irregular one (Metro) gives its gaps."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tsattn.data import CSVDataModule, DataError, read_series


def test_regular_series_gives_arange(etth1):
    L, H = 336, 96
    for ds in (etth1.train_dataset, etth1.test_dataset):
        for i in (0, 17, len(ds) - 1):
            item = ds[i]
            torch.testing.assert_close(item["t_x"], torch.arange(L, dtype=torch.float32))
            torch.testing.assert_close(item["t_y"], torch.arange(L, L + H, dtype=torch.float32))


def test_irregular_synthetic_times_in_median_steps():
    stamps = pd.to_datetime(["2021-01-01 00:00", "2021-01-01 01:00", "2021-01-01 02:00", "2021-01-01 04:00",
                             "2021-01-01 05:00", "2021-01-01 05:30"])
    frame = pd.DataFrame({"ds": stamps, "v": np.arange(6.0)})
    table = read_series(frame)
    assert table.step == pd.Timedelta("1h") and table.time_column == "ds"
    np.testing.assert_allclose(table.knot_times, [0, 1, 2, 4, 5, 5.5])
    assert read_series(frame, knot_times="index").knot_times.tolist() == [0, 1, 2, 3, 4, 5]


def test_datetime_index_is_used_as_time():
    frame = pd.DataFrame({"v": np.arange(5.0)}, index=pd.date_range("2020-01-01", periods=5, freq="D"))
    table = read_series(frame)
    assert table.freq == "D" and table.time_column is None and table.knot_times.tolist() == [0, 1, 2, 3, 4]


def test_sort_opt_in():
    frame = pd.DataFrame({"date": ["2021-01-01 02:00", "2021-01-01 00:00", "2021-01-01 01:00"], "v": [2.0, 0.0, 1.0]})
    table = read_series(frame, sort=True)
    assert table.values[:, 0].tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("policy, expected", [("first", [0.0, 1.0, 3.0]), ("last", [0.0, 2.0, 3.0]),
                                              ("mean", [0.0, 1.5, 3.0])])
def test_duplicate_policies(policy, expected):
    frame = pd.DataFrame({"date": ["2021-01-01 00:00", "2021-01-01 01:00", "2021-01-01 01:00", "2021-01-01 02:00"],
                          "v": [0.0, 1.0, 2.0, 3.0]})
    table = read_series(frame, duplicates=policy)
    assert table.values[:, 0].tolist() == expected and len(table.timestamps.unique()) == 3


def test_ffill_carries_the_last_value_forward():
    frame = pd.DataFrame({"date": ["2021-01-01 00:00", "2021-01-01 01:00", "2021-01-01 03:00", "2021-01-01 04:00"],
                          "v": [0.0, None, 3.0, None]})
    assert read_series(frame, missing="ffill").values[:, 0].tolist() == [0.0, 0.0, 3.0, 3.0]


# -- Metro Interstate Traffic Volume: repeated timestamps, text columns, a 307-day gap --------------------
@pytest.fixture(scope="module")
def metro(metro_path):
    dm = CSVDataModule(str(metro_path), 48, 24, features="MS", target="traffic_volume", duplicates="first")
    dm.setup()
    return dm


def test_metro_reads_with_duplicates_aggregated(metro):
    table = metro.table
    assert len(table) == 48204 - 7629  # one row per distinct timestamp
    assert table.dropped_columns == ("holiday", "weather_main", "weather_description")  # text columns
    assert metro.channel_names == ["temp", "rain_1h", "snow_1h", "clouds_all", "traffic_volume"]
    assert metro.target_index == [4] and metro.freq == "h" and table.time_column == "date_time"


def test_metro_knot_times_have_gaps(metro):
    gaps = np.diff(metro.table.knot_times)
    assert gaps.min() == 1.0 and (gaps > 1).sum() == 2588 and gaps.max() == pytest.approx(307 * 24 + 19)
    ds = metro.train_dataset
    start = int(np.argmax(gaps)) - 10  # a window whose lookback holds the long gap
    item = ds[start]
    assert item["t_x"][0] == 0 and not torch.equal(item["t_x"], torch.arange(48, dtype=torch.float32))
    assert float(item["t_x"][-1]) > 307 * 24
    assert bool((torch.diff(torch.cat([item["t_x"], item["t_y"]])) > 0).all())  # strictly increasing


def test_metro_duplicates_are_refused_by_default(metro_path):
    with pytest.raises(DataError, match="timestamps repeat"):
        CSVDataModule(str(metro_path), 48, 24, target="traffic_volume").setup()


def test_last_window_and_future_times_of_an_irregular_series(metro):
    out = metro.last_window()
    assert out["x"].shape == (48, 5) and out["t_x"].shape == (48,) and out["t_y"].shape == (24,)
    future = metro.future_timestamps()
    assert len(future) == 24 and future[0] == metro.table.timestamps[-1] + pd.Timedelta("1h")
    expected = (future - metro.table.timestamps[-48]) / pd.Timedelta("1h")
    np.testing.assert_allclose(out["t_y"].numpy(), np.asarray(expected, dtype=np.float64), rtol=1e-6)
