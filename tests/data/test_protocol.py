"""The published benchmark protocol (Time-Series-Library's data_loader.py), reproduced exactly.

Window counts, borders, the train-only scaler and the column conventions are checked against an
independent re-derivation with plain pandas + scikit-learn on the raw CSV.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.preprocessing import StandardScaler

from tsattn.data import CSVDataModule, calendar_features, split_borders


# -- window counts and borders --------------------------------------------------------------------------
def test_etth1_window_counts_336_96(etth1):
    counts = [len(etth1.train_dataset), len(etth1.val_dataset), len(etth1.test_dataset)]
    assert counts == [8209, 2785, 2785]
    assert etth1.borders.starts == (0, 12 * 720 - 336, 16 * 720 - 336)
    assert etth1.borders.ends == (12 * 720, 16 * 720, 20 * 720)


@pytest.mark.parametrize("lookback", [96, 512])
def test_ett_hour_test_windows_do_not_depend_on_lookback(lookback):
    b = split_borders(17420, lookback, "ett-hour")
    assert b.n_windows("test", 96) == 2880 - 96 + 1  # every target row of the test months, once
    assert b.n_windows("val", 96) == 2880 - 96 + 1
    assert b.n_windows("train", 96) == 8640 - lookback - 96 + 1


def test_ettm1_window_counts(real_file):
    real_file("ETTm1.csv")
    dm = CSVDataModule("ETTm1", 336, 96)
    dm.setup()
    assert [len(dm.train_dataset), len(dm.val_dataset), len(dm.test_dataset)] == [34129, 11425, 11425]
    assert dm.borders.ends == (34560, 46080, 57600)  # 12 / 16 / 20 months of 30 days at 15 min
    assert dm.freq == "15min"


def test_weather_ratio_split(weather):
    assert len(weather.table) == 52696  # the repeated row is kept, as published
    assert weather.borders.starts == (0, 36887 - 336, 52696 - 10539 - 336)
    assert weather.borders.ends == (36887, 36887 + 5270, 52696)
    assert [len(weather.train_dataset), len(weather.val_dataset), len(weather.test_dataset)] == [36456, 5175, 10444]
    assert weather.n_channels_in == 21 and weather.channel_names[-1] == "OT"


def test_weather_sentinel_kept_as_published_and_cleanable(weather, real_file):
    """Published reading: -9999 stays a number, so it weighs on the train scaler (OT mean 411.05)."""
    ot = weather.channel_names.index("OT")
    assert weather.scaler.offset[ot] == pytest.approx(411.0543, abs=1e-3)
    clean = CSVDataModule("weather", 336, 96, na_values=-9999, missing="ffill")
    table = clean.table
    assert len(table) == 52696 and (table.values != -9999).all()
    clean.setup()
    # independently: pandas marks -9999 missing, carries values forward, averages the 36887 train rows
    raw = pd.read_csv(real_file("weather.csv"), na_values=[-9999])
    expected = raw["OT"].ffill().iloc[:36887].mean()
    assert clean.scaler.offset[ot] == pytest.approx(expected, rel=1e-12)
    assert clean.scaler.offset[ot] == pytest.approx(425.18, abs=0.01)  # the sentinel no longer drags it down
    assert [len(clean.train_dataset), len(clean.test_dataset)] == [36456, 10444]


def test_ratio_borders_match_tslib_arithmetic():
    for n in (100, 966, 7588, 17544, 26304, 52696):
        b = split_borders(n, 36, "ratio")
        num_train, num_test = int(n * 0.7), int(n * 0.2)
        assert b.starts == (0, num_train - 36, n - num_test - 36)
        assert b.ends == (num_train, n - num_test, n)


# -- scaling --------------------------------------------------------------------------------------------
def test_scaler_fit_on_train_only(etth1):
    train = etth1.train_dataset.values.double()  # [8640, 7], scaled
    assert train.mean(0).abs().max() < 1e-4
    assert (train.std(0, unbiased=False) - 1).abs().max() < 1e-4
    test = etth1.test_dataset.values.double()
    assert test.mean(0).abs().max() > 0.1  # the test months differ from the train months


def test_matches_an_independent_tslib_derivation(etth1, real_file):
    """Dataset_ETT_hour by hand: scaler on rows [0, 8640), test windows from border 11520 - 336."""
    raw = pd.read_csv(real_file("ETTh1.csv"))
    values = raw[raw.columns[1:]].to_numpy()
    scaler = StandardScaler().fit(values[: 12 * 30 * 24])
    data = scaler.transform(values)
    np.testing.assert_allclose(etth1.scaler.offset, scaler.mean_)
    np.testing.assert_allclose(etth1.scaler.scale, scaler.scale_)
    for split, start in (("train", 0), ("val", 8640 - 336), ("test", 11520 - 336)):
        ds = getattr(etth1, f"{split}_dataset")
        for i in (0, 1234, len(ds) - 1):
            item = ds[i]
            s = start + i
            np.testing.assert_allclose(item["x"].numpy(), data[s : s + 336], atol=1e-6)
            np.testing.assert_allclose(item["y"].numpy(), data[s + 336 : s + 336 + 96], atol=1e-6)
    last = etth1.test_dataset[len(etth1.test_dataset) - 1]
    np.testing.assert_allclose(last["y"][-1].numpy(), data[14400 - 1], atol=1e-6)  # the last test row


def test_inverse_transform_target_gives_original_units(etth1, real_file):
    raw = pd.read_csv(real_file("ETTh1.csv"))
    item = etth1.test_dataset[7]
    y = etth1.inverse_transform_target(item["y"].double())
    start = 11520 - 336 + 7 + 336
    np.testing.assert_allclose(y.numpy(), raw.iloc[start : start + 96, 1:].to_numpy(), atol=1e-5)


# -- features and column conventions --------------------------------------------------------------------
def test_ms_puts_the_target_last(real_file):
    real_file("ETTh1.csv")
    dm = CSVDataModule("ETTh1", 96, 24, features="MS")
    assert dm.n_channels_in == 7 and dm.n_channels_out == 1  # before setup
    dm.setup()
    assert dm.target_names == ["OT"] and dm.target_index == [6] and dm.channel_names[-1] == "OT"
    item = dm.train_dataset[10]
    assert item["x"].shape == (96, 7) and item["y"].shape == (24, 1)
    full = dm.train_dataset.values
    torch.testing.assert_close(item["y"][:, 0], full[10 + 96 : 10 + 120, 6])


def test_custom_target_moves_to_the_end_as_in_dataset_custom(real_file):
    real_file("ETTh1.csv")
    dm = CSVDataModule("ETTh1", 96, 24, features="MS", target="HUFL")
    assert dm.channel_names == ["HULL", "MUFL", "MULL", "LUFL", "LULL", "OT", "HUFL"]
    assert dm.target_index == [6]


def test_s_uses_the_target_only_and_scales_it_alone(real_file):
    real_file("ETTh1.csv")
    dm = CSVDataModule("ETTh1", 96, 24, features="S")
    dm.setup()
    assert dm.channel_names == ["OT"] and dm.target_index == [0]
    assert len(dm.scaler) == 1
    item = dm.test_dataset[0]
    assert item["x"].shape == (96, 1) and item["y"].shape == (24, 1)


def test_multiple_targets(hourly_frame):
    dm = CSVDataModule(hourly_frame(300, columns=("a", "b", "c", "d")), 16, 8, features="MS", target=["b", "a"])
    dm.setup()
    assert dm.channel_names == ["c", "d", "b", "a"] and dm.target_index == [2, 3]
    assert dm.train_dataset[0]["y"].shape == (8, 2)


def test_calendar_features_timef(etth1, real_file):
    real_file("ETTh1.csv")
    dm = CSVDataModule("ETTh1", 336, 96, calendar_features=True)
    dm.setup()
    item = dm.train_dataset[0]
    assert item["x_mark"].shape == (336, 4) and item["y_mark"].shape == (96, 4)
    assert float(item["x_mark"].min()) >= -0.5 and float(item["x_mark"].max()) <= 0.5
    # 2016-07-01 00:00 is a Friday, day 183 of a leap year
    expected = [0 / 23 - 0.5, 4 / 6 - 0.5, 0 / 30 - 0.5, 182 / 365 - 0.5]
    np.testing.assert_allclose(item["x_mark"][0].numpy(), expected, atol=1e-6)
    minute = calendar_features(pd.date_range("2021-03-04 05:06", periods=3, freq="15min"), "15min")
    assert minute.shape == (3, 5) and minute.dtype == np.float32
    np.testing.assert_allclose(minute[0, :2], [6 / 59 - 0.5, 5 / 23 - 0.5], atol=1e-6)
