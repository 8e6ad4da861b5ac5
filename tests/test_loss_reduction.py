"""The observation task's loss reductions: ``"dataset"`` weighs each target by its variable's count over
the training samples, so that over an epoch the loss is the metric's mean of per-variable means."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tsattn.data import ObservationDataModule, read_observations
from tsattn.lightning import ForecastModule
from tsattn.tasks.base import point_loss

TINY = dict(d_model=8, n_heads=2, n_layers=1, d_ff=16)


def _skewed(n_series: int = 16, seed: int = 0):
    """3 variables at their own times: "a" often, "b" sometimes, "c" in a few series only."""
    rng = np.random.default_rng(seed)
    frames = []
    for s in range(n_series):
        for name, n in (("a", 40), ("b", 8), ("c", 3 if s % 4 == 0 else 0)):
            t = np.sort(rng.uniform(0, 60, n))
            frames.append(pd.DataFrame({"id": f"s{s:02d}", "t": t, "variable": name, "value": rng.normal(size=n)}))
    table = pd.concat(frames).sort_values(["id", "t"], kind="stable")
    return read_observations(table, id_column="id", time_column="t", variable_column="variable",
                             value_column="value")


def _setup(reduction: str, *, origins=(20.0, 35.0), horizon=15.0, batch_size=5):
    dm = ObservationDataModule(_skewed(), origins=list(origins), horizon=horizon, batch_size=batch_size,
                               split_fractions=(0.75, 0.0, 0.25))
    dm.setup()
    torch.manual_seed(0)
    module = ForecastModule(model="irregular", n_channels=dm.n_variables, lookback=None, horizon=horizon,
                            model_kwargs=TINY, loss_reduction=reduction, lr=1e-3)
    module.task.on_fit_setup(module, dm)
    return dm, module


def test_target_counts_match_a_count_over_the_train_samples():
    dm, _ = _setup("variable", origins=(20.0, 35.0), horizon=15.0)
    obs, samples = dm.observations, dm.samples("train")
    expected = np.zeros(dm.n_variables, dtype=np.int64)
    for s, t0 in zip(samples.series, samples.origin):          # brute force over the observations
        rows = (obs.series_index == s) & (obs.time >= t0) & (obs.time < t0 + 15.0)
        expected += np.bincount(obs.variable[rows].astype(np.int64), minlength=dm.n_variables)
    np.testing.assert_array_equal(dm.target_counts("train"), expected)
    assert len(set(samples.origin.tolist())) == 2 and expected.min() > 0 and expected.max() > 10 * expected.min()


def test_the_dataset_loss_over_an_epoch_is_the_mean_of_per_variable_means():
    dm, module = _setup("dataset")
    module.eval()
    batches = list(dm.train_dataloader())
    assert len(batches) > 2 and len({b["y_var"].shape[0] for b in batches}) > 1          # a short last batch
    n = sum(b["y_var"].shape[0] for b in batches)
    with torch.no_grad():
        epoch = sum(module.task.training_loss(module, b) * b["y_var"].shape[0] / n for b in batches)
        per_var = [[] for _ in range(dm.n_variables)]
        for b in batches:
            pred = module.net(b["x_time"], b["x_var"], b["x_value"], b["x_mask"], b["y_time"], b["y_var"], b["y_mask"])
            err = point_loss("mse", pred, b["y_value"], 1.0)[b["y_mask"]]
            for v, e in zip(b["y_var"][b["y_mask"]].tolist(), err.tolist()):
                per_var[v].append(e)
    metric = np.mean([np.mean(e) for e in per_var if e])
    assert float(epoch) == pytest.approx(metric, rel=1e-5)
    # "variable" averages per batch: a variable in few batches gets less than its share
    module.hparams.loss_reduction = "variable"
    with torch.no_grad():
        by_batch = sum(module.task.training_loss(module, b) * b["y_var"].shape[0] / n for b in batches)
    assert float(by_batch) != pytest.approx(metric, rel=1e-3)


def test_the_dataset_loss_trains_and_needs_the_counts():
    dm, module = _setup("dataset")
    batch = next(iter(dm.train_dataloader()))
    loss = module.task.training_loss(module, batch)
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in module.net.parameters() if p.requires_grad)
    fresh = ForecastModule(model="irregular", n_channels=dm.n_variables, lookback=None, horizon=15.0,
                           model_kwargs=TINY, loss_reduction="dataset")
    with pytest.raises(RuntimeError, match="fit with a tsattn ObservationDataModule"):
        fresh.task.training_loss(fresh, batch)
    assert "target_weight" not in fresh.state_dict()                 # not saved: taken from the data at each fit
    with pytest.raises(ValueError, match="loss_reduction"):
        ForecastModule(model="irregular", n_channels=3, loss_reduction="batch")


@pytest.mark.parametrize("reduction", ["dataset", "point"])
def test_a_window_model_takes_the_default_reduction_only(reduction):
    with pytest.raises(ValueError, match=f"loss_reduction='{reduction}' is for the observation task"):
        ForecastModule(model="patchtst", n_channels=2, lookback=32, horizon=8, loss_reduction=reduction)
    ForecastModule(model="patchtst", n_channels=2, lookback=32, horizon=8)         # the default builds
