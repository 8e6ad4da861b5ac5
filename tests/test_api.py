"""Forecaster: fit on a CSV, predict the next timestamps, evaluate, save/load, and bad input.

Forecasts before and after save / load are compared exactly: both go through the same code
(``CSVDataModule.last_window`` with the fit's scaler statistics and time unit, then the eager model
in ``ForecastModule.forecast``) on the same weights, in one process at one thread count, so they are
the same floating-point operations on the same bits. Metrics over many windows are compared with a
relative tolerance of 1e-6 (means of thousands of fp32 terms).
"""
import os

import numpy as np
import pandas as pd
import pytest
import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException

from tsattn import Forecaster
from tsattn.data import DataError, split_borders


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
    assert set(test) == {"mse", "mae", "rmse", "mse_orig", "mae_orig", "rmse_orig", "smape_orig", "mase"}
    assert test["rmse_orig"] == pytest.approx(test["mse_orig"] ** 0.5, rel=1e-9)
    assert 0 < test["smape_orig"] < 200 and 0 < test["mase"] < 10
    assert 0 < test["mse"] < 1.0  # learned the sines: better than predicting the mean (mse 1)
    val = f.evaluate("val")
    assert val != test


def test_fit_is_repeatable_with_a_seed(fitted, tmp_path):
    f, path, _ = fitted
    g = Forecaster("patchtst", attention="continuous", sink="learned", lookback=48, horizon=12,
                   model_kwargs=TINY, lr=3e-3, lr_schedule="constant", batch_size=64, seed=1)
    g.fit(path, target="OT", default_root_dir=tmp_path, **FIT)
    # the same seed on the same machine and thread count: the same training, up to fp32 rounding
    pd.testing.assert_frame_equal(f.predict(), g.predict(), rtol=1e-5)


def test_save_load_round_trip_forecasts_exactly_the_same(fitted, tmp_path):
    f, path, _ = fitted
    ckpt = f.save(tmp_path / "model.ckpt")
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt"]  # written atomically, no leftovers
    g = Forecaster.load(ckpt)
    before = f.predict()
    pd.testing.assert_frame_equal(g.predict(), before, check_exact=True)  # the source CSV is re-read
    frame = pd.read_csv(path)
    pd.testing.assert_frame_equal(g.predict(frame), before, check_exact=True)
    pd.testing.assert_frame_equal(f.predict(frame), before, check_exact=True)
    assert g.evaluate("test") == pytest.approx(f.evaluate("test"), rel=1e-6)
    fitted = g.data_record["fitted"]  # what the fit learnt travels with the weights
    assert fitted["time_unit_ns"] == pd.Timedelta("1h").value and fitted["freq"] == "h"
    np.testing.assert_array_equal(fitted["scaler"]["offset"], f.datamodule.scaler.offset)
    np.testing.assert_array_equal(fitted["scaler"]["scale"], f.datamodule.scaler.scale)


@pytest.mark.slow
def test_a_compiled_model_forecasts_the_same_after_load(tmp_path, make_frame):
    """predict() runs the eager model even when training compiled it, so reloading (uncompiled)
    changes nothing."""
    frame = make_frame(rows=500)
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY, batch_size=64, seed=1, compile=True)
    f.fit(frame, limit_train_batches=2, limit_val_batches=1, **{**FIT, "max_epochs": 1})
    g = Forecaster.load(f.save(tmp_path / "compiled.ckpt"))
    pd.testing.assert_frame_equal(g.predict(frame), f.predict(), check_exact=True)


def test_predict_and_evaluate_on_other_data_use_the_fit_scale_and_time_unit(fitted, make_frame):
    f, _, _ = fitted
    module = f.module
    mean, scale = f.datamodule.scaler.offset, f.datamodule.scaler.scale
    # other data on another level: evaluate() must scale it with the fit's scaler, not its own
    other = make_frame(rows=900, seed=5)
    other[["load", "temp", "OT"]] = other[["load", "temp", "OT"]] * 1.5 + 4.0
    scaled = (other[["load", "temp", "OT"]].to_numpy() - mean) / scale  # [N, 3], fit's scale
    test = split_borders(len(other), 48, "ratio").segment("test")
    rows = torch.tensor(scaled[test], dtype=torch.float32)
    windows = torch.stack([rows[i : i + 60] for i in range(len(rows) - 60 + 1)])  # [W, 60, 3]
    module.eval()
    with torch.no_grad():
        pred = module({"x": windows[:, :48], "t_x": torch.arange(48.0).expand(len(windows), 48)})
    expected = torch.mean((pred.double() - windows[:, 48:].double()) ** 2).item()
    assert f.evaluate("test", data=other)["mse"] == pytest.approx(expected, rel=1e-5)
    # an extract sampled every 2 hours: knot times in the fit's unit (hours) are 0, 2, 4, ...
    extract = other.iloc[::2].iloc[:60]
    x = torch.tensor((extract[["load", "temp", "OT"]].to_numpy()[-48:] - mean) / scale, dtype=torch.float32)
    in_hours = module.forecast({"x": x[None], "t_x": 2.0 * torch.arange(48.0)[None]})[0]
    in_rows = module.forecast({"x": x[None], "t_x": torch.arange(48.0)[None]})[0]
    assert not torch.allclose(in_hours, in_rows, atol=1e-4)  # continuous attention reads the times
    out = f.predict(extract)
    # the same forecast up to fp32 rounding (the input is scaled by another route here)
    np.testing.assert_allclose(out.to_numpy(), in_hours.numpy(), rtol=1e-5)
    assert not np.allclose(out.to_numpy(), in_rows.numpy(), rtol=1e-5)
    assert out.index[0] == pd.Timestamp(extract["date"].iloc[-1]) + pd.Timedelta("1h")  # the fit's frequency


def test_load_then_predict_from_another_working_directory(tmp_path, monkeypatch, make_frame):
    workdir, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    workdir.mkdir(), elsewhere.mkdir()
    make_frame(rows=500).to_csv(workdir / "series.csv", index=False)
    monkeypatch.chdir(workdir)
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY, batch_size=64, seed=1)
    f.fit("series.csv", limit_train_batches=2, limit_val_batches=1, **FIT)  # a relative path
    ckpt = f.save("model.ckpt")
    before = f.predict()
    assert f.data_record["source"] == str(workdir / "series.csv")  # stored absolute
    monkeypatch.chdir(elsewhere)
    g = Forecaster.load(workdir / "model.ckpt")
    pd.testing.assert_frame_equal(g.predict(), before, check_exact=True)
    pd.testing.assert_frame_equal(g.predict(pd.read_csv(workdir / "series.csv")), before, check_exact=True)
    assert sorted(os.listdir(workdir)) == ["model.ckpt", "series.csv"]  # the fit wrote nothing else


def test_evaluate_follows_the_fit_accelerator(fitted):
    f, _, _ = fitted
    assert f.accelerator == "cpu"  # the fit ran on the CPU ("auto" resolved to it)
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is available: the failure below would not happen")
    gpu_fit = Forecaster.__new__(Forecaster)
    gpu_fit.__dict__.update(f.__dict__, accelerator="cuda")  # as if the fit had run on a GPU
    with pytest.raises(MisconfigurationException, match="(?i)cuda|gpu"):
        gpu_fit.evaluate("test")  # it tries the fit's accelerator, not the CPU
    assert f.evaluate("test", accelerator="cpu") == pytest.approx(f.evaluate("test"), rel=1e-6)


def test_fit_writes_nothing_unless_asked_and_checkpointing_can_be_off(tmp_path, monkeypatch, frame):
    monkeypatch.chdir(tmp_path)
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY, batch_size=64, seed=1)
    f.fit(frame, max_epochs=1, limit_train_batches=2, limit_val_batches=1, enable_progress_bar=False)
    assert list(tmp_path.iterdir()) == [] and f.best_model_path is None  # logger on, still nothing here
    f.fit(frame, max_epochs=1, limit_train_batches=2, limit_val_batches=1, enable_progress_bar=False,
          enable_checkpointing=False, logger=False)
    assert list(tmp_path.iterdir()) == [] and f.predict().shape == (12, 3)
    f.fit(frame, max_epochs=1, limit_train_batches=2, limit_val_batches=1, enable_progress_bar=False,
          default_root_dir=tmp_path / "runs")
    assert f.best_model_path and f.best_model_path.startswith(str(tmp_path / "runs"))
    assert os.path.isfile(f.best_model_path)


def test_save_and_load_expand_the_home_folder(fitted, tmp_path, monkeypatch):
    f, _, _ = fitted
    monkeypatch.setenv("HOME", str(tmp_path))
    assert f.save("~/m.ckpt") == tmp_path / "m.ckpt" and (tmp_path / "m.ckpt").is_file()
    assert Forecaster.load("~/m.ckpt").module is not None


@pytest.mark.parametrize("content", ["text", "csv", "truncated", "foreign"])
def test_load_of_something_else_names_the_file(fitted, tmp_path, content):
    f, path, _ = fitted
    target = tmp_path / "model.ckpt"
    if content == "text":
        target.write_text("these are not weights\n")
    elif content == "csv":
        target.write_bytes(path.read_bytes())
    elif content == "truncated":
        data = f.save(tmp_path / "full.ckpt").read_bytes()
        target.write_bytes(data[: len(data) // 2])
    else:
        torch.save({"weights": torch.zeros(3)}, target)
    with pytest.raises(ValueError, match="is not a tsattn checkpoint") as info:
        Forecaster.load(target)
    assert str(target) in str(info.value) and "weights_only=False" not in str(info.value)


@pytest.mark.parametrize("kwargs", [dict(lookback="336"), dict(lookback=24.0), dict(horizon=-1), dict(horizon=0),
                                    dict(lookback=True), dict(batch_size=0), dict(seed=-1), dict(seed=True)])
def test_constructor_validates_sizes(kwargs):
    with pytest.raises(ValueError, match="must be") as info:
        Forecaster("patchtst", model_kwargs=TINY, **kwargs)
    name = next(iter(kwargs))
    assert name in str(info.value) and "pass" in str(info.value)


def test_numpy_integers_are_sizes(tmp_path, frame):
    f = Forecaster("patchtst", lookback=np.int64(48), horizon=np.int32(12), batch_size=np.int64(64),
                   model_kwargs=TINY, seed=np.int64(1))
    assert (f.lookback, f.horizon) == (48, 12) and type(f.lookback) is int
    f.fit(frame, max_epochs=1, limit_train_batches=1, limit_val_batches=1, enable_progress_bar=False, logger=False)
    assert f.predict().shape == (12, 3)


def test_fit_on_an_array_says_how_to_wrap_it(frame):
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY)
    with pytest.raises(DataError, match=r"pd\.DataFrame\(values"):
        f.fit(frame[["load", "temp", "OT"]].to_numpy())


def test_optimizer_settings_reach_the_optimizer_and_survive_save_load(tmp_path, make_frame):
    """``optimizer``, ``weight_decay``, ``huber_delta``, ``pct_start``: the optimizer the fit trained with is
    built from them (decoupled decay for "adamw"), and a loaded Forecaster carries them (a refit trains alike)."""
    path = tmp_path / "series.csv"
    make_frame().to_csv(path, index=False)
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY, lr=3e-3, lr_schedule="onecycle",
                   batch_size=64, seed=1, optimizer="adamw", weight_decay=0.05, loss="huber", huber_delta=0.5,
                   pct_start=0.2)
    f.fit(path, target="OT", max_epochs=1, enable_progress_bar=False, logger=False, enable_checkpointing=False)
    optimizer = f.trainer.optimizers[0]
    assert all(g["weight_decay"] == 0.05 and g["decoupled_weight_decay"] for g in optimizer.param_groups)
    scheduler = f.trainer.lr_scheduler_configs[0].scheduler
    assert isinstance(scheduler, torch.optim.lr_scheduler.OneCycleLR)
    g = Forecaster.load(f.save(tmp_path / "model.ckpt"))
    for key, value in (("optimizer", "adamw"), ("weight_decay", 0.05), ("huber_delta", 0.5), ("pct_start", 0.2)):
        assert g.config[key] == value and g.module.hparams[key] == value
    assert Forecaster("patchtst").config["optimizer"] == "adam" and Forecaster("patchtst").config["weight_decay"] == 0


@pytest.mark.parametrize("kwargs, phrase", [
    (dict(weight_decay=-0.1), "`weight_decay` must be a finite number >= 0"),
    (dict(weight_decay="0.1"), "`weight_decay` must be a finite number"),
    (dict(optimizer="sgd"), "`optimizer` must be one of"),
    (dict(pct_start=1.0), "`pct_start` must be a finite number > 0 and < 1"),
    (dict(huber_delta=0.0), "`huber_delta` must be a finite number > 0"),
    (dict(lr=float("nan")), "`lr` must be a finite number >= 0"),
])
def test_bad_optimizer_settings_fail_at_construction(kwargs, phrase):
    with pytest.raises(ValueError, match=phrase):
        Forecaster("patchtst", **kwargs)
