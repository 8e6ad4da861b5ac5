"""Checkpoints written by tsattn 0.1 (commit c0a73f9, before the data modules owned the fitted
pipeline) still load and forecast what they forecast then.

``tests/fixtures/legacy/`` holds three tiny models fit for one epoch there (``make_legacy.py`` says
how): a PatchTST saved by ``Forecaster.save``, a patch decoder saved by ``tsattn fit``'s
``ModelCheckpoint``, and an irregular model; beside them the tables they were fit on, the forecasts
and the test metrics they gave. Forecasts are compared with rtol 1e-5 (stored as CSV text, ~7
digits; other thread counts or instruction sets move fp32 results by ~1e-6).
"""
import json
import pathlib
import shutil

import numpy as np
import pandas as pd
import pytest

from tsattn import Forecaster

LEGACY = pathlib.Path(__file__).parent / "fixtures" / "legacy"
METRICS = json.loads((LEGACY / "legacy_metrics.json").read_text())


@pytest.fixture
def legacy(tmp_path):
    """The fixtures copied to a scratch folder (the checkpoints name paths of the machine that wrote them)."""
    for path in LEGACY.iterdir():
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


@pytest.mark.parametrize("name", ["window", "cli_window"])
def test_window_checkpoints_forecast_as_before(legacy, name):
    f = Forecaster.load(legacy / f"{name}.ckpt")
    out = f.predict(legacy / "window.csv")
    want = pd.read_csv(legacy / f"{name}_forecast.csv", index_col=0, parse_dates=True)
    assert list(out.columns) == list(want.columns) and out.index.equals(want.index)
    np.testing.assert_allclose(out.to_numpy(), want.to_numpy(), rtol=1e-5)
    assert f.data_record["version"] == 1 and f.data_record["task"] == "window"  # converted from the old schema
    if name == "window":
        got = f.evaluate("test", data=legacy / "window.csv")  # the old metrics as before (and the newer beside)
        assert {k: got[k] for k in METRICS["window"]} == pytest.approx(METRICS["window"], rel=1e-5)


def test_observation_checkpoint_forecasts_as_before(legacy):
    g = Forecaster.load(legacy / "observations.ckpt")
    at = pd.read_csv(legacy / "observations_at.csv", parse_dates=["when"])
    out = g.predict(legacy / "observations.csv", at=at)
    want = pd.read_csv(legacy / "observations_forecast.csv", parse_dates=["when"])
    pd.testing.assert_frame_equal(out.drop(columns="reading"), want.drop(columns="reading"))
    np.testing.assert_allclose(out["reading"], want["reading"], rtol=1e-5)
    got = g.evaluate("test", data=legacy / "observations.csv")
    assert {k: got[k] for k in METRICS["observations"]} == pytest.approx(METRICS["observations"], rel=1e-5)
    assert (g.lookback, g.horizon) == (24.0, 12.0)
    # saved again, it is a current checkpoint that forecasts the same
    again = Forecaster.load(g.save(legacy / "again.ckpt"))
    pd.testing.assert_frame_equal(again.predict(legacy / "observations.csv", at=at), out, check_exact=True)
