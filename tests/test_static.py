"""Static covariates on the irregular road: read from a table's columns (one value per series) or made
from variables recorded once (``static_variables``), carried by ``ObservationSet``, standardised on the
train series with a known flag, read by the model beside every history, and kept through
``Forecaster`` fit / predict / save / load; the errors name the column, the series and the fix."""
import numpy as np
import pandas as pd
import pytest
import torch

from tsattn import Forecaster
from tsattn.data import DataError
from tsattn.data.io.observation_table import read_observations
from tsattn.data import ObservationDataModule
from tsattn.data.observations.observation_set import ObservationSet
from tsattn.data.observations.static import StaticScaler, variables_as_static
from tsattn.models.irregular import IrregularTransformer

from . import synthetic
from .synthetic import LONG

TINY = {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "dropout": 0.0, "time_features": 4}
QUIET = dict(max_epochs=2, enable_progress_bar=False, logger=False, enable_model_summary=False)


def with_static(n_series: int = 8, seed: int = 0) -> pd.DataFrame:
    """``synthetic.observations`` whose level is shifted by each series' ``size`` (a static column,
    repeated on its rows; unknown for the last series) and ``kind`` (0 / 1)."""
    table = synthetic.observations(n_series, 96, seed)
    k = table["patient"].str[1:].astype(int)
    table["size"] = np.where(k == n_series - 1, np.nan, 10.0 * k)
    table["kind"] = (k % 2).astype(float)
    table["value"] = table["value"] + table["size"].fillna(0.0) + 5 * table["kind"]
    return table


# -- reading -----------------------------------------------------------------------------------------
def test_static_columns_are_read_once_per_series_in_both_layouts():
    table = with_static()
    obs = read_observations(table, **LONG, static_columns=["size", "kind"])
    assert obs.static_names == ("size", "kind") and obs.variables == ("hr", "temp")
    np.testing.assert_array_equal(obs.static[:, 0], [0, 10, 20, 30, 40, 50, 60, np.nan])
    np.testing.assert_array_equal(obs.static[:, 1], [0, 1, 0, 1, 0, 1, 0, 1])
    wide = table.pivot_table(index=["patient", "hours"], columns="name", values="value").reset_index()
    wide = wide.merge(table.groupby("patient")[["size", "kind"]].first().reset_index(), on="patient")
    obs_wide = read_observations(wide, id_column="patient", time_column="hours", static_columns=["size", "kind"])
    assert obs_wide.variables == ("hr", "temp")                          # never variables
    np.testing.assert_array_equal(obs_wide.static, obs.static)
    sub = obs.subset([2, 0]).select_variables(["temp"])                   # carried through derived sets
    np.testing.assert_array_equal(sub.static[:, 0], [20, 0])


def test_static_column_errors_name_the_column_the_series_and_the_fix():
    table = with_static()
    varying = table.copy()
    varying.loc[varying.index[3], "size"] = 99.0                          # p0 holds 0 and 99
    with pytest.raises(DataError, match=r"static column 'size' varies within series 'p0' \(0 and 99\)"):
        read_observations(varying, **LONG, static_columns=["size"])
    with pytest.raises(DataError, match="static column 'age' is not in the data"):
        read_observations(table, **LONG, static_columns=["age"])
    text = table.assign(kind=np.where(table["kind"] > 0, "a", "b"))
    with pytest.raises(DataError, match="encode categories as numbers"):
        read_observations(text, **LONG, static_columns=["kind"])
    with pytest.raises(DataError, match="are the id, time, variable or value column"):
        read_observations(table, **LONG, static_columns=["patient"])
    with pytest.raises(DataError, match="distinct column names"):
        read_observations(table, **LONG, static_columns=["size", "size"])


def test_variables_recorded_once_become_static():
    table = synthetic.observations(3, 48, 0)
    start = table.groupby("patient")["hours"].min()
    extra = pd.DataFrame({"patient": ["p0", "p0", "p1", "p2"],
                          "hours": [start["p0"], 5.0, start["p1"] + 3.0, start["p2"]], "name": "age",
                          "value": [61.0, 62.0, 50.0, 45.0]})
    obs = read_observations(pd.concat([table, extra]), **LONG, sort=True)
    moved = variables_as_static(obs, ["age"])
    assert moved.variables == obs.variables and moved.static_names == ("age",)
    # the value at each series' first time; p1's comes later (it could be a target): unknown
    np.testing.assert_array_equal(moved.static[:, 0], [61.0, np.nan, 45.0])
    np.testing.assert_array_equal(moved.value, obs.value)                    # the observations kept
    with pytest.raises(DataError, match="not variables of the data"):
        variables_as_static(obs, ["height"])


def test_static_scaler_standardises_and_flags_unknown_values():
    static = np.array([[1.0, 5.0], [3.0, np.nan], [np.nan, 5.0]])
    scaler = StaticScaler.fit(["a", "b"], static)
    out = scaler.transform(static)
    np.testing.assert_allclose(out[:, 0], [-1.0, 1.0, 0.0])
    np.testing.assert_allclose(out[:, 1], [0.0, 0.0, 0.0])             # constant: centred, std 1
    np.testing.assert_array_equal(out[:, 2:], [[1, 1], [1, 0], [0, 1]])
    again = StaticScaler.from_record(scaler.to_record())
    np.testing.assert_array_equal(again.transform(static), out)


def test_an_observation_set_keeps_its_statics_in_npz(tmp_path):
    obs = read_observations(with_static(), **LONG, static_columns=["size"])
    back = ObservationSet.load_npz(obs.save_npz(tmp_path / "set.npz"))
    np.testing.assert_array_equal(back.static, obs.static)
    assert back.static_names == ("size",)
    plain = read_observations(synthetic.observations(2, 24, 0), **LONG)
    assert ObservationSet.load_npz(plain.save_npz(tmp_path / "plain.npz")).static is None


def test_batches_carry_the_train_series_scaled_statics():
    dm = ObservationDataModule(with_static(), origins=[48.0], lookback=48.0, horizon=24.0, batch_size=4,
                               split_fractions=[0.5, 0.25, 0.25], static_columns=["size", "kind"], **LONG)
    dm.setup()
    batch = next(iter(dm.train_dataloader()))
    assert batch["static"].shape == (batch["series"].shape[0], 4) and dm.n_static == 2
    train = dm.split_series("train")
    sizes = dm.observations.static[train, 0]
    known = np.isfinite(sizes)
    assert dm.static_scaler.mean[0] == pytest.approx(sizes[known].mean())   # the train series only
    assert dm.record()["fitted"]["static"]["names"] == ["size", "kind"]


def test_the_model_reads_statics_and_a_model_without_them_is_unchanged():
    torch.manual_seed(0)
    plain = IrregularTransformer(2, **TINY)
    torch.manual_seed(0)
    static = IrregularTransformer(2, n_static=2, **TINY)
    extra = dict(static.named_parameters())
    for name, a in plain.named_parameters():
        assert torch.equal(a, extra.pop(name)), name                      # the same draws
    assert sorted(extra) == ["static_embedding.bias", "static_embedding.weight"]
    x = dict(x_time=-torch.rand(2, 5), x_var=torch.randint(0, 2, (2, 5)), x_value=torch.randn(2, 5),
             x_mask=torch.ones(2, 5, dtype=torch.bool), y_time=torch.rand(2, 3), y_var=torch.randint(0, 2, (2, 3)))
    one = static(**x, static=torch.tensor([[1.0, 0.0, 1.0, 1.0]] * 2))
    two = static(**x, static=torch.tensor([[-1.0, 0.0, 1.0, 1.0]] * 2))
    assert not torch.allclose(one, two)
    with pytest.raises(ValueError, match="reads 2 static covariates"):
        static(**x)
    with pytest.raises(ValueError, match="n_static"):
        IrregularTransformer(2, n_static=-1)


# -- through Forecaster ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def static_fit():
    f = Forecaster("irregular", lookback=48.0, horizon=24.0, model_kwargs=TINY, lr=3e-3, lr_schedule="constant",
                   batch_size=4, seed=0)
    return f.fit(with_static(), origins=[48.0], split_fractions=[0.5, 0.25, 0.25], static_columns=["size", "kind"],
                 **LONG, **QUIET)


def test_fit_predict_save_load_with_statics(static_fit, tmp_path):
    f, table = static_fit, with_static()
    assert f.module.hparams.n_static == 2
    before = f.predict(table, at=[100.0, 110.0])
    g = Forecaster.load(f.save(tmp_path / "m.ckpt"))
    pd.testing.assert_frame_equal(g.predict(table, at=[100.0, 110.0]), before, check_exact=True)
    other = table.assign(size=table["size"] + 100.0)                      # the same histories, other statics
    moved = g.predict(other, at=[100.0, 110.0])
    assert not np.allclose(moved["value"], before["value"])
    assert np.isfinite(g.evaluate("test", data=table)["mse"])
    frame = g.backtest(table, cutoffs=[60.0], horizon=12.0)
    assert np.isfinite(frame["forecast"]).all()


def test_statics_missing_or_varying_at_forecast_time_are_errors(static_fit):
    table = with_static()
    with pytest.raises(DataError, match="static column 'kind' is not in the data"):
        static_fit.predict(table.drop(columns=["kind"]), at=[100.0])
    varying = table.copy()
    varying.loc[varying.index[0], "size"] = 7.0
    with pytest.raises(DataError, match="varies within series"):
        static_fit.predict(varying, at=[100.0])


def test_reference_forecasts_ignore_statics_and_window_models_refuse_them():
    f = Forecaster("last_observation", lookback=48.0, horizon=24.0)
    f.fit(with_static(), origins=[48.0], split_fractions=[0.5, 0.25, 0.25], static_columns=["size"], **LONG)
    assert np.isfinite(f.predict(with_static(), at=[100.0])["value"]).all()
    with pytest.raises(ValueError, match=r"\[.static_columns.\] apply to the models \[.irregular.\]"):
        Forecaster("patchtst", lookback=48, horizon=12).fit(synthetic.series(300), target="OT", static_columns=["a"])
