"""read_observations / ObservationSet: long and wide layouts, no invented values, duplicates, bad input.

Every error case asserts the exception type, key phrases of the message (the problem and the fix)
and that the folder holding the input is unchanged.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from tsattn.data import DataError, DataFileNotFoundError, ObservationSet, read_observations
from tsattn.data.errors import DataWarning
from tsattn.data.observations.requests import series_codes

ROWS = [  # a wide table: 2 patients, datetime times, NaN = not observed
    ("p2", "2021-03-01 08:00", 80.0, np.nan, 36.6),
    ("p2", "2021-03-01 08:30", np.nan, 120.0, np.nan),
    ("p1", "2021-01-01 00:00", 70.0, 110.0, np.nan),
    ("p1", "2021-01-01 00:10", np.nan, np.nan, 37.0),
    ("p1", "2021-01-01 02:00", 72.0, np.nan, np.nan),
    ("p2", "2021-03-01 09:15", 84.0, 125.0, 36.9),
]


def _wide() -> pd.DataFrame:
    return pd.DataFrame(ROWS, columns=["id", "time", "HR", "SBP", "Temp"])


def _long_from(wide: pd.DataFrame) -> pd.DataFrame:
    long = wide.melt(id_vars=["id", "time"], var_name="variable", value_name="value").dropna(subset=["value"])
    return long.sample(frac=1.0, random_state=0).sort_values(["id", "time"], kind="stable")  # variables shuffled


def _assert_same(a: ObservationSet, b: ObservationSet) -> None:
    assert list(a.series_ids) == list(b.series_ids) and a.variables == b.variables
    np.testing.assert_array_equal(a.offsets, b.offsets)
    np.testing.assert_array_equal(a.variable, b.variable)
    np.testing.assert_allclose(a.time, b.time, rtol=1e-12, atol=0)
    np.testing.assert_allclose(a.value, b.value, rtol=1e-12, atol=0)


# -- layouts ---------------------------------------------------------------------------------------------
def test_wide_table_with_datetimes():
    obs = read_observations(_wide(), id_column="id")
    assert len(obs) == 2 and list(obs.series_ids) == ["p1", "p2"]  # ordered by id
    assert obs.variables == ("HR", "SBP", "Temp") and obs.time_unit == pd.Timedelta(hours=1)
    assert list(obs.origins) == [pd.Timestamp("2021-01-01 00:00"), pd.Timestamp("2021-03-01 08:00")]
    p1 = obs.series(0)
    np.testing.assert_allclose(p1.time, [0.0, 0.0, 1 / 6, 2.0], rtol=1e-12)  # hours since p1's first timestamp
    assert [obs.variables[v] for v in p1.variable] == ["HR", "SBP", "Temp", "HR"]
    np.testing.assert_array_equal(p1.value, [70.0, 110.0, 37.0, 72.0])
    assert obs.read_counts["observations"] == 10 and obs.read_counts["empty_skipped"] == 8


def test_wide_and_long_give_the_same_set(tmp_path):
    wide = _wide()
    from_wide = read_observations(wide, id_column="id")
    long = _long_from(wide)
    from_long = read_observations(
        long, id_column="id", variable_column="variable", value_column="value", columns=["HR", "SBP", "Temp"]
    )
    _assert_same(from_wide, from_long)
    assert list(from_wide.origins) == list(from_long.origins)
    path = tmp_path / "long.csv"  # and from a file
    long.to_csv(path, index=False)
    _assert_same(from_wide, read_observations(path, id_column="id", variable_column="variable", value_column="value",
                                              columns=["HR", "SBP", "Temp"]))


def test_long_layout_default_variables_are_sorted_names():
    obs = read_observations(_long_from(_wide()), id_column="id", variable_column="variable", value_column="value")
    assert obs.variables == ("HR", "SBP", "Temp")


def test_to_frame_round_trips():
    obs = read_observations(_wide(), id_column="id")
    long = obs.to_frame("long")
    assert list(long.columns) == ["id", "time", "variable", "value"] and len(long) == obs.n_observations
    back = read_observations(long, id_column="id", variable_column="variable", value_column="value",
                             columns=list(obs.variables))
    _assert_same(obs, back)
    assert back.time_unit is None and back.origins is None  # numeric times are taken as given
    wide = obs.to_frame("wide")
    assert wide.shape == (6, 5) and int(wide[list(obs.variables)].notna().sum().sum()) == obs.n_observations
    _assert_same(obs, read_observations(wide, id_column="id"))


def test_numeric_times_are_taken_as_given():
    frame = pd.DataFrame({"stay": [7, 7, 7, 9], "hours": [0.5, 1.25, 30.0, 2.0], "x": [1.0, 2.0, 3.0, 4.0]})
    obs = read_observations(frame, id_column="stay", time_column="hours")
    assert obs.series_ids.dtype == np.int64 and list(obs.series_ids) == [7, 9]
    np.testing.assert_array_equal(obs.time, [0.5, 1.25, 30.0, 2.0])
    assert obs.time_unit is None and obs.origins is None


def test_one_series_when_no_id_column_and_other_time_units():
    frame = _wide().query("id == 'p1'").drop(columns="id")
    obs = read_observations(frame, time_unit="min")
    assert len(obs) == 1
    np.testing.assert_allclose(obs.time, [0, 0, 10, 120], rtol=1e-12)
    np.testing.assert_allclose(read_observations(frame, time_unit="15min").time, [0, 0, 10 / 15, 8], rtol=1e-12)


# -- no value invented, duplicates -----------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["mean", "first", "last"])
def test_observations_in_equal_observations_out_minus_merged_duplicates(policy):
    rng = np.random.default_rng(3)
    n = 400
    frame = pd.DataFrame({
        "id": rng.integers(0, 5, n),
        "time": np.sort(rng.integers(0, 40, n)).astype(float),  # many repeated (id, time, variable)
        "variable": rng.choice(["a", "b", "c", "d"], n),
        "value": rng.normal(size=n),
    })
    frame.loc[rng.random(n) < 0.1, "value"] = np.nan
    obs = read_observations(frame, id_column="id", variable_column="variable", value_column="value", duplicates=policy)
    observed = frame.dropna(subset=["value"])
    groups = observed.groupby(["id", "time", "variable"], sort=True)["value"]
    assert obs.n_observations == groups.ngroups == len(observed) - obs.read_counts["duplicates_merged"]
    assert obs.read_counts["empty_skipped"] == int(frame["value"].isna().sum())
    expected = {"mean": groups.mean(), "first": groups.first(), "last": groups.last()}[policy]
    out = obs.to_frame().set_index(["id", "time", "variable"])["value"].sort_index()
    assert list(out.index) == list(expected.index)  # exactly the observed (id, time, variable): nothing added
    np.testing.assert_allclose(out.to_numpy(), expected.to_numpy(), rtol=1e-12, atol=1e-15)


def test_rows_are_sorted_by_series_time_variable():
    obs = read_observations(_long_from(_wide()), id_column="id", variable_column="variable", value_column="value")
    series = obs.series_index
    key = np.lexsort((obs.variable, obs.time, series))
    np.testing.assert_array_equal(key, np.arange(obs.n_observations))


def test_duplicates_error_names_the_rows(raises):
    frame = pd.DataFrame({"id": [1, 1], "time": [0.0, 0.0], "variable": ["x", "x"], "value": [1.0, 2.0]})
    raises(DataError, "repeat a (series, time, variable)", "row 0 and row 1", "duplicates='mean'",
           lambda: read_observations(frame, id_column="id", variable_column="variable", value_column="value",
                                     duplicates="error"))


# -- set operations and storage --------------------------------------------------------------------------
def test_subset_select_variables_and_thin():
    obs = read_observations(_wide(), id_column="id")
    sub = obs.subset([0])
    assert list(sub.series_ids) == ["p1"] and sub.n_observations == 4 and list(sub.origins) == [obs.origins[0]]
    np.testing.assert_array_equal(sub.value, obs.series(0).value)
    swapped = obs.subset([1, 0])
    assert list(swapped.series_ids) == ["p2", "p1"] and swapped.n_observations == obs.n_observations
    np.testing.assert_array_equal(swapped.series(1).time, obs.series(0).time)
    only = obs.select_variables(["Temp", "HR"])
    assert only.variables == ("Temp", "HR") and only.n_observations == 3 + 4
    assert set(only.to_frame()["variable"]) == {"Temp", "HR"}
    big = ObservationSet(
        series_ids=np.array([0]), offsets=np.array([0, 10000]), time=np.repeat(np.arange(2500.0), 4),
        variable=np.tile(np.arange(4), 2500), value=np.arange(10000.0), variables=("a", "b", "c", "d"),
    )
    rows = big.thin(0.3, seed=1, by="time")
    kept_times = np.unique(rows.time)
    assert 0.25 < len(kept_times) / 2500 < 0.35 and rows.n_observations == 4 * len(kept_times)  # whole rows
    single = big.thin(0.3, seed=1, by="observation")
    assert 0.27 < single.n_observations / 10000 < 0.33
    np.testing.assert_array_equal(big.thin(0.3, seed=1).value, rows.value)  # the seed fixes the draw


def test_npz_round_trip_and_atomic_write(tmp_path, monkeypatch):
    obs = read_observations(_wide(), id_column="id")
    path = obs.save_npz(tmp_path / "obs.npz")
    back = ObservationSet.load_npz(path)
    _assert_same(obs, back)
    _assert_same(obs, ObservationSet.load_npz(obs.save_npz(tmp_path / "stored.npz", compress=False)))
    (tmp_path / "stored.npz").unlink()
    assert list(back.origins) == list(obs.origins) and back.time_unit == obs.time_unit
    assert back.read_counts == obs.read_counts and back.source == obs.source
    assert sorted(p.name for p in tmp_path.iterdir()) == ["obs.npz"]

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np.lib.format, "write_array", broken)
    with pytest.raises(OSError, match="disk full"):
        obs.save_npz(tmp_path / "other.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["obs.npz"]  # no partial file


def test_truncated_npz_is_a_data_error(tmp_path):
    path = read_observations(_wide(), id_column="id").save_npz(tmp_path / "obs.npz")
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DataError, match="not a readable ObservationSet file"):
        ObservationSet.load_npz(path)


def test_a_set_must_be_sorted_and_finite():
    fields = dict(series_ids=np.array([0]), offsets=np.array([0, 3]), variables=("a", "b"))
    with pytest.raises(DataError, match="sorted by \\(series, time, variable\\)"):
        ObservationSet(time=np.array([0.0, 2.0, 1.0]), variable=np.array([0, 0, 0]), value=np.ones(3), **fields)
    with pytest.raises(DataError, match="at most one observation per"):
        ObservationSet(time=np.array([0.0, 1.0, 1.0]), variable=np.array([0, 1, 1]), value=np.ones(3), **fields)
    with pytest.raises(DataError, match="must be finite"):
        ObservationSet(time=np.array([0.0, 1.0, 2.0]), variable=np.array([0, 1, 1]), value=np.array([1, np.nan, 1]),
                       **fields)
    with pytest.raises(DataError, match="offsets must be"):
        ObservationSet(time=np.zeros(3), variable=np.array([0, 1, 1]), value=np.ones(3),
                       **{**fields, "offsets": np.array([0, 2])})


def test_arrays_are_read_only():
    obs = read_observations(_wide(), id_column="id")
    with pytest.raises(ValueError):
        obs.value[0] = 1.0


# -- bad input ---------------------------------------------------------------------------------------------
def test_missing_id_column_names_the_columns(raises):
    raises(DataError, "id column 'patient' is not in the data", "['id', 'time', 'HR', 'SBP', 'Temp']",
           "id_column=None", lambda: read_observations(_wide(), id_column="patient"))


def test_missing_time_column_names_the_columns(raises):
    frame = _wide().rename(columns={"time": "when"})
    raises(DataError, "no time column found", "'when'", "time_column=",
           lambda: read_observations(frame, id_column="id"))


def test_unparseable_times_show_examples_and_rows(raises):
    frame = _wide()
    frame.loc[4, "time"] = "2021-13-45 99:00"
    raises(DataError, "could not be parsed", "'2021-13-45 99:00' at row 4", "time_format=",
           lambda: read_observations(frame, id_column="id"))


def test_times_going_back_within_a_series(raises, make_csv):
    frame = _wide().iloc[[0, 1, 2, 4, 3, 5]]  # p1's 02:00 row before its 00:10 row
    path = make_csv(frame)
    msg = raises(DataError, "times go back within series 'p1'", "row 4 (line 6)", "sort=True",
                 lambda: read_observations(path, id_column="id"))
    assert "comes after row 3" in msg
    _assert_same(read_observations(frame, id_column="id", sort=True), read_observations(_wide(), id_column="id"))


def test_interleaved_series_are_fine():
    interleaved = _wide().iloc[[0, 2, 1, 3, 4, 5]]  # p2, p1, p2, p1, p1, p2: each series in time order
    _assert_same(read_observations(interleaved, id_column="id"), read_observations(_wide(), id_column="id"))


def test_text_in_the_value_column(raises):
    long = _long_from(_wide()).astype({"value": object})
    long.iloc[2, long.columns.get_loc("value")] = "n/a"
    raises(DataError, "column 'value' is numeric but 1 cell(s) hold text", "'n/a'", "na_values=",
           lambda: read_observations(long, id_column="id", variable_column="variable", value_column="value"))
    ok = read_observations(long, id_column="id", variable_column="variable", value_column="value", na_values=["n/a"])
    assert ok.n_observations == 9 and ok.read_counts["empty_skipped"] == 1


def test_text_in_a_wide_variable_column(raises):
    frame = _wide().astype({"HR": object})
    frame.loc[0, "HR"] = "high"
    raises(DataError, "column 'HR' is numeric but 1 cell(s) hold text", "'high' at row 0",
           lambda: read_observations(frame, id_column="id"))


def test_empty_tables(raises, make_csv):
    empty, header_only = make_csv("", "empty.csv"), make_csv("id,time,x\n", "header.csv")
    raises(DataError, "is empty", lambda: read_observations(empty))
    raises(DataError, "no data rows", lambda: read_observations(header_only, id_column="id"))
    raises(DataError, "no data rows", lambda: read_observations(_wide().iloc[:0], id_column="id"))
    raises(DataFileNotFoundError, "not found", lambda: read_observations(empty.parent / "absent.csv"))
    all_empty = _wide().assign(HR=np.nan, SBP=np.nan, Temp=np.nan)
    raises(DataError, "no numeric variable columns", lambda: read_observations(all_empty, id_column="id"))


def test_nan_ids(raises, make_csv):
    frame = _wide()
    frame.loc[[2, 5], "id"] = np.nan
    path = make_csv(frame)
    raises(DataError, "id column 'id' has 2 empty cell(s)", "row 2 (line 4), row 5 (line 7)", "fill or remove",
           lambda: read_observations(path, id_column="id"))


def test_long_layout_needs_both_columns(raises):
    raises(DataError, "needs both variable_column and value_column", "pass value_column=",
           lambda: read_observations(_long_from(_wide()), id_column="id", variable_column="variable"))
    raises(DataError, "value_column 'val' is not in the data",
           lambda: read_observations(_long_from(_wide()), id_column="id", variable_column="variable", value_column="val"))


def test_infinite_values_and_nan_times(raises):
    frame = _wide()
    frame.loc[1, "SBP"] = np.inf
    raises(DataError, "infinite value", "'SBP' at row 1", lambda: read_observations(frame, id_column="id"))
    numeric = pd.DataFrame({"id": [1, 1], "t": [0.0, np.nan], "x": [1.0, 2.0]})
    raises(DataError, "time column 't' has 1 empty or infinite cell(s)", "row 1",
           lambda: read_observations(numeric, id_column="id", time_column="t"))


def test_bad_options(raises):
    raises(DataError, "`duplicates` must be one of", lambda: read_observations(_wide(), id_column="id", duplicates="keep"))
    raises(DataError, "time_unit must be a positive duration", lambda: read_observations(_wide(), time_unit="fortnight"))
    raises(DataError, "must be different columns", lambda: read_observations(_wide(), id_column="time"))


# -- several series read without id_column ------------------------------------------------------------------
def test_several_series_without_id_column_name_the_id_column(raises, make_csv):
    wide = _wide().rename(columns={"id": "patient"})  # p2 in March, then p1 in January: times go back
    msg = raises(DataError, "times go back: row 2 (2021-01-01 00:00:00) comes after row 1 (2021-03-01 08:30:00)",
                 "the table looks like it holds several series",
                 "pass id_column='patient' (or sort=True if it is one series)", lambda: read_observations(wide))
    assert "sort the table by (id, time)" not in msg and "within series" not in msg
    stays = make_csv(wide.assign(patient=wide["patient"].map({"p1": 11, "p2": 12})))  # integer ids, in a file
    raises(DataError, "pass id_column='patient'", lambda: read_observations(stays))
    long = _long_from(_wide()).rename(columns={"id": "patient"}).iloc[::-1]  # one series per patient, reversed
    raises(DataError, "times go back", "sort=True", lambda: read_observations(
        long, variable_column="variable", value_column="value"))  # no grouping keeps times in order: no guess
    one_series = _wide().query("id == 'p1'").iloc[::-1].drop(columns="id")
    raises(DataError, "sort the table by (id, time), or pass sort=True", lambda: read_observations(one_series))


def _two_patients_at_the_same_times() -> pd.DataFrame:
    times = pd.date_range("2021-01-01", periods=6, freq="h").strftime("%Y-%m-%d %H:%M")
    return pd.DataFrame({"patient": ["a"] * 6 + ["b"] * 6, "time": list(times) * 2,
                         "HR": np.r_[np.full(6, 60.0), np.full(6, 90.0)]})


def test_sort_without_id_column_warns_when_series_are_merged():
    frame = _two_patients_at_the_same_times()
    with pytest.warns(DataWarning) as record:
        merged = read_observations(frame, sort=True)
    dropped, merge = (str(w.message) for w in record)  # the text column left out, then the merge
    assert "left out of the variable columns" in dropped and "'patient' (text, e.g. 'a')" in dropped
    assert "read as one series (no id_column), 6 observation(s) sharing a (time, variable)" in merge
    assert "told apart by column 'patient': pass id_column='patient'" in merge
    assert len(merged) == 1 and merged.read_counts["duplicates_merged"] == 6 and set(merged.value) == {75.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        assert len(read_observations(frame, id_column="patient", sort=True)) == 2
        repeated = frame.drop(columns="patient")  # one series measured twice a time: nothing tells them apart
        assert read_observations(repeated, sort=True).read_counts["duplicates_merged"] == 6


# -- text columns of a wide table ------------------------------------------------------------------------
def test_wide_text_columns_are_left_out_with_a_warning():
    frame = _wide().assign(note=["ok", "late", "ok", "ok", "late", "ok"], empty=np.nan)
    with pytest.warns(DataWarning, match=r"left out of the variable columns because they are not numbers: "
                                         r"'note' \(text, e\.g\. 'ok'\), 'empty' \(no values\); pass columns=\[\.\.\.\]"):
        obs = read_observations(frame, id_column="id")
    assert obs.variables == ("HR", "SBP", "Temp")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        read_observations(frame, id_column="id", columns=["HR", "SBP", "Temp"])  # chosen: nothing to warn about


# -- values float32 cannot hold, or far outside the rest of their variable ----------------------------------
def test_values_beyond_float32_are_refused_per_variable(raises, make_csv):
    frame = _wide()
    frame.loc[4, "SBP"] = -2e39
    path = make_csv(frame)
    raises(DataError, "variable 'SBP' holds 1 value(s) too large for float32", "-2e+39 at row 4 (line 6)",
           "divide it by 1e39", "leave it out", lambda: read_observations(path, id_column="id"))
    long = _long_from(_wide())
    long.loc[long["variable"] == "Temp", "value"] = 1e300
    raises(DataError, "variable 'Temp' holds 3 value(s) too large for float32",
           lambda: read_observations(long, id_column="id", variable_column="variable", value_column="value"))


def test_a_value_far_outside_its_variable_warns():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"id": np.repeat([1, 2], 150), "t": np.tile(np.arange(150.0), 2),
                          "x": rng.normal(1.0, 0.1, 300), "big": rng.normal(1e9, 1e7, 300)})
    frame.loc[200, "x"] = 5e8  # far outside x, though inside big's range: the rule is per variable
    with pytest.warns(DataWarning, match=r"variable 'x': 5e\+08 at row 200 \(99th percentile of \|x\|") as record:
        obs = read_observations(frame, id_column="id", time_column="t")
    assert len(record) == 1 and "big" not in str(record[0].message)
    assert obs.n_observations == 600  # read as it is


# -- decimal commas, time zones with daylight saving --------------------------------------------------------
def test_decimal_commas_in_a_long_table(raises, make_csv):
    rows = "".join(f"p{k};2021-01-01 0{h}:00;hr;{60 + h},{k}5\n" for k in range(2) for h in range(4))
    path = make_csv("id;time;variable;value\n" + rows)
    long = dict(id_column="id", variable_column="variable", value_column="value", sep=";")
    raises(DataError, "decimal comma? pass decimal=','", lambda: read_observations(path, **long))
    obs = read_observations(path, **long, decimal=",")
    np.testing.assert_array_equal(obs.value, [60.05, 61.05, 62.05, 63.05, 60.15, 61.15, 62.15, 63.15])


def test_daylight_saving_offsets_are_read_as_utc(make_csv):
    stamps = pd.date_range("2021-03-13 20:00", periods=12, freq="h", tz="America/New_York")  # over the switch
    frame = pd.DataFrame({"id": ["a"] * 12, "time": stamps, "x": np.arange(12.0)})
    obs = read_observations(make_csv(frame), id_column="id")
    assert str(obs.origins.tz) == "UTC" and obs.origins[0] == stamps[0].tz_convert("UTC")
    np.testing.assert_array_equal(obs.time, np.arange(12.0))  # hours apart, also across the switch


# -- ids as the file writes them ---------------------------------------------------------------------------
def _with_ids(ids) -> pd.DataFrame:
    return pd.DataFrame({"id": ids, "t": np.arange(float(len(ids))), "x": np.ones(len(ids))})


def test_csv_ids_are_kept_as_written(make_csv):
    padded = read_observations(make_csv("id,t,x\n007,0,1\n010,1,1\n007,2,1\n"), id_column="id", time_column="t")
    assert list(padded.series_ids) == ["007", "010"] and padded.series_ids.dtype.kind == "U"
    assert list(padded.to_frame()["id"].unique()) == ["007", "010"]
    plain = read_observations(make_csv(_with_ids([10, 7, -3, 0]), "plain.csv"), id_column="id", time_column="t")
    assert plain.series_ids.dtype == np.int64 and list(plain.series_ids) == [-3, 0, 7, 10]  # as before: by number
    for written in (["+7", "8"], ["7.0", "8"], ["-0", "8"]):  # not the canonical text of an integer: text
        path = make_csv(_with_ids(written), "other.csv")
        assert list(read_observations(path, id_column="id", time_column="t").series_ids) == sorted(written)
    frame_ids = read_observations(_with_ids(["007", "010"]), id_column="id", time_column="t")  # as given
    assert list(frame_ids.series_ids) == ["007", "010"]
    assert read_observations(_with_ids([7, 10]), id_column="id", time_column="t").series_ids.dtype == np.int64


def test_requests_match_an_id_by_its_text_or_its_integer(raises):
    numbers = read_observations(_with_ids([7, 10]), id_column="id", time_column="t")
    np.testing.assert_array_equal(series_codes(pd.Series([7, "7", 7.0, np.int64(10), "10"]), numbers, "at="),
                                  [0, 0, 0, 1, 1])
    raises(DataError, "names series the data does not hold: ['007']",
           lambda: series_codes(pd.Series(["007"]), numbers, "at="))
    text = read_observations(_with_ids(["007", "010"]), id_column="id", time_column="t")
    np.testing.assert_array_equal(series_codes(pd.Series(["010", "007"]), text, "at="), [1, 0])
    raises(DataError, "names series the data does not hold: [7]", lambda: series_codes(pd.Series([7]), text, "at="))
