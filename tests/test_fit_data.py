"""benchmarks/fit_data.py: what the benchmark scripts read again from a fitted observation model."""
import numpy as np
import pytest

from tsattn import Forecaster

from .synthetic import LONG, observations

TINY = {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "dropout": 0.0}
FIT = dict(max_epochs=1, limit_train_batches=1, enable_progress_bar=False, logger=False, enable_checkpointing=False)


@pytest.fixture(scope="module")
def fit_data(benchmark_script):
    return benchmark_script("fit_data")


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("fit_data") / "obs.csv"
    observations(n_series=10, hours=48, seed=0, resolution=0.5, id_format="p{:02d}").to_csv(path, index=False)
    return path


def model():
    return Forecaster("irregular", lookback=24.0, horizon=24.0, model_kwargs=TINY, batch_size=4, seed=1)


def test_the_splits_scale_and_origins_of_a_protocol_fit(fit_data, table):
    f = model().fit(table, **LONG, origins=[24.0], split_fractions=[0.6, 0.2, 0.2], **FIT)
    data = fit_data.FitData.of(f)
    assert data.origins == [24.0] and (data.id_column, data.variable_column) == ("patient", "name")
    splits = [data.series_ids(split) for split in ("train", "val", "test")]
    assert [len(ids) for ids in splits] == [6, 2, 2]
    assert set.union(*splits) == {f"p{k:02d}" for k in range(10)}
    assert sum(len(ids) for ids in splits) == len(set.union(*splits))   # no stay in two splits
    assert list(data.scale.index) == ["hr", "temp"] and np.isfinite(data.scale).all() and (data.scale > 0).all()
    assert f.datamodule is data.datamodule                    # the model's backtests reuse the data read here


def test_a_fit_without_fixed_origins_is_refused_by_name(fit_data, tmp_path):
    path = tmp_path / "long.csv"
    observations(n_series=2, hours=480, seed=1).to_csv(path, index=False)
    f = model().fit(path, **LONG, split_fractions=[0.6, 0.2, 0.2], **FIT)   # rolling origins: none to measure at
    with pytest.raises(SystemExit, match="run.ckpt: the fit's data has no fixed origins"):
        fit_data.FitData.of(f, "run.ckpt")


def test_observed_in_history_follows_the_history_the_model_read(fit_data, tmp_path):
    """A backtest's targets flagged by whether their series observed their variable in [cutoff - lookback,
    cutoff): p01 never observes temp before 24 h, p02 only before 12 h (outside a 10 h lookback)."""
    table = observations(n_series=10, hours=48, seed=0, resolution=0.5, id_format="p{:02d}")
    drop = ((table["patient"] == "p01") & (table["name"] == "temp") & (table["hours"] < 24)) | (
        (table["patient"] == "p02") & (table["name"] == "temp") & (table["hours"] >= 12) & (table["hours"] < 24))
    path = tmp_path / "obs.csv"
    table[~drop].to_csv(path, index=False)
    f = model().fit(path, **LONG, origins=[24.0], split_fractions=[0.6, 0.2, 0.2], **FIT)
    data = fit_data.FitData.of(f)
    with pytest.warns(Warning):                               # in-sample: every split's stays
        frame = f.backtest(cutoffs=data.origins)
    unseen = (frame["name"] == "temp") & frame["patient"].isin(["p01", "p02"])
    assert unseen.any() and (~unseen).any()
    assert (data.observed_in_history(frame, 10.0) == ~unseen).all()
    p02 = (frame["name"] == "temp") & (frame["patient"] == "p02")
    assert (data.observed_in_history(frame, None) == ~(unseen & ~p02)).all()   # all of the history: p02 saw it
    with pytest.raises(SystemExit, match="numeric times"):
        data.observed_in_history(frame.assign(cutoff=frame["cutoff"].astype(str)), None)
