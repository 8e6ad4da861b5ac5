"""Forecaster: fit on a CSV, predict the next timestamps, evaluate, save/load, and bad input."""
import os

import numpy as np
import pandas as pd
import pytest

from tsattn import Forecaster
from tsattn.data import DataError


TINY = {"patch_len": 8, "stride": 4, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16, "dropout": 0.0}
FIT = dict(max_epochs=2, enable_progress_bar=False, logger=False)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory, make_frame):
    root = tmp_path_factory.mktemp("fit")
    path = root / "series.csv"
    make_frame().to_csv(path, index=False)
    f = Forecaster("patchtst", attention="continuous", sink="learned", lookback=48, horizon=12,
                   model_kwargs=TINY, lr=3e-3, lr_schedule="constant", batch_size=64, seed=1)
    f.fit(path, target="OT", default_root_dir=root, **FIT)
    return f, path, root


def test_predict_returns_the_next_horizon_timestamps(fitted):
    f, path, _ = fitted
    out = f.predict()
    last = pd.read_csv(path, parse_dates=["date"])["date"].iloc[-1]
    assert list(out.columns) == ["load", "temp", "OT"]  # target last, as the protocol orders channels
    assert out.index.equals(pd.date_range(last + pd.Timedelta(hours=1), periods=12, freq="h"))
    assert np.isfinite(out.to_numpy()).all()
    # forecasts are in original units: OT lives around 50, temp around 5
    assert 30 < out["OT"].mean() < 70 and 0 < out["temp"].mean() < 10


def test_evaluate_reports_scaled_and_original_metrics(fitted):
    f, _, _ = fitted
    test = f.evaluate("test")
    assert set(test) == {"mse", "mae", "mse_orig", "mae_orig"}
    assert 0 < test["mse"] < 1.0  # learned the sines: better than predicting the mean (mse 1)
    val = f.evaluate("val")
    assert val != test


def test_fit_is_repeatable_with_a_seed(fitted, tmp_path):
    f, path, _ = fitted
    g = Forecaster("patchtst", attention="continuous", sink="learned", lookback=48, horizon=12,
                   model_kwargs=TINY, lr=3e-3, lr_schedule="constant", batch_size=64, seed=1)
    g.fit(path, target="OT", default_root_dir=tmp_path, **FIT)
    pd.testing.assert_frame_equal(f.predict(), g.predict())


def test_save_load_round_trip(fitted, tmp_path):
    f, path, _ = fitted
    ckpt = f.save(tmp_path / "model.ckpt")
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt"]  # written atomically, no leftovers
    g = Forecaster.load(ckpt)
    pd.testing.assert_frame_equal(f.predict(), g.predict())  # the source CSV is re-read
    frame = pd.read_csv(path)
    pd.testing.assert_frame_equal(g.predict(frame), f.predict())
    assert g.evaluate("test") == pytest.approx(f.evaluate("test"))


def test_predict_from_new_data_with_the_fit_scale(fitted):
    f, path, _ = fitted
    frame = pd.read_csv(path).iloc[:500]
    out = f.predict(frame)
    start = pd.Timestamp(frame["date"].iloc[-1]) + pd.Timedelta(hours=1)
    assert out.index[0] == start and out.shape == (12, 3)


def test_predict_rejects_other_columns(fitted):
    f, path, _ = fitted
    frame = pd.read_csv(path)
    with pytest.raises(DataError, match=r"lacks the channels \['temp'\]"):
        f.predict(frame.drop(columns=["temp"]))
    with pytest.raises(DataError, match=r"columns \['humidity'\] that the model was not fit on"):
        f.predict(frame.assign(humidity=1.0))
    with pytest.raises(DataError, match="lookback=48"):
        f.predict(frame.iloc[:20])


def test_features_ms_forecasts_the_target_only(tmp_path, frame):
    f = Forecaster("decoder", lookback=48, horizon=12, model_kwargs={"patch_len": 8, "n_layers": 1, "n_heads": 2,
                   "d_model": 8, "d_ff": 16}, batch_size=64)
    f.fit(frame, features="MS", target="load", default_root_dir=tmp_path, **FIT)
    out = f.predict()
    assert list(out.columns) == ["load"] and out.shape == (12, 1)
    assert f.module.hparams.target_index == [2]  # load moved last among (temp, OT, load)


def test_use_before_fit_and_bad_paths(tmp_path):
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY)
    with pytest.raises(RuntimeError, match="call fit"):
        f.predict()
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        Forecaster.load(tmp_path / "missing.ckpt")
    with pytest.raises(ValueError, match="`attention` must be one of"):
        Forecaster(attention="sparse")


def test_save_to_a_missing_folder_writes_nothing(fitted, tmp_path):
    f, _, _ = fitted
    with pytest.raises(ValueError, match="does not exist"):
        f.save(tmp_path / "nope" / "model.ckpt")
    assert not (tmp_path / "nope").exists()


def test_bad_data_fails_before_training(tmp_path, frame):
    frame.loc[5, "temp"] = np.nan
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY)
    with pytest.raises(DataError, match="missing"):
        f.fit(frame, default_root_dir=tmp_path, **FIT)
    assert f.module is None and not any(tmp_path.iterdir())
    f.fit(frame, missing="interpolate", default_root_dir=tmp_path, **FIT)  # the named fix works
    assert f.module is not None


def test_load_then_predict_from_a_registered_dataset(tmp_path):
    # the fit's source is a registered name (read from TSATTN_DATA_DIR): predict() after load re-reads it
    f = Forecaster("patchtst", lookback=96, horizon=24, model_kwargs=TINY, batch_size=256)
    f.fit("ETTh1", default_root_dir=tmp_path, limit_train_batches=1, limit_val_batches=1, **FIT)
    g = Forecaster.load(f.save(tmp_path / "etth1.ckpt"))
    out = g.predict()
    assert out.index[0] == pd.Timestamp("2018-06-26 20:00:00") and out.shape == (24, 7)
    pd.testing.assert_frame_equal(out, f.predict())
