"""Bad input: each case raises one clear DataError naming the problem and the fix; nothing is written.

Every test goes through the public entry points (``CSVDataModule`` + ``setup()``, or
``read_series``), asserts the exception type and a key phrase of the message, and checks that the
folder holding the input is unchanged afterwards.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from tsattn.data import (
    CSVDataModule,
    DataError,
    DataFileNotFoundError,
    UnknownDatasetError,
    read_series,
)
from tsattn.data.errors import DataWarning


def _setup(data, lookback=4, horizon=2, **kwargs):
    return lambda: CSVDataModule(data, lookback, horizon, **kwargs).setup()


# -- the file -------------------------------------------------------------------------------------------
def test_missing_file(tmp_path, raises):
    msg = raises(DataFileNotFoundError, "CSV file not found", _setup(str(tmp_path / "absent.csv")))
    assert "absent.csv" in msg
    assert issubclass(DataFileNotFoundError, FileNotFoundError) and issubclass(DataFileNotFoundError, DataError)


def test_empty_file(make_csv, raises):
    raises(DataError, "is empty", "header row and data rows", _setup(str(make_csv(""))))


def test_header_only(make_csv, raises):
    raises(DataError, "no data rows", _setup(str(make_csv("date,a,OT\n"))))


def test_ragged_rows(make_csv, raises):
    path = make_csv("date,a,OT\n2021-01-01 00:00,1,2\n2021-01-01 01:00,1,2,3,4\n")
    raises(DataError, "could not be parsed", "same number", _setup(str(path)))


def test_directory_instead_of_file(tmp_path, raises):
    (tmp_path / "folder.csv").mkdir()
    raises(DataError, "is a directory", _setup(str(tmp_path / "folder.csv")))


def test_data_of_wrong_type(raises):
    raises(DataError, "data must be a path to a CSV file", lambda: CSVDataModule(42, 4, 2))


def test_unknown_dataset_name(raises):
    msg = raises(UnknownDatasetError, "neither a registered dataset", lambda: CSVDataModule("ETTh3", 4, 2))
    assert "ETTh1" in msg  # lists the registered names


def test_repeated_column_names(hourly_frame, raises):
    frame = hourly_frame(20)
    frame.columns = ["date", "a", "a", "OT"]
    raises(DataError, "repeats column name", _setup(frame))


# -- the time column ------------------------------------------------------------------------------------
def test_no_time_column(make_csv, raises):
    path = make_csv("when,a,OT\n2021-01-01,1,2\n2021-01-02,1,2\n")
    raises(DataError, "no time column found", "time_column=", _setup(str(path)))


def test_named_time_column_absent(hourly_frame, raises):
    raises(DataError, "time column 'stamp' is not in the data", _setup(hourly_frame(20), time_column="stamp"))


def test_unparseable_dates(make_csv, raises):
    path = make_csv("date,a,OT\n2021-01-01 00:00,1,2\n2021-01-01 01:00,1,2\nnot a date,1,2\n")
    msg = raises(DataError, "could not be parsed", "'not a date' at row 2 (line 4)", _setup(str(path)))
    assert "time_format=" in msg


def test_empty_timestamp_cell(make_csv, raises):
    path = make_csv("date,a,OT\n2021-01-01 00:00,1,2\n,1,2\n2021-01-01 02:00,1,2\n")
    raises(DataError, "empty cell", "row 1", _setup(str(path)))


def test_numeric_time_column(make_csv, raises):
    path = make_csv("time,a,OT\n1,1,2\n2,1,2\n3,1,2\n")
    raises(DataError, "holds numbers, not dates", "pd.to_datetime", _setup(str(path)))


def test_unsorted_timestamps(make_csv, raises):
    path = make_csv("date,a,OT\n2021-01-01 00:00,1,2\n2021-01-01 02:00,1,2\n2021-01-01 01:00,1,2\n")
    raises(DataError, "not in increasing order", "row 2 (line 4)", "sort=True", _setup(str(path)))


def test_duplicated_timestamps(make_csv, raises):
    path = make_csv("date,a,OT\n2021-01-01 00:00,1,2\n2021-01-01 01:00,1,2\n2021-01-01 01:00,1,3\n")
    raises(DataError, "timestamps repeat", "row 1 (line 3) and row 2 (line 4)", "duplicates=", _setup(str(path)))


def test_keep_duplicates_needs_index_knots(hourly_frame, raises):
    raises(DataError, "zero spacing", "knot_times='index'", _setup(hourly_frame(20), duplicates="keep",
                                                                     knot_times="timestamps"))


def test_single_timestamp(make_csv, raises):
    raises(DataError, "fewer than 2 distinct timestamps", _setup(str(make_csv("date,a\n2021-01-01,1\n"))))


# -- the values -----------------------------------------------------------------------------------------
def test_nan_values(make_csv, raises):
    path = make_csv("date,a,OT\n2021-01-01 00:00,1,\n2021-01-01 01:00,,2\n2021-01-01 02:00,1,\n")
    msg = raises(DataError, "3 missing value(s)", "'OT': 2", "'a': 1", "missing='ffill'", _setup(str(path)))
    assert "row 0 (line 2)" in msg


def test_sentinel_values(make_csv, raises):
    path = make_csv("date,a,OT\n2021-01-01 00:00,1,-9999\n2021-01-01 01:00,1,2\n2021-01-01 02:00,1,2\n")
    raises(DataError, "1 missing value(s)", "'OT': 1", _setup(str(path), na_values=[-9999]))


def test_infinite_values(hourly_frame, raises):
    frame = hourly_frame(20)
    frame.loc[5, "a"] = np.inf
    raises(DataError, "infinite value", "'a'", "row 5", "na_values=['inf', '-inf']", _setup(frame))


def test_numeric_column_with_stray_text(make_csv, raises):
    path = make_csv("date,a,OT\n2021-01-01 00:00,1.5,2\n2021-01-01 01:00,--,2\n2021-01-01 02:00,2.5,2\n")
    raises(DataError, "column 'a' is numeric but 1 cell(s) hold text", "'--' at row 1", "na_values=",
           _setup(str(path)))


def test_no_numeric_columns(make_csv, raises):
    path = make_csv("date,kind\n2021-01-01 00:00,x\n2021-01-01 01:00,y\n")
    raises(DataError, "no numeric value columns", _setup(str(path)))


def test_requested_text_column(make_csv, raises):
    path = make_csv("date,a,kind\n2021-01-01 00:00,1,x\n2021-01-01 01:00,2,y\n")
    raises(DataError, "column 'kind' holds text", _setup(str(path), columns=["a", "kind"]))


def test_unknown_value_column(hourly_frame, raises):
    raises(DataError, "columns ['zz'] are not value columns", _setup(hourly_frame(20), columns=["a", "zz"]))


def test_all_missing_column_cannot_be_filled(hourly_frame, raises):
    frame = hourly_frame(20)
    frame["b"] = np.nan
    raises(DataError, "have no values at all", "columns=", _setup(frame, missing="ffill",
                                                                  columns=["a", "b", "OT"]))
    # not named in columns=: an empty column is dropped like a text column
    assert read_series(frame).dropped_columns == ("b",)


# -- targets and features -------------------------------------------------------------------------------
def test_unknown_target(hourly_frame, raises):
    raises(DataError, "target 'price' is not a value column", _setup(hourly_frame(50), target="price"))


@pytest.mark.parametrize("marker", ["Christmas Day", "None"])  # text, or only pandas' missing markers
def test_text_target(make_csv, raises, marker):
    rows = "".join(f"2021-01-01 {h:02d}:00,{h},{marker if h == 5 else 'None'}\n" for h in range(20))
    path = make_csv("date,a,holiday\n" + rows)
    raises(DataError, "target 'holiday' is not numeric", _setup(str(path), features="MS", target="holiday"))


def test_single_channel_mode_needs_a_target(hourly_frame, raises):
    frame = hourly_frame(50, columns=("a", "b"))
    raises(DataError, "needs a target column", "no 'OT' column", _setup(frame, features="S"))


def test_unknown_features(raises):
    raises(DataError, "features must be 'M'", lambda: CSVDataModule("ETTh1", 4, 2, features="MM"))


# -- protocol and window sizes --------------------------------------------------------------------------
def test_unknown_split(raises):
    raises(DataError, "split must be one of", lambda: CSVDataModule("ETTh1", 4, 2, split="80/20"))


def test_unknown_missing_policy(raises):
    raises(DataError, "`missing` must be one of", lambda: CSVDataModule("ETTh1", 4, 2, missing="drop"))


@pytest.mark.parametrize("lookback, horizon", [(0, 24), (-3, 24), (96, 0), (96, -1), (96.0, 24), (True, 24)])
def test_nonpositive_or_noninteger_sizes(lookback, horizon, raises):
    raises(DataError, "must be a positive integer", lambda: CSVDataModule("ETTh1", lookback, horizon))


def test_too_few_rows_for_a_window(hourly_frame, raises):
    # 100 rows, ratio: train 70, val 10 (+ lookback), test 20 (+ lookback): L = 8, H = 16 fails in val.
    raises(DataError, "too few rows for lookback + horizon = 8 + 16 = 24 in the val split", "shorter lookback",
           _setup(hourly_frame(100), lookback=8, horizon=16))


def test_lookback_longer_than_train(hourly_frame, raises):
    raises(DataError, "longer than the train segment", _setup(hourly_frame(100), lookback=80, horizon=2))


def test_ett_protocol_on_short_data(hourly_frame, raises):
    raises(DataError, "split='ett-hour' needs at least 14400 rows", "split='ratio'",
           _setup(hourly_frame(500), split="ett-hour"))


def test_bad_frequency(raises):
    raises(DataError, "not a pandas offset alias", lambda: CSVDataModule("ETTh1", 4, 2, freq="fortnightly"))


def test_registered_dataset_absent_at_setup(tmp_path, monkeypatch, raises):
    monkeypatch.setenv("TSATTN_DATA_DIR", str(tmp_path / "empty"))
    dm = CSVDataModule("ETTh1", 4, 2)
    msg = raises(DataFileNotFoundError, "not available locally", "python -m tsattn.data fetch ETTh1", dm.setup)
    assert "TSATTN_DATA_DIR" in msg and "ETTh1.csv" in msg


# -- edge cases that must NOT fail ----------------------------------------------------------------------
def test_constant_column_scales_without_nan(hourly_frame):
    frame = hourly_frame(200)
    frame["b"] = 3.0
    dm = CSVDataModule(frame, 8, 4)
    dm.setup()
    assert dm.scaler.scale[dm.channel_names.index("b")] == 1.0  # scikit-learn's zero-variance rule
    for ds in (dm.train_dataset, dm.val_dataset, dm.test_dataset):
        assert torch_all_finite(ds.values)
    assert float(dm.train_dataset[0]["x"][:, dm.channel_names.index("b")].abs().max()) == 0.0


def torch_all_finite(t) -> bool:
    return bool(np.isfinite(t.numpy()).all())


def test_read_series_never_modifies_a_dataframe(hourly_frame):
    frame = hourly_frame(30)
    frame.loc[3, "a"] = -9999.0
    before = frame.copy()
    read_series(frame, na_values=[-9999], missing="ffill")
    pd.testing.assert_frame_equal(frame, before)


# -- dates, separators, markers and headers that pandas reads without a word ------------------------------
def _day_first_csv(make_csv, days):
    """Hourly rows written day-first (dd/mm/yyyy HH:MM) for the given days of January 2016."""
    stamps = pd.date_range("2016-01-01", periods=24 * days, freq="h")
    frame = pd.DataFrame({"date": stamps.strftime("%d/%m/%Y %H:%M"), "a": np.arange(len(stamps), dtype=float),
                          "OT": np.sin(np.arange(len(stamps)) / 5.0)})
    return make_csv(frame)


def test_ambiguous_day_first_dates_need_dayfirst(make_csv, raises):
    path = _day_first_csv(make_csv, 12)  # 01/01 .. 12/01: every field <= 12
    msg = raises(DataError, "cannot be told apart", "dayfirst=True", "dayfirst=False", "time_format=",
                 _setup(str(path)))
    assert "'01/01/2016 00:00'" in msg
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)  # read day-first: 12 regular days, nothing to warn about
        table = read_series(path, dayfirst=True)
    assert len(table) == 288 and table.timestamps[-1] == pd.Timestamp("2016-01-12 23:00")
    assert (np.diff(table.knot_times) == 1.0).all()
    same = read_series(path, time_format="%d/%m/%Y %H:%M")
    assert same.timestamps.equals(table.timestamps)


def test_month_first_reading_of_day_first_dates_warns_with_the_step_and_rows(make_csv):
    path = _day_first_csv(make_csv, 12)
    with pytest.warns(DataWarning, match=r"exceed 10x the median step \(0 days 01:00:00\)") as record:
        table = read_series(path, dayfirst=False)  # January to December, as pandas alone would read it
    assert table.timestamps[-1] == pd.Timestamp("2016-12-01 23:00")
    message = str(record[0].message)
    assert "11 step(s)" in message and "row 23 (line 25)" in message and "dayfirst=True" in message


def test_day_first_is_taken_from_the_data_when_a_day_exceeds_12(make_csv):
    table = read_series(_day_first_csv(make_csv, 20))  # 13/01/2016 onwards can only be day-first
    assert len(table) == 480 and table.timestamps[-1] == pd.Timestamp("2016-01-20 23:00")


def test_a_ten_year_gap_warns(hourly_frame):
    frame = hourly_frame(200)
    stamps = pd.to_datetime(frame["date"])
    frame["date"] = stamps.where(frame.index < 120, stamps + pd.DateOffset(years=10))
    with pytest.warns(DataWarning, match="1 step") as record:
        read_series(frame)
    assert "row 119" in str(record[0].message) and "row 120" in str(record[0].message)


def test_thousands_separators_are_named_then_read(make_csv, raises):
    rows = "".join(f'2021-01-01 {h:02d}:00,"{5000 + 100 * h:,}.5",{h}\n' for h in range(20))
    path = make_csv("date,load,OT\n" + rows)
    raises(DataError, "column 'load' holds numbers written with thousands separators", "'5,000.5'",
           "thousands=','", _setup(str(path)))
    table = read_series(path, thousands=",")
    assert table.columns == ("load", "OT") and table.values[3, 0] == 5300.5


def test_dropped_columns_are_named_in_a_warning(make_csv):
    rows = "".join(f"2021-01-01 {h:02d}:00,{h},{'rain' if h % 2 else 'sun'},\n" for h in range(20))
    path = make_csv("date,OT,weather,empty\n" + rows)
    with pytest.warns(DataWarning, match=r"'weather' \(text, e\.g\. 'sun'\), 'empty' \(no values\)"):
        table = read_series(path)
    assert table.columns == ("OT",) and table.dropped_columns == ("weather", "empty")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        read_series(path, columns=["OT"])  # choosing the columns yourself: nothing to warn about


@pytest.mark.parametrize("marker", ["-9999", -9999, -9999.0, ["-9999"]])
def test_one_missing_marker_works_as_in_pandas(make_csv, marker):
    rows = "".join(f"2021-01-01 {h:02d}:00,{-9999 if h == 7 else h}.0,1\n" for h in range(20))
    path = make_csv("date,a,OT\n" + rows)
    with pytest.raises(DataError, match=r"1 missing value\(s\)"):  # the marker became a missing value
        CSVDataModule(str(path), 4, 2, na_values=marker).setup()
    dm = CSVDataModule(str(path), 4, 2, na_values=marker, missing="ffill")
    assert dm.table.values[7, 0] == 6.0 and dm.hparams["na_values"] == marker


def test_one_missing_marker_through_the_forecaster(make_csv):
    from tsattn import Forecaster

    rows = "".join(f"2021-01-01 {h:02d}:00,{-9999 if h == 7 else h},1\n" for h in range(20))
    path = make_csv("date,a,OT\n" + rows)
    for marker in ("-9999", -9999):  # fails fast, before any training, because -9999 is now missing
        with pytest.raises(DataError, match=r"1 missing value\(s\)"):
            Forecaster("patchtst", lookback=8, horizon=2, model_kwargs={"patch_len": 4, "stride": 2}).fit(
                path, na_values=marker)


def test_repeated_header_names_in_a_file(make_csv, raises):
    path = make_csv("date,HUFL,HUFL,OT\n2021-01-01 00:00,1,2,3\n2021-01-01 01:00,1,2,3\n")
    raises(DataError, "repeats the column name(s) ['HUFL']", "distinct name", _setup(str(path)))


def test_semicolon_separated_file_names_sep(make_csv, raises):
    rows = "".join(f"2021-01-01 {h:02d}:00;{h};1\n" for h in range(20))
    path = make_csv("date;a;OT\n" + rows)
    raises(DataError, "separated by ';'", "sep=';'", _setup(str(path)))
    assert read_series(path, sep=";").columns == ("a", "OT")


def test_array_input_says_how_to_make_a_dataframe(raises):
    raises(DataError, "pd.DataFrame(values", "date_range", lambda: CSVDataModule(np.zeros((50, 3)), 4, 2))


def test_numpy_integer_sizes_are_accepted(hourly_frame):
    dm = CSVDataModule(hourly_frame(100), np.int64(8), np.int32(4), batch_size=np.int64(16))
    assert (dm.lookback, dm.horizon, dm.batch_size) == (8, 4, 16) and type(dm.lookback) is int


# -- values float32 cannot hold, or far outside the rest of their column ----------------------------------
def test_values_beyond_float32_are_refused(hourly_frame, make_csv, raises):
    frame = hourly_frame(200)
    frame.loc[150, "a"] = 1e300
    msg = raises(DataError, "column 'a' holds 1 value(s) too large for float32", "1e+300 at row 150 (line 152)",
                 "divide it by 1e300", "columns=[...]", _setup(str(make_csv(frame))))
    assert "3.403e+38" in msg  # the rule: |x| > np.finfo(np.float32).max
    frame.loc[150, "a"] = -3.5e38  # just beyond, negative
    raises(DataError, "column 'a' holds 1 value(s) too large for float32", "row 150", _setup(frame))


def test_a_value_far_outside_its_column_warns(hourly_frame):
    frame = hourly_frame(200)
    frame.loc[120, "b"] = 3e38  # fits float32, but more than 1e6 times the 99th percentile of |b|
    with pytest.warns(DataWarning, match=r"1 value\(s\) are more than 1e\+06 times the 99th percentile") as record:
        table = read_series(frame)
    message = str(record[0].message)
    assert "column 'b': 3e+38 at row 120" in message and "na_values=[...]" in message
    assert table.values[120, 1] == 3e38  # read as it is
    mostly_zero = hourly_frame(200)
    mostly_zero["rain"] = 0.0
    mostly_zero.loc[7, "rain"] = 9831.3  # the 99th percentile of |rain| is 0: no scale to compare with
    mostly_zero.loc[9, "a"] = 5e3  # big, but not a million times the rest of 'a'
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        read_series(mostly_zero)


# -- decimal commas -------------------------------------------------------------------------------------
def _decimal_comma_csv(make_csv):
    rows = "".join(f"2021-01-01 {h:02d}:00;{h},{7855 + h};{h % 3},5\n" for h in range(20))
    return make_csv("date;load;OT\n" + rows)


def test_decimal_commas_are_named_then_read(make_csv, raises, hourly_frame):
    path = _decimal_comma_csv(make_csv)
    raises(DataError, "column 'load' holds numbers written with a decimal comma", "'0,7855' at row 0 (line 2)",
           "decimal comma? pass decimal=','", _setup(str(path), sep=";"))
    table = read_series(path, sep=";", decimal=",")
    assert table.columns == ("load", "OT") and table.values[0, 0] == 0.7855 and table.values[3, 1] == 0.5
    dm = CSVDataModule(str(path), 4, 2, sep=";", decimal=",")
    dm.setup()
    assert dm.record()["options"]["decimal"] == ","  # a refit / predict on other data reads alike
    other = CSVDataModule.from_record(dm.record(), str(path))
    assert other.table.values[0, 0] == 0.7855
    frame = hourly_frame(20, columns=("a",)).assign(OT=[f"{h},25" for h in range(20)])  # text in a DataFrame
    assert read_series(frame, decimal=",").values[2, 1] == 2.25
    raises(DataError, "decimal must be one character", lambda: CSVDataModule(frame, 4, 2, decimal=""))
    raises(DataError, "is also the thousands separator", lambda: CSVDataModule(frame, 4, 2, decimal=",",
                                                                                thousands=","))


# -- time zones with daylight saving --------------------------------------------------------------------
def _daylight_saving_csv(make_csv):
    """Hourly rows in New York time across the switch to summer time (2021-03-14): -05:00, then -04:00."""
    stamps = pd.date_range("2021-03-12", periods=96, freq="h", tz="America/New_York")
    frame = pd.DataFrame({"date": stamps, "a": np.arange(96.0), "OT": np.sin(np.arange(96) / 5.0)})
    path = make_csv(frame)
    assert "-05:00" in path.read_text() and "-04:00" in path.read_text()
    return path, stamps


def test_daylight_saving_offsets_are_read_as_utc(make_csv):
    path, stamps = _daylight_saving_csv(make_csv)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)  # hourly in UTC: no gap at the switch
        table = read_series(path)
    assert str(table.timestamps.tz) == "UTC" and table.timestamps.equals(stamps.tz_convert("UTC"))
    assert (np.diff(table.knot_times) == 1.0).all() and table.freq == "h"
    dm = CSVDataModule(str(path), 8, 4)
    future = dm.future_timestamps()  # a forecast comes back in UTC
    assert str(future.tz) == "UTC" and future[0] == stamps[-1].tz_convert("UTC") + pd.Timedelta("1h")


def test_timestamps_with_and_without_an_offset_are_refused(make_csv, raises):
    rows = "date,a\n2021-03-14 00:00-05:00,1\n2021-03-14 04:00-04:00,2\n2021-03-14 05:00,3\n"
    raises(DataError, "could not be parsed", "'2021-03-14 05:00' at row 2 (line 4)", _setup(str(make_csv(rows))))


# -- gaps -----------------------------------------------------------------------------------------------
def test_a_month_of_missing_daily_rows_warns_and_says_what_windows_do(hourly_frame):
    frame = hourly_frame(365)
    frame["date"] = pd.date_range("2021-01-01", periods=365, freq="D").strftime("%Y-%m-%d")
    frame = frame.drop(index=range(200, 230)).reset_index(drop=True)  # 31 days from row 199 to row 200
    with pytest.warns(DataWarning, match=r"1 step\(s\) between consecutive rows exceed 10x the median step") as record:
        read_series(frame)
    message = str(record[0].message)
    assert "31 days" in message and "row 199" in message and "row 200" in message
    assert "with knot_times='timestamps' (this reading) the model sees the gap in its knot times" in message
    assert "with knot_times='index' rows are read as one step apart" in message
    with pytest.warns(DataWarning, match=r"knot_times='index' \(this reading\) rows are read as one step apart"):
        read_series(frame, knot_times="index")


def test_a_step_of_exactly_ten_times_the_median_does_not_warn(hourly_frame):
    frame = hourly_frame(200)
    stamps = pd.date_range("2021-01-01", periods=200, freq="10min")
    frame["date"] = stamps.where(stamps < stamps[100], stamps + pd.Timedelta("90min"))  # one 100-minute step
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        table = read_series(frame)
    assert table.timestamps[100] - table.timestamps[99] == pd.Timedelta("100min")


@pytest.mark.parametrize("name", ["ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather"])
def test_registered_benchmark_files_read_without_a_warning(real_file, name):
    from tsattn.data import registry

    spec = registry.get_spec(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)  # weather's one 100-minute step (10x) included
        table = read_series(real_file(spec.files[0].filename), **spec.read_options)
    assert len(table) == spec.n_rows
