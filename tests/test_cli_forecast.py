"""The command line as a user or a scheduler drives it, as subprocesses: a fit from a CSV without YAML
that prints its checkpoint, a forecast from that checkpoint to a CSV file (or standard output), the
exit statuses (0 ok, 2 bad usage, 1 bad data with the error on standard error), and nothing written to
the working directory that was not asked for."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tsattn import Forecaster

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
TSATTN = [sys.executable, "-m", "tsattn.cli"]
TINY_WINDOW = '{"patch_len": 8, "stride": 4, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16}'
TINY_IRREGULAR = '{"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "time_features": 4, "residual": true}'
QUIET = ["--trainer.max_epochs", "1", "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary",
         "false", "--seed_everything", "1"]

pytestmark = pytest.mark.slow


def tsattn(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([*TSATTN, *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=ENV)


def files(folder: pathlib.Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.fixture
def series_csv(tmp_path):
    rows = 400
    t = np.arange(rows)
    pd.DataFrame({"date": pd.date_range("2022-03-01", periods=rows, freq="h"), "a": np.sin(t / 5),
                  "OT": np.cos(t / 7)}).to_csv(tmp_path / "my.csv", index=False)
    return tmp_path / "my.csv"


def test_fit_without_yaml_then_forecast_to_a_csv_file(series_csv, tmp_path):
    fit = tsattn("fit", "--data.data", "my.csv", "--data.lookback", "24", "--data.horizon", "6", "--data.target", "OT",
                 "--model.model_kwargs", TINY_WINDOW, "--trainer.default_root_dir", "run", *QUIET, cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr[-3000:]
    ckpt = pathlib.Path(fit.stdout.strip().splitlines()[-1])  # the last line: the best checkpoint
    assert ckpt.is_file() and ckpt.is_relative_to(tmp_path / "run")
    out = tsattn("forecast", "--ckpt", str(ckpt), "--data", "my.csv", "-o", "forecast.csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    written = pd.read_csv(tmp_path / "forecast.csv", index_col=0, parse_dates=True)
    expected = Forecaster.load(ckpt).predict(series_csv)
    assert list(written.columns) == ["a", "OT"] and written.index.equals(expected.index)
    np.testing.assert_allclose(written.to_numpy(), expected.to_numpy(), rtol=1e-6)
    assert [f for f in files(tmp_path) if not f.startswith("run/")] == ["forecast.csv", "my.csv"]
    stdout = tsattn("predict", "--ckpt_path", str(ckpt), cwd=tmp_path)  # `predict` is the same command
    assert stdout.returncode == 0
    pd.testing.assert_frame_equal(pd.read_csv(pd.io.common.StringIO(stdout.stdout), index_col=0, parse_dates=True),
                                  written)


def test_irregular_fit_and_forecast_at_requested_times(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for k in range(4):
        for name, level in (("hr", 70.0), ("temp", 37.0)):
            t = np.sort(rng.choice(240, size=80, replace=False)).astype(float)
            rows.append(pd.DataFrame({"patient": f"00{k}", "hours": t, "name": name,
                                      "value": level + np.sin(t / 12) + 0.1 * rng.standard_normal(t.size)}))
    table = pd.concat(rows).sort_values(["patient", "hours", "name"])
    table.to_csv(tmp_path / "obs.csv", index=False)
    fit = tsattn("fit", "--data", "tsattn.data.ObservationDataModule", "--data.data", "obs.csv",
                 "--data.id_column", "patient", "--data.time_column", "hours", "--data.variable_column", "name",
                 "--data.value_column", "value", "--data.origin_stride", "12", "--data.lookback", "24",
                 "--data.horizon", "12", "--model.model", "irregular", "--model.model_kwargs", TINY_IRREGULAR,
                 "--trainer.default_root_dir", "run", *QUIET, cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr[-3000:]
    ckpt = fit.stdout.strip().splitlines()[-1]
    last = table.groupby("patient")["hours"].max()
    at = pd.DataFrame({"patient": ["001", "003"], "hours": [last["001"] + 2.0, last["003"] + 5.0], "name": ["hr", "temp"]})
    at.to_csv(tmp_path / "at.csv", index=False)
    out = tsattn("forecast", "--ckpt", ckpt, "--data", "obs.csv", "--at", "at.csv", "-o", "out.csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    written = pd.read_csv(tmp_path / "out.csv", dtype={"patient": str})
    assert list(written.columns) == ["patient", "hours", "name", "value"]
    assert written["patient"].tolist() == ["001", "003"]  # the ids as the file writes them
    expected = Forecaster.load(ckpt).predict(tmp_path / "obs.csv", at=at)
    np.testing.assert_allclose(written["value"], expected["value"], rtol=1e-6)


def test_exit_statuses_and_messages(series_csv, tmp_path):
    usage = tsattn("forecast", "--ckpt", "x.ckpt", "--bogus", cwd=tmp_path)
    assert usage.returncode == 2 and "unrecognized arguments: --bogus" in usage.stderr
    assert tsattn("forecast", cwd=tmp_path).returncode == 2  # --ckpt is required
    assert tsattn("forecast", "--ckpt", "x.ckpt", "-o", "out.xlsx", cwd=tmp_path).returncode == 2
    missing = tsattn("forecast", "--ckpt", "x.ckpt", cwd=tmp_path)
    assert missing.returncode == 1 and "no checkpoint at 'x.ckpt'" in missing.stderr
    bad = tsattn("fit", "--data.data", "my.csv", "--data.lookback", "24", "--data.horizon", "6", "--data.target", "nope",
                 "--model.model_kwargs", TINY_WINDOW, "--trainer.default_root_dir", "run", *QUIET, cwd=tmp_path)
    assert bad.returncode == 1 and "target" in bad.stderr and "nope" in bad.stderr
    assert "Traceback" not in bad.stderr  # the data error, not a stack
    assert files(tmp_path) == ["my.csv"]  # nothing written by a failed call


def test_evaluation_and_fast_dev_run_write_nothing(series_csv, tmp_path):
    fit = tsattn("fit", "--data.data", str(series_csv), "--data.lookback", "24", "--data.horizon", "6",
                 "--model.model_kwargs", TINY_WINDOW, "--trainer.default_root_dir", str(tmp_path / "run"), *QUIET,
                 cwd=tmp_path)
    ckpt = fit.stdout.strip().splitlines()[-1]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    test = tsattn("test", "--data.data", str(series_csv), "--data.lookback", "24", "--data.horizon", "6",
                  "--model.model_kwargs", TINY_WINDOW, "--ckpt_path", ckpt, cwd=elsewhere)
    assert test.returncode == 0, test.stderr[-3000:]
    config = ROOT / "configs" / "ETTh1" / "patchtst_softmax_96.yaml"  # its default_root_dir is runs/ETTh1/...
    quick = tsattn("fit", "--config", str(config), "--trainer.fast_dev_run=true", cwd=elsewhere)
    assert quick.returncode == 0, quick.stderr[-3000:]
    assert files(elsewhere) == []


def test_adjust_blends_a_checkpoint_into_a_new_file_and_refuses_what_it_cannot_do(series_csv, tmp_path):
    fit = tsattn("fit", "--data.data", "my.csv", "--data.lookback", "24", "--data.horizon", "6",
                 "--model.model_kwargs", TINY_WINDOW, "--trainer.default_root_dir", "run", *QUIET, cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr[-3000:]
    ckpt = pathlib.Path(fit.stdout.strip().splitlines()[-1])
    before = ckpt.read_bytes()
    out = tsattn("adjust", "--ckpt", str(ckpt), "--blend-naive", "-o", "blended.ckpt", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "naive blend weights" in out.stdout and pathlib.Path(out.stdout.strip().splitlines()[-1]).name == "blended.ckpt"
    assert ckpt.read_bytes() == before                                       # the input is not touched
    expected = Forecaster.load(ckpt).blend_naive(series_csv)                  # the same fit, in this process
    adjusted = Forecaster.load(tmp_path / "blended.ckpt")
    pd.testing.assert_series_equal(adjusted.naive_weights, expected.naive_weights, rtol=1e-6)
    pd.testing.assert_frame_equal(adjusted.predict(series_csv), expected.predict(series_csv), rtol=1e-6)
    nothing = tsattn("adjust", "--ckpt", str(ckpt), "-o", "x.ckpt", cwd=tmp_path)
    assert nothing.returncode == 2 and "nothing to adjust" in nothing.stderr
    over = tsattn("adjust", "--ckpt", str(ckpt), "--blend-naive", "-o", str(ckpt), cwd=tmp_path)
    assert over.returncode == 2 and "new file" in over.stderr and ckpt.read_bytes() == before
    point = tsattn("adjust", "--ckpt", str(ckpt), "--calibrate", "-o", "x.ckpt", cwd=tmp_path)
    assert point.returncode == 1 and "quantile model" in point.stderr and "Traceback" not in point.stderr
    assert not (tmp_path / "x.ckpt").exists()


def test_adjust_combines_fits_of_one_model(series_csv, tmp_path):
    ckpts = []
    for seed in ("1", "2"):
        fit = tsattn("fit", "--data.data", "my.csv", "--data.lookback", "24", "--data.horizon", "6", "--model.seed", seed,
                     "--data.seed", seed, "--seed_everything", seed,
                     "--model.model_kwargs", TINY_WINDOW, "--trainer.default_root_dir", f"run{seed}", *QUIET, cwd=tmp_path)
        assert fit.returncode == 0, fit.stderr[-3000:]
        ckpts.append(fit.stdout.strip().splitlines()[-1])
    out = tsattn("adjust", "--ckpt", *ckpts, "-o", "ensemble.ckpt", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    combined = Forecaster.load(tmp_path / "ensemble.ckpt")
    assert combined.config["ensemble"] == 2
    expected = Forecaster.combine([Forecaster.load(c) for c in ckpts])
    pd.testing.assert_frame_equal(combined.predict(series_csv), expected.predict(series_csv), rtol=1e-6)
    other = tsattn("fit", "--data.data", "my.csv", "--data.lookback", "24", "--data.horizon", "6", "--model.lr", "0.01",
                   "--model.model_kwargs", TINY_WINDOW, "--trainer.default_root_dir", "run3", *QUIET, cwd=tmp_path)
    assert other.returncode == 0, other.stderr[-3000:]
    refused = tsattn("adjust", "--ckpt", ckpts[0], other.stdout.strip().splitlines()[-1], "-o", "x.ckpt", cwd=tmp_path)
    assert refused.returncode == 1 and "lr" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "x.ckpt").exists()
