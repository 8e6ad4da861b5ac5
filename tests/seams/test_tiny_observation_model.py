"""The observation seam: a model of the observation task defined in this file alone (registered here,
no edit anywhere else) fits, forecasts and round-trips through ``Forecaster``, the CLI and save / load."""
from typing import Optional

import numpy as np
import pandas as pd
import pytest
import torch
from torch import Tensor, nn

from tsattn import Forecaster
from tsattn.cli import main as cli_main
from tsattn.models.registry import register_model, unregister_model
from tsattn.tasks import ObservationModel


class LastValuePlusDrift(nn.Module):
    """A query (t, v) gets v's last observed value plus a learnt per-variable drift times t."""

    def __init__(self, n_variables: int, *, attention: str = "softmax", sink: str = "zeros", rope: bool = False) -> None:
        super().__init__()
        self.n_variables = n_variables
        self.drift = nn.Parameter(torch.zeros(n_variables))

    def forward(self, x_time: Tensor, x_var: Tensor, x_value: Tensor, x_mask: Tensor, y_time: Tensor, y_var: Tensor,
                y_mask: Optional[Tensor] = None) -> Tensor:
        B, V = x_time.shape[0], self.n_variables
        last = torch.zeros(B, V, dtype=x_value.dtype)
        order = torch.argsort(torch.where(x_mask, x_time, -torch.inf), dim=1, stable=True)  # latest last
        rows = torch.arange(B)[:, None].expand_as(order)
        var, val, mask = x_var[rows, order], x_value[rows, order], x_mask[rows, order]
        last[rows[mask], var[mask]] = val[mask]                        # later writes win: the last value
        out = last.gather(1, y_var) + self.drift[y_var] * y_time
        return out if y_mask is None else torch.where(y_mask, out, 0.0)


@pytest.fixture
def registered():
    register_model("last_plus_drift", task="observations")(LastValuePlusDrift)
    yield "last_plus_drift"
    unregister_model("last_plus_drift")


def _table(n_series: int = 4, hours: int = 240) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for k in range(n_series):
        for name, level in (("hr", 70.0), ("temp", 37.0)):
            t = np.sort(rng.choice(np.arange(hours), size=hours // 3, replace=False)).astype(float)
            rows.append(pd.DataFrame({"patient": f"p{k}", "hours": t, "name": name,
                                      "value": level + 0.05 * t + rng.standard_normal(t.size)}))
    return pd.concat(rows).sort_values(["patient", "hours", "name"]).reset_index(drop=True)


LONG = dict(id_column="patient", time_column="hours", variable_column="name", value_column="value")


def _cli_fit(model: str, path, root, *options: str) -> Forecaster:
    """``tsattn fit`` of ``model`` on the CSV ``path`` (one epoch, runs in ``root``), loaded back."""
    cli_main(["fit", "--model.model", model, *options, "--data", "tsattn.data.ObservationDataModule",
              "--data.data", str(path), *[f"--data.{k}={v}" for k, v in LONG.items()], "--data.origin_stride", "12",
              "--data.lookback", "24", "--data.horizon", "12", "--trainer.max_epochs", "1", "--trainer.logger", "false",
              "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", str(root)])
    return Forecaster.load(next(root.rglob("*.ckpt")))


def test_an_observation_model_in_one_file_fits_predicts_and_round_trips(registered, tmp_path):
    assert isinstance(LastValuePlusDrift(2), ObservationModel)
    table = _table()
    f = Forecaster(registered, lookback=24.0, horizon=12.0, lr=1e-2, lr_schedule="constant", batch_size=8, seed=1)
    f.fit(table, max_epochs=3, logger=False, enable_progress_bar=False, **LONG)
    last = table.groupby("patient")["hours"].max()
    at = pd.DataFrame({"patient": ["p0", "p2"], "hours": [last["p0"] + 5.0, last["p2"] + 1.0], "name": ["hr", "temp"]})
    out = f.predict(at=at)
    assert list(out.columns) == ["patient", "hours", "name", "value"] and np.isfinite(out["value"]).all()
    latest = table.groupby(["patient", "name"])["value"].last()
    np.testing.assert_allclose(out["value"], [latest["p0", "hr"], latest["p2", "temp"]], atol=3.0)  # in units
    assert f.module.net.drift.abs().sum() > 0  # trained
    path = tmp_path / "obs.csv"
    table.to_csv(path, index=False)
    g = Forecaster.load(f.save(tmp_path / "m.ckpt"))
    pd.testing.assert_frame_equal(g.predict(path, at=at), out, check_exact=True)


def test_an_observation_model_in_one_file_trains_from_the_cli(registered, tmp_path):
    path = tmp_path / "obs.csv"
    _table().to_csv(path, index=False)
    root = tmp_path / "run"
    g = _cli_fit(registered, path, root, "--model.lr", "0.01", "--model.lr_schedule", "constant")
    assert g.data_record["task"] == "observations" and g.horizon == 12.0
    out = g.predict(path)  # the default requests: every variable at each series' median step
    assert {"patient", "hours", "name", "value"} == set(out.columns) and len(out) > 0


class DriftFromTrainMeans(LastValuePlusDrift):
    """``LastValuePlusDrift`` that also takes a statistic from the fit's train samples (``fit_statistics``)."""

    def __init__(self, n_variables: int, **kwargs) -> None:
        super().__init__(n_variables, **kwargs)
        self.register_buffer("train_targets", torch.zeros(()))
        self.calls: list[bool] = []

    def fit_statistics(self, loader, **facts) -> None:
        self.calls.append(self.training and self.drift.abs().sum().item() == 0.0)   # before any step
        self.train_targets.fill_(float(sum(int(batch["y_mask"].sum()) for batch in loader)))


def test_a_trained_model_gets_its_train_statistics_through_the_one_seam(tmp_path):
    """A trainable model with ``fit_statistics`` gets the fit's train loader once, before training, from
    ``Forecaster.fit`` and from the CLI alike (``Task.fit_statistics``; the reference forecasts use the same call)."""
    register_model("drift_from_train_means", task="observations")(DriftFromTrainMeans)
    try:
        table = _table()
        f = Forecaster("drift_from_train_means", lookback=24.0, horizon=12.0, lr=1e-2, lr_schedule="constant",
                       batch_size=8, seed=1)
        f.fit(table, max_epochs=2, logger=False, enable_progress_bar=False, **LONG)
        expected = sum(int(batch["y_mask"].sum()) for batch in f.datamodule.train_dataloader())
        assert f.module.net.calls == [True] and int(f.module.net.train_targets) == expected > 0
        assert f.module.net.drift.abs().sum() > 0                                        # and then trained
        path = tmp_path / "obs.csv"
        table.to_csv(path, index=False)
        root = tmp_path / "run"
        g = _cli_fit("drift_from_train_means", path, root)
        assert int(g.module.net.train_targets) > 0                                        # set by the CLI's fit, saved
    finally:
        unregister_model("drift_from_train_means")
