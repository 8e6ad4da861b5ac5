"""No look-ahead in the data: a filled value, a window's inputs and knot times, and the train scaler
never depend on a row after the one they describe.

The comparisons are exact on purpose: when the rows up to r are the same bits, the same code on
the same bits must give the same bits; any difference is information from a later row.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tsattn.data import CSVDataModule, DataError, read_series, split_borders

N, L, H = 400, 24, 8  # ratio split: train rows [0, 280), val [256, 320), test [296, 400)
TRAIN_END = int(N * 0.7)


def _series(seed: int = 0) -> pd.DataFrame:
    """Hourly random walks with missing values, among them the last train row and its neighbours."""
    rng = np.random.default_rng(seed)
    values = np.cumsum(rng.normal(size=(N, 3)), axis=0)
    values[rng.random((N, 3)) < 0.08] = np.nan
    values[0] = 1.0  # a leading gap has nothing to carry forward (tested below)
    for row in (TRAIN_END - 2, TRAIN_END - 1, TRAIN_END, 299, 300, 350):
        values[row, row % 3] = np.nan
    frame = pd.DataFrame(values, columns=["a", "b", "OT"])
    frame.insert(0, "date", pd.date_range("2022-01-01", periods=N, freq="h"))
    return frame


def _rewrite_after(frame: pd.DataFrame, r: int, seed: int = 1) -> pd.DataFrame:
    """Every row after r changed: other values, another missing pattern, and a gap in the clock."""
    rng = np.random.default_rng(seed)
    out = frame.copy()
    later = out.index > r
    n = int(later.sum())
    fresh = 100.0 + 50.0 * rng.normal(size=(n, 3))
    fresh[rng.random((n, 3)) < 0.3] = np.nan
    out.loc[later, ["a", "b", "OT"]] = fresh
    out.loc[later, "date"] = out.loc[later, "date"] + pd.Timedelta("37min")  # a gap right after r
    return out


@pytest.mark.parametrize("r", [TRAIN_END - 1, 299, 350])
@pytest.mark.parametrize("knot_times", ["timestamps", "index"])
@pytest.mark.parametrize("missing", ["ffill", "interpolate"])  # every fill the data layer has offered
def test_rows_after_r_change_nothing_that_ends_at_or_before_r(r, knot_times, missing):
    base = _series()
    try:
        dm_a = CSVDataModule(base, L, H, missing=missing, knot_times=knot_times)
        dm_a.setup()
    except DataError as refused:  # a fill that would look ahead is not offered at all
        assert "look-ahead" in str(refused)
        return
    dm_b = CSVDataModule(_rewrite_after(base, r), L, H, missing=missing, knot_times=knot_times)
    dm_b.setup()
    # the train scaler (and time unit) come from rows <= r only: they do not move
    np.testing.assert_array_equal(dm_a.scaler.offset, dm_b.scaler.offset)
    np.testing.assert_array_equal(dm_a.scaler.scale, dm_b.scaler.scale)
    assert dm_a.time_unit == dm_b.time_unit
    borders = split_borders(N, L, "ratio")
    compared = 0
    for split in ("train", "val", "test"):
        start = borders.segment(split).start
        ds_a, ds_b = getattr(dm_a, f"{split}_dataset"), getattr(dm_b, f"{split}_dataset")
        for i in range(len(ds_a)):
            if start + i + L - 1 > r:  # this window reads a row after r
                continue
            a, b = ds_a[i], ds_b[i]
            assert torch.equal(a["x"], b["x"]) and torch.equal(a["t_x"], b["t_x"]), (split, i)
            compared += 1
    assert compared > 0
    # the test can fail: the rewritten rows do reach the windows that read them
    last = len(dm_a.test_dataset) - 1
    assert not torch.equal(dm_a.test_dataset[last]["x"], dm_b.test_dataset[last]["x"])


def test_a_filled_value_depends_only_on_earlier_rows():
    frame = _series(seed=3)
    full = read_series(frame, missing="ffill").values
    for k in (2, 57, TRAIN_END - 1, TRAIN_END, 301, N - 1):  # reading only the first k rows changes nothing
        np.testing.assert_array_equal(read_series(frame.iloc[:k], missing="ffill").values, full[:k])


def test_interpolation_is_refused_as_look_ahead():
    for make in (lambda: read_series(_series(), missing="interpolate"),
                 lambda: CSVDataModule(_series(), L, H, missing="interpolate")):
        with pytest.raises(DataError, match="look-ahead") as info:
            make()
        assert "missing='ffill'" in str(info.value)


def test_leading_missing_values_are_an_error_naming_the_rows_to_drop():
    frame = _series()
    frame.loc[2, ["a", "b", "OT"]] = 2.0
    frame.loc[0:1, "b"] = np.nan
    frame.loc[0, "a"] = np.nan
    with pytest.raises(DataError, match=r"start with missing values") as info:
        read_series(frame, missing="ffill")
    message = str(info.value)
    assert "'a'" in message and "'b'" in message and "drop the first 2 row(s)" in message
    table = read_series(frame.iloc[2:], missing="ffill")  # the named fix works
    assert np.isfinite(table.values).all()
