"""Forecaster on irregular series (model="irregular"): fit on long / wide tables with gaps, forecast at
requested times, save / load, evaluate, and the errors.

Forecasts before and after save / load are compared exactly: both go through the same code (the data
read with the fit's options onto the fit's variables, scaled with the fit's scaler statistics, stored
exactly as float64, then ``ForecastModule.forecast`` on the eager model) on the same
weights, in one process at one thread count, so they are the same floating-point operations on the
same bits. Metrics over many targets are compared with a relative tolerance of 1e-6.
"""
import os

import numpy as np
import pandas as pd
import pytest
import torch

from tsattn import Forecaster
from tsattn.data import DataError

TINY = {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "dropout": 0.0, "time_features": 4}
SETTINGS = dict(attention="continuous", sink="learned", lookback=24.0, horizon=12.0, model_kwargs=TINY, lr=3e-3,
                lr_schedule="constant", batch_size=16, seed=1)
FIT = dict(max_epochs=2, enable_progress_bar=False, logger=False)
LONG = dict(id_column="patient", time_column="when", variable_column="name", value_column="reading")
# variable: (level, amplitude, mean gap in hours); "pressure" lives around 1000, "temp" around 37
VARIABLES = {"hr": (70.0, 10.0, 1.5), "pressure": (1000.0, 30.0, 2.5), "temp": (37.0, 0.5, 4.0)}


def long_table(n_series: int = 4, hours: float = 240.0, seed: int = 0) -> pd.DataFrame:
    """Every variable of every series at its own random times (to the minute), datetimes, gaps everywhere."""
    rng = np.random.default_rng(seed)
    parts = []
    for k in range(n_series):
        start = pd.Timestamp("2024-01-01") + pd.Timedelta(minutes=90 * k)
        for name, (level, amplitude, gap) in VARIABLES.items():
            t = np.cumsum(rng.exponential(gap, size=int(2 * hours / gap)))
            minutes = np.unique(np.round(t[t < hours] * 60))  # distinct times per variable
            hours_ = minutes / 60
            value = level + amplitude * np.sin(2 * np.pi * hours_ / 24 + k) + 0.05 * amplitude * rng.standard_normal(hours_.size)
            parts.append(pd.DataFrame({"patient": f"p{k}", "when": start + pd.to_timedelta(minutes, unit="min"),
                                       "name": name, "reading": value}))
    return pd.concat(parts).sort_values(["patient", "when", "name"]).reset_index(drop=True)


def wide_table(long: pd.DataFrame) -> pd.DataFrame:
    """The same observations, one column per variable, NaN = not observed."""
    wide = long.pivot(index=["patient", "when"], columns="name", values="reading").reset_index()
    wide.columns.name = None
    return wide


def last_times(table: pd.DataFrame) -> pd.Series:
    return table.groupby("patient")["when"].max()


@pytest.fixture(scope="module")
def long_fit(tmp_path_factory):
    root = tmp_path_factory.mktemp("irregular")
    path = root / "observations.csv"
    table = long_table()
    table.to_csv(path, index=False)
    f = Forecaster("irregular", **SETTINGS)
    f.fit(path, **LONG, **FIT)
    return f, path, table


def requests(table: pd.DataFrame) -> pd.DataFrame:
    """A long request table: three series, mixed variables, times 30 min to 11 h after each last observation."""
    last = last_times(table)
    return pd.DataFrame({
        "patient": ["p0", "p1", "p1", "p3"],
        "when": [last["p0"] + pd.Timedelta("2h"), last["p1"] + pd.Timedelta("30min"),
                 last["p1"] + pd.Timedelta("11h"), last["p3"] + pd.Timedelta("5h")],
        "name": ["hr", "pressure", "temp", "pressure"],
    })


def test_round_trip_on_a_long_table_forecasts_exactly_the_same(long_fit, tmp_path, monkeypatch):
    f, path, table = long_fit
    at = requests(table)
    before = f.predict(at=at)
    assert list(before.columns) == ["patient", "when", "name", "reading"]  # the layout it was fit on
    pd.testing.assert_frame_equal(before[["patient", "when", "name"]], at)  # one row per request, as asked
    assert np.isfinite(before["reading"]).all()
    ckpt = f.save(tmp_path / "model.ckpt")
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    g = Forecaster.load(ckpt)
    pd.testing.assert_frame_equal(g.predict(at=at), before, check_exact=True)  # the source CSV is re-read
    pd.testing.assert_frame_equal(g.predict(pd.read_csv(path), at=at), before, check_exact=True)
    pd.testing.assert_frame_equal(f.predict(pd.read_csv(path), at=at), before, check_exact=True)
    assert g.evaluate("test") == pytest.approx(f.evaluate("test"), rel=1e-6)
    record, scaler = g.data_record, f.datamodule.scaler  # the fit's scaler travels exactly
    fitted = record["fitted"]
    assert fitted["scaler"]["offset"] == scaler.offset.tolist() and fitted["scaler"]["scale"] == scaler.scale.tolist()
    assert fitted["time_unit_ns"] == pd.Timedelta("1h").value and fitted["horizon"] == 12.0
    assert record["options"]["lookback"] == 24.0 and record["version"] == 1 and record["task"] == "observations"
    assert os.listdir(elsewhere) == []


def test_times_for_every_series_and_variable(long_fit):
    f, _, table = long_fit
    last = last_times(table)
    times = [last.max() + pd.Timedelta("1h"), last.max() + pd.Timedelta("3h")]
    assert last.max() - last.min() < pd.Timedelta("9h")  # so that both times are within the horizon of every series
    out = f.predict(at=times)
    expected = pd.DataFrame([(p, t, v) for p in last.index for t in times for v in VARIABLES],
                            columns=["patient", "when", "name"])
    pd.testing.assert_frame_equal(out[["patient", "when", "name"]], expected)  # series, then time, then variable
    pd.testing.assert_frame_equal(f.predict(at=[str(t) for t in times]), out, check_exact=True)  # text is parsed
    # one request at a time gives the same forecast: a query depends on its own time and variable only
    one = f.predict(at=pd.DataFrame({"patient": ["p2"], "when": [times[1]], "name": ["temp"]}))
    row = out[(out["patient"] == "p2") & (out["when"] == times[1]) & (out["name"] == "temp")]
    np.testing.assert_allclose(one["reading"].to_numpy(), row["reading"].to_numpy(), rtol=1e-5)


def test_default_forecasts_every_variable_at_the_median_step(long_fit):
    f, _, table = long_fit
    out = f.predict()
    assert list(out.columns) == ["patient", "when", "name", "reading"]
    for patient, own in table.groupby("patient"):
        times = np.unique(own["when"].to_numpy())
        step = pd.Timedelta(np.median(np.diff(times)))
        k = int(pd.Timedelta("12h") / step)
        expected = own["when"].max() + step * np.arange(1, k + 1)
        got = out[out["patient"] == patient]
        assert len(got) == 3 * k
        np.testing.assert_array_equal(got["name"].to_numpy(), np.tile(["hr", "pressure", "temp"], k))
        shown = pd.DatetimeIndex(got["when"].to_numpy()[::3])
        assert np.abs((shown - expected).total_seconds()).max() < 1e-3


def test_forecasts_are_in_original_units(long_fit):
    f, _, _ = long_fit
    out = f.predict()
    by_variable = out.groupby("name")["reading"]
    assert by_variable.min()["pressure"] > 900 and by_variable.max()["pressure"] < 1100
    assert by_variable.min()["hr"] > 40 and by_variable.max()["hr"] < 100
    assert by_variable.min()["temp"] > 35 and by_variable.max()["temp"] < 39


def test_evaluate_reports_the_protocol_metrics_with_the_fit_scale(long_fit):
    f, path, table = long_fit
    test, val = f.evaluate("test"), f.evaluate("val")
    assert set(test) == {"mse", "mae", "rmse", "mse_orig", "mae_orig", "rmse_orig", "smape_orig", "mase"} and test != val
    assert all(np.isfinite(v) and v > 0 for v in test.values())
    assert f.evaluate("test", data=pd.read_csv(path)) == pytest.approx(test, rel=1e-6)
    # other data is scaled with the fit's scaler, not its own: a variable ten times larger is far off
    other = table.assign(reading=np.where(table["name"] == "hr", table["reading"] * 10, table["reading"]))
    assert f.evaluate("test", data=other)["mse"] > 10 * test["mse"]


def test_wide_table_with_gaps_round_trip(tmp_path):
    table = long_table(seed=3)
    wide = wide_table(table)
    assert wide[["hr", "pressure", "temp"]].isna().to_numpy().mean() > 0.5  # mostly gaps
    f = Forecaster("irregular", **SETTINGS)
    f.fit(wide, id_column="patient", **FIT)  # the time column "when" is detected by name
    last = last_times(table)
    at = pd.DataFrame({"patient": ["p1", "p2"], "when": [last["p1"] + pd.Timedelta("1h"), last["p2"] + pd.Timedelta("2h")],
                       "temp": np.nan, "hr": np.nan})  # wide requests: these variables at these times
    before = f.predict(at=at)
    assert list(before.columns) == ["patient", "when", "temp", "hr"] and len(before) == 2
    assert np.isfinite(before[["temp", "hr"]].to_numpy()).all()
    every = f.predict(at=at[["patient", "when"]])
    assert list(every.columns) == ["patient", "when", "hr", "pressure", "temp"]
    np.testing.assert_allclose(every[["temp", "hr"]].to_numpy(), before[["temp", "hr"]].to_numpy(), rtol=1e-5)
    as_long = f.predict(at=pd.DataFrame({"patient": ["p1"], "when": at["when"][:1], "variable": ["hr"]}))
    assert list(as_long.columns) == ["patient", "when", "hr", "pressure", "temp"]  # the wide layout, NaN elsewhere
    assert as_long[["pressure", "temp"]].isna().all(axis=None) and np.isfinite(as_long["hr"]).all()
    g = Forecaster.load(f.save(tmp_path / "wide.ckpt"))
    with pytest.raises(RuntimeError, match="pass the data"):
        g.predict(at=at)  # a DataFrame is not kept in the checkpoint
    pd.testing.assert_frame_equal(g.predict(wide, at=at), before, check_exact=True)
    reordered = wide[["when", "temp", "patient", "hr", "pressure"]]  # columns in another order: read by name
    pd.testing.assert_frame_equal(g.predict(reordered, at=at), before, check_exact=True)
    pd.testing.assert_frame_equal(g.predict(wide), f.predict(), check_exact=True)


def test_the_model_reads_only_the_observed_cells(tmp_path, monkeypatch):
    """No imputation: the history observations the model reads are exactly the observed cells of the
    wide table within `lookback` of each series' last observation."""
    table = long_table(seed=5)
    wide = wide_table(table)
    f = Forecaster("irregular", **SETTINGS)
    f.fit(wide, id_column="patient", **FIT)
    read = []
    forward = f.module.forward
    monkeypatch.setattr(f.module, "forward", lambda batch: read.append(batch) or forward(batch))
    last = last_times(table)
    f.predict(at=[last.max() + pd.Timedelta("1h")])
    seen = sum(int(batch["x_mask"].sum()) for batch in read)
    window = wide["when"] >= wide["patient"].map(last) - pd.Timedelta("24h")
    cells = int(wide.loc[window, ["hr", "pressure", "temp"]].notna().to_numpy().sum())
    assert seen == cells
    times = np.concatenate([batch["x_time"][batch["x_mask"]].numpy() for batch in read])
    assert times.min() >= -24.0 and times.max() == 0.0  # hours before the last observation, the last at 0


def test_fixed_origins_all_history_and_numeric_times(tmp_path):
    """Numbers as times (hours since admission), fixed origins, lookback=None (all history) and
    horizon=None (what the targets reach); forecasts come back at numeric times."""
    table = long_table(n_series=5, hours=60.0, seed=2)
    first = table.groupby("patient")["when"].transform("min")
    table = table.assign(when=(table["when"] - first) / pd.Timedelta("1h"))
    f = Forecaster("irregular", **{**SETTINGS, "lookback": None, "horizon": None})
    f.fit(table, origins=[36.0], **LONG, **FIT)
    span = f.data_record["fitted"]["horizon"]
    assert 23.0 < span < 24.0  # the latest target of a train sample, 36 h -> just under 60 h
    assert f.horizon == span and f.lookback is None  # the spans it was fit with, as load() reports them
    assert f._given_spans == (None, None)  # a refit samples with what was given, not the last fit's span
    assert f.data_record["fitted"]["times"] == "numeric" and f.datamodule.split == "series"
    last = table.groupby("patient")["when"].max()
    out = f.predict(at=[last.max() + 0.5])
    assert out["when"].dtype == np.float64 and (out["when"] == last.max() + 0.5).all()
    with pytest.raises(DataError, match="must hold finite numbers"):
        f.predict(at=[pd.Timestamp("2024-01-03")])
    read = []
    forward = f.module.forward
    f.module.forward = lambda batch: read.append(batch) or forward(batch)
    f.predict(at=[last.max() + 0.5])
    assert sum(int(batch["x_mask"].sum()) for batch in read) == len(table)  # all of the history


def test_ids_come_back_as_the_file_writes_them(tmp_path):
    """Ids read from a CSV file stay as written: 007 is not 7, in the forecasts and in requests."""
    table = long_table(n_series=2, hours=240.0, seed=4)
    table["patient"] = table["patient"].map({"p0": "007", "p1": "010"})
    path = tmp_path / "padded.csv"
    table.to_csv(path, index=False)
    f = Forecaster("irregular", **SETTINGS)
    f.fit(path, **LONG, **FIT)
    last = last_times(table)
    at = pd.DataFrame({"patient": ["007", "010"], "when": [last["007"] + pd.Timedelta("1h"),
                                                           last["010"] + pd.Timedelta("2h")], "name": ["hr", "temp"]})
    out = f.predict(at=at)
    assert list(out["patient"]) == ["007", "010"] and np.isfinite(out["reading"]).all()
    assert set(f.predict()["patient"]) == {"007", "010"}
    with pytest.raises(DataError, match=r"names series the data does not hold: \[7, 10\]"):
        f.predict(at=at.assign(patient=[7, 10]))


@pytest.fixture(scope="module")
def errors_fit(long_fit):
    f, _, table = long_fit
    return f, table, last_times(table)


@pytest.mark.parametrize(
    "make, phrase",
    [
        (lambda last: pd.DataFrame({"patient": ["p0"], "when": [last["p0"]], "name": ["hr"]}), "at or before"),
        (lambda last: pd.DataFrame({"patient": ["p0"], "when": [last["p0"] - pd.Timedelta("3h")], "name": ["hr"]}),
         "at or before"),
        (lambda last: pd.DataFrame({"patient": ["p9"], "when": [last["p0"] + pd.Timedelta("1h")], "name": ["hr"]}),
         r"does not hold: \['p9'\]"),
        (lambda last: pd.DataFrame({"patient": ["p0"], "when": [last["p0"] + pd.Timedelta("1h")], "name": ["spo2"]}),
         r"not fit on: \['spo2'\]"),
        (lambda last: pd.DataFrame({"patient": ["p0"], "when": [last["p0"] + pd.Timedelta("13h")], "name": ["hr"]}),
         "more than horizon = 12"),
        (lambda last: pd.DataFrame({"patient": ["p0", "p0"], "when": [last["p0"] + pd.Timedelta("1h")] * 2,
                                    "name": ["hr", "hr"]}), "more than once"),
        (lambda last: pd.DataFrame({"id": ["p0"], "when": [last["p0"] + pd.Timedelta("1h")]}), r"needs the columns \['patient'\]"),
        (lambda last: [last.max() + pd.Timedelta("1h"), last.min() + pd.Timedelta("13h")], "more than horizon"),
        (lambda last: [1.5], "holds numbers, not dates"),
    ],
)
def test_bad_requests_name_the_problem(errors_fit, make, phrase):
    f, _, last = errors_fit
    with pytest.raises(DataError, match=phrase):
        f.predict(at=make(last))


def test_requests_exactly_at_the_horizon_are_allowed(errors_fit):
    f, _, last = errors_fit
    out = f.predict(at=pd.DataFrame({"patient": ["p0"], "when": [last["p0"] + pd.Timedelta("12h")], "name": ["hr"]}))
    assert len(out) == 1 and np.isfinite(out["reading"]).all()


def test_bad_data_for_a_fitted_model(errors_fit):
    f, table, _ = errors_fit
    extra = pd.concat([table, pd.DataFrame({"patient": ["p0"], "when": [table["when"].max()], "name": ["spo2"],
                                            "reading": [97.0]})])
    with pytest.raises(DataError, match=r"variables \['spo2'\] that the model was not fit on"):
        f.predict(extra)
    numbers = table.assign(when=np.arange(len(table), dtype=float))
    with pytest.raises(DataError, match="times are numbers"):
        f.predict(numbers)
    # a series whose every cell is empty has no history: an error naming it
    wide = wide_table(table)
    empty = pd.DataFrame({"patient": ["p7"], "when": [table["when"].max()]})
    g = Forecaster("irregular", **SETTINGS)
    g.fit(wide, id_column="patient", **FIT)
    with pytest.raises(DataError, match=r"no observation in the data.*'p7'.*at=None forecasts every series"):
        g.predict(pd.concat([wide, empty]))      # the default requests: the advice is about the data or at=
    later = table["when"].max() + pd.Timedelta("1h")
    with pytest.raises(DataError, match=r"no observation in the data.*'p7'.*leave them out of at="):
        g.predict(pd.concat([wide, empty]), at=pd.DataFrame({"patient": ["p0", "p7"], "when": [later, later]}))
    # a variable the data never observes is simply not observed: forecasts still come
    without_temp = table[table["name"] != "temp"]
    out = f.predict(without_temp, at=pd.DataFrame({"patient": ["p0"], "name": ["temp"],
                                                   "when": [without_temp["when"].max() + pd.Timedelta("1h")]}))
    assert np.isfinite(out["reading"]).all()


def test_fit_errors(long_fit):
    _, path, table = long_fit
    with pytest.raises(ValueError, match=r"\['target'\] apply to the models \['decoder', 'patchtst'\] \(and the other task's reference forecasts\) only"):
        Forecaster("irregular", **SETTINGS).fit(table, target="hr", **LONG, **FIT)
    with pytest.raises(ValueError, match=r"\['id_column', 'value_column', 'variable_column'\] apply to the models \['irregular'\]"):
        Forecaster("patchtst", lookback=48, horizon=12).fit(path, **LONG, **FIT)
    with pytest.raises(DataError, match="rolling forecast origins .* need a history and a target span"):
        Forecaster("irregular", model_kwargs=TINY).fit(table, **LONG, **FIT)
    with pytest.raises(DataError, match=r"have no observation \[-24, 0\) to forecast from at origin 0"):
        Forecaster("irregular", **SETTINGS).fit(table, origins=[0.0], **LONG, **FIT)  # nothing before time 0
    with pytest.raises(DataError, match=r"the val and test split\(s\) hold no forecasting samples"):
        Forecaster("irregular", **{**SETTINGS, "horizon": 20.0}).fit(table, split_fractions=(0.85, 0.05, 0.1),
                                                                     **LONG, **FIT)


@pytest.mark.parametrize("kwargs", [dict(lookback="24"), dict(lookback=0.0), dict(horizon=-1.0), dict(horizon=True),
                                    dict(horizon=float("inf")), dict(lookback=np.nan)])
def test_constructor_validates_spans(kwargs):
    with pytest.raises(ValueError, match="must be a finite number > 0") as info:
        Forecaster("irregular", model_kwargs=TINY, **kwargs)
    assert next(iter(kwargs)) in str(info.value) and "pass" in str(info.value)


def test_window_models_take_no_request_times():
    with pytest.raises(ValueError, match="at= applies to observation models"):
        Forecaster("patchtst").predict(at=[pd.Timestamp("2024-01-01")])


def test_max_series_reads_the_first_series_only(tmp_path):
    table = long_table(n_series=6, hours=60.0, seed=3)
    f = Forecaster("irregular", **{**SETTINGS, "horizon": None})
    table.to_csv(tmp_path / "t.csv", index=False)
    f.fit(tmp_path / "t.csv", origins=[36.0], max_series=5, split_fractions=[0.6, 0.2, 0.2], **LONG, **FIT)
    assert len(f.datamodule.observations) == 5
    path = f.save(tmp_path / "m.ckpt")
    g = Forecaster.load(path)
    assert len(g._datamodule(None).observations) == 5  # the fit's own source is re-read the fit's way
    assert set(g.predict(table)["patient"]) == {f"p{k}" for k in range(6)}  # no limit on other data
    assert g._given_spans == (24.0, None) and g.horizon == f.horizon  # a refit samples as f's would


def test_spans_follow_the_latest_fit():
    table = long_table(n_series=5, hours=60.0, seed=2)
    first = table.groupby("patient")["when"].transform("min")
    table = table.assign(when=(table["when"] - first) / pd.Timedelta("1h"))
    f = Forecaster("irregular", **{**SETTINGS, "lookback": None, "horizon": None})
    fills = torch.utils.deterministic.fill_uninitialized_memory
    f.fit(table, origins=[36.0], **LONG, **FIT)
    assert torch.utils.deterministic.fill_uninitialized_memory == fills  # the fit turns it off only while it runs
    assert 23.0 < f.horizon < 24.0
    f.fit(table, origins=[12.0], **LONG, **FIT)
    assert 47.0 < f.horizon < 48.0 and f.horizon == f.data_record["fitted"]["horizon"]


def test_spans_set_by_hand_are_validated_and_fixed_after_a_fit(errors_fit):
    g = Forecaster("irregular", **SETTINGS)
    g.lookback, g.horizon = 36.0, 6.0                     # before a fit: what the fit samples with
    assert (g.lookback, g.horizon) == (36.0, 6.0) and g._given_spans == (36.0, 6.0)
    with pytest.raises(ValueError, match="horizon.*must be a finite number > 0"):
        g.horizon = -1.0
    assert g.horizon == 6.0                               # a refused value changes nothing
    w = Forecaster("patchtst")
    w.lookback = np.int64(48)
    assert w.lookback == 48 and type(w.lookback) is int
    with pytest.raises(ValueError, match="lookback"):
        w.lookback = 2.5
    f, _, _ = errors_fit                                  # after a fit the spans are the model's
    before = (f.lookback, f.horizon, f._given_spans)
    with pytest.raises(ValueError, match=r"horizon is the span the model was fit with .*new Forecaster"):
        f.horizon = 1.0
    assert (f.lookback, f.horizon, f._given_spans) == before


@pytest.fixture(scope="module")
def numeric_fit():
    """Numeric times (hours since admission), one fixed origin at 36 h, history 24 h, horizon 12 h."""
    table = long_table(n_series=6, hours=60.0, seed=4)
    first = table.groupby("patient")["when"].transform("min")
    table = table.assign(when=(table["when"] - first) / pd.Timedelta("1h"))
    f = Forecaster("irregular", **SETTINGS)
    f.fit(table, origins=[36.0], **LONG, **FIT)
    return f, table


def test_origin_forecasts_as_the_model_was_trained_and_evaluated(numeric_fit):
    # predict(origin=36) on the whole records = the module's forecast of the test samples cut at 36 h
    f, table = numeric_fit
    ds, dm = f.datamodule.test_dataset, f.datamodule
    batch = ds.batch(range(len(ds)))
    expected = f.module.forecast(batch)[batch["y_mask"]].double().numpy()
    rows, cols = np.nonzero(batch["y_mask"].numpy())
    at = pd.DataFrame({
        "patient": [dm.observations.series_ids[int(batch["series"][r])] for r in rows],
        "when": (batch["y_time"].double().numpy() + batch["origin"].numpy()[:, None])[rows, cols],
        "name": [dm.variables[int(v)] for v in batch["y_var"].numpy()[rows, cols]],
    })
    assert len(at) > 20 and at["when"].min() >= 36.0 - 1e-4        # targets start at the origin, as in training
    got = f.predict(table, at=at, origin=36.0)["reading"].to_numpy()
    # the same model on the same history; the batches group series differently (other padding), so
    # equal up to float32 rounding of the scores, not bit for bit
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=1e-5 * np.abs(expected).max())


def test_origin_reads_nothing_at_or_after_it(numeric_fit):
    f, table = numeric_fit
    at = pd.DataFrame({"patient": ["p0", "p2", "p5"], "when": [36.0, 40.5, 47.9], "name": ["hr", "temp", "pressure"]})
    before = f.predict(table, at=at, origin=36.0)
    later = table["when"] >= 36.0
    changed = table.assign(reading=np.where(later, table["reading"] * 3 + 5, table["reading"]))
    extra = pd.DataFrame({"patient": ["p0"], "when": [36.0], "name": ["hr"], "reading": [999.0]})
    after = f.predict(pd.concat([changed, extra]).sort_values(["patient", "when"], kind="stable"), at=at, origin=36.0)
    pd.testing.assert_frame_equal(after, before, check_exact=True)   # same history, same code: same bits
    # the default origin (each series' last observation) does read them
    assert not np.allclose(f.predict(changed)["reading"], f.predict(table)["reading"])


def test_origin_errors(numeric_fit):
    f, table = numeric_fit
    at = pd.DataFrame({"patient": ["p0"], "when": [35.0], "name": ["hr"]})
    with pytest.raises(DataError, match=r"before the forecast origin.*\(origin 36"):
        f.predict(table, at=at, origin=36.0)
    with pytest.raises(DataError, match=r"more than horizon = 12 time units after their series' origin"):
        f.predict(table, at=at.assign(when=48.5), origin=36.0)
    with pytest.raises(DataError, match="origin must hold finite numbers"):
        f.predict(table, origin=pd.Timestamp("2024-01-02"))
    with pytest.raises(DataError, match="one time for every series"):
        f.predict(table, origin=[36.0, 37.0])
    with pytest.raises(DataError, match=r"no observation in the history window before origin=.*'p0'"):
        f.predict(table, at=at.assign(when=0.5), origin=0.0)
    out = f.predict(table, origin=36.0)                     # default requests: from the origin on
    assert out["when"].min() > 36.0 and out["when"].max() <= 48.0 + 1e-9
    with pytest.raises(ValueError, match="origin= applies to observation models"):
        Forecaster("patchtst").predict(origin=3)


def test_value_norm_scales_are_set_from_the_fit_train_data_and_saved(tmp_path):
    """``value_norm="variable"``: the fit sets each variable's center, spread and step from its train samples
    (``variable_scales`` over the train loader), and save / load keeps them."""
    from tsattn.models.value_scales import variable_scales

    table = long_table()
    f = Forecaster("irregular", **dict(SETTINGS, model_kwargs=dict(TINY, residual=True, value_norm="variable")))
    f.fit(table, **LONG, max_epochs=1, enable_progress_bar=False, logger=False, enable_checkpointing=False)
    dm, net = f.datamodule, f.module.net
    for buffer, want in zip((net.value_scales.center, net.value_scales.spread, net.value_scales.step),
                            variable_scales(dm.train_dataloader(), dm.n_variables)):
        torch.testing.assert_close(buffer, want.float(), rtol=1e-6, atol=1e-7)
    assert (net.value_scales.spread != 1).all() and (net.value_scales.step != 1).all()        # set, not the initial ones
    g = Forecaster.load(f.save(tmp_path / "model.ckpt"))
    assert torch.equal(g.module.net.value_scales.step, net.value_scales.step)
    at = requests(table)
    pd.testing.assert_frame_equal(g.predict(table, at=at), f.predict(table, at=at), check_exact=True)


def test_residual_start_mean_is_set_from_the_fit_train_data_and_saved(tmp_path):
    """``residual_start="mean"``: the fit sets each variable's start from its train samples (the
    last-observation baseline's mean: ``variable_means`` over the train loader), and save / load keeps it."""
    from tsattn.models.baselines import variable_means

    table = long_table()
    f = Forecaster("irregular", **dict(SETTINGS, model_kwargs=dict(TINY, residual=True, residual_start="mean")))
    f.fit(table, **LONG, max_epochs=1, enable_progress_bar=False, logger=False, enable_checkpointing=False)
    dm = f.datamodule
    want = variable_means(dm.train_dataloader(), dm.n_variables).float()
    torch.testing.assert_close(f.module.net.start_value, want, rtol=1e-6, atol=1e-7)
    assert want.abs().min() > 0                          # set (standard scaling: near the "zero" start; min-max: far)
    g = Forecaster.load(f.save(tmp_path / "model.ckpt"))
    assert torch.equal(g.module.net.start_value, f.module.net.start_value)
    at = requests(table)
    pd.testing.assert_frame_equal(g.predict(table, at=at), f.predict(table, at=at), check_exact=True)


def test_history_dropout_trains_through_forecaster_and_forecasts_deterministically(tmp_path):
    """The training-only augmentation through ``Forecaster``: the fit runs, the option is kept by save / load,
    and forecasts (eval mode) repeat exactly."""
    table = long_table()
    kwargs = dict(TINY, residual=True, history_dropout=0.2, history_variable_dropout=0.2)
    f = Forecaster("irregular", **dict(SETTINGS, model_kwargs=kwargs))
    f.fit(table, **LONG, max_epochs=1, enable_progress_bar=False, logger=False, enable_checkpointing=False)
    at = requests(table)
    first = f.predict(table, at=at)
    pd.testing.assert_frame_equal(f.predict(table, at=at), first, check_exact=True)
    g = Forecaster.load(f.save(tmp_path / "model.ckpt"))
    assert (g.module.net.history_dropout, g.module.net.history_variable_dropout) == (0.2, 0.2)
    pd.testing.assert_frame_equal(g.predict(table, at=at), first, check_exact=True)
