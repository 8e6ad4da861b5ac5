"""CSVDataModule: loaders (no drop_last outside train), batch layout, hyperparameters, forecasting helpers."""
from __future__ import annotations

import lightning.pytorch as pl
import pandas as pd
import pytest
import torch

from tsattn.data import CSVDataModule, DataError, registry


def test_val_and_test_loaders_keep_every_window(etth1):
    for loader, ds in ((etth1.val_dataloader(), etth1.val_dataset), (etth1.test_dataloader(), etth1.test_dataset),
                       (etth1.predict_dataloader(), etth1.test_dataset)):
        assert loader.drop_last is False
        sizes, index = [], []
        for batch in loader:
            sizes.append(len(batch["index"]))
            index.append(batch["index"])
        assert sum(sizes) == len(ds) == 2785 and sizes[-1] == 2785 % 64  # the short last batch is kept
        assert torch.equal(torch.cat(index), torch.arange(len(ds)))  # in order: no shuffling


def test_batch_keys_shapes_dtypes(etth1):
    batch = next(iter(etth1.train_dataloader()))
    assert set(batch) == {"x", "y", "t_x", "t_y", "index"}
    assert batch["x"].shape == (64, 336, 7) and batch["x"].dtype == torch.float32
    assert batch["y"].shape == (64, 96, 7) and batch["y"].dtype == torch.float32
    assert batch["t_x"].shape == (64, 336) and batch["t_x"].dtype == torch.float32
    assert batch["t_y"].shape == (64, 96) and batch["t_y"].dtype == torch.float32
    assert batch["index"].shape == (64,) and batch["index"].dtype == torch.int64
    assert (batch["t_x"][:, 0] == 0).all()


def test_train_loader_shuffles_reproducibly_with_a_seed(hourly_frame):
    def first_indices(seed):
        dm = CSVDataModule(hourly_frame(400), 16, 8, batch_size=32, seed=seed)
        return next(iter(dm.train_dataloader()))["index"]

    a, b = first_indices(7), first_indices(7)
    assert torch.equal(a, b) and not torch.equal(a, torch.arange(32))
    assert not torch.equal(a, first_indices(8))


def test_train_permutation_depends_only_on_seed_and_epoch(hourly_frame):
    # what makes a resumed run draw the batches of an uninterrupted one: Lightning calls set_epoch
    dm = CSVDataModule(hourly_frame(400), 16, 8, batch_size=400, seed=3)
    loader = dm.train_dataloader()
    epochs = []
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        epochs.append(next(iter(loader))["index"])
    assert not torch.equal(epochs[0], epochs[1]) and not torch.equal(epochs[1], epochs[2])
    fresh = CSVDataModule(hourly_frame(400), 16, 8, batch_size=400, seed=3).train_dataloader()
    fresh.sampler.set_epoch(2)
    assert torch.equal(next(iter(fresh))["index"], epochs[2])
    assert sorted(epochs[2].tolist()) == list(range(len(dm.train_dataset)))


def test_drop_last_train_is_opt_in(hourly_frame):
    dm = CSVDataModule(hourly_frame(400), 16, 8, batch_size=50)
    assert sum(len(b["index"]) for b in dm.train_dataloader()) == len(dm.train_dataset)
    dm = CSVDataModule(hourly_frame(400), 16, 8, batch_size=50, drop_last_train=True)
    assert all(len(b["index"]) == 50 for b in dm.train_dataloader())


def test_items_are_views_not_copies(etth1):
    item = etth1.train_dataset[3]
    assert item["x"].data_ptr() == etth1.train_dataset.values[3].data_ptr()
    assert etth1.train_dataset.values.is_contiguous()


def test_hyperparameters_are_saved(etth1, hourly_frame):
    assert etth1.hparams["data"] == "ETTh1" and etth1.hparams["lookback"] == 336
    assert etth1.hparams["features"] == "M" and "batch_size" in etth1.hparams
    dm = CSVDataModule(hourly_frame(100), 8, 4, features="MS")
    assert "data" not in dm.hparams and dm.hparams["features"] == "MS"


def test_channel_counts_before_setup_without_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TSATTN_DATA_DIR", str(tmp_path))  # nothing there, nothing in the cache
    dm = CSVDataModule("traffic", 96, 96, features="M")
    assert (dm.n_channels_in, dm.n_channels_out, dm.freq) == (862, 862, "h")
    dm = CSVDataModule("traffic", 96, 96, features="MS")
    assert (dm.n_channels_in, dm.n_channels_out) == (862, 1)
    dm = CSVDataModule("traffic", 96, 96, features="S")
    assert (dm.n_channels_in, dm.n_channels_out) == (1, 1)
    dm = CSVDataModule("traffic", 96, 96, features="M", columns=["0", "1", "OT"])
    assert (dm.n_channels_in, dm.n_channels_out) == (3, 3)
    assert list(tmp_path.iterdir()) == []  # and nothing was fetched


def test_channel_counts_before_setup_from_a_csv(make_csv, hourly_frame):
    dm = CSVDataModule(str(make_csv(hourly_frame(100))), 8, 4, features="MS")
    assert (dm.n_channels_in, dm.n_channels_out, dm.target_index) == (3, 1, [2])
    assert dm._datasets is None  # counting did not set up


def test_dataframe_input_and_registry_defaults_apply(hourly_frame, etth1):
    dm = CSVDataModule(hourly_frame(300), 24, 12)
    dm.setup()
    assert dm.split == "ratio" and dm.read_options["duplicates"] == "error"
    assert etth1.split == "ett-hour" and etth1.read_options == {"missing": "error", "duplicates": "keep",
                                                                "knot_times": "index"}


def test_future_timestamps_last_window_and_timestamps_for(etth1, real_file):
    future = etth1.future_timestamps(3)
    assert list(future) == list(pd.date_range("2018-06-26 20:00", periods=3, freq="h"))
    out = etth1.last_window()
    assert out["x"].shape == (336, 7) and out["x"].dtype == torch.float32
    raw_tail = pd.read_csv(real_file("ETTh1.csv")).iloc[-336:, 1:].to_numpy()  # the final rows, unscaled
    torch.testing.assert_close(out["x"], torch.tensor(etth1.scaler.transform(raw_tail), dtype=torch.float32))
    torch.testing.assert_close(out["t_x"], torch.arange(336, dtype=torch.float32))
    torch.testing.assert_close(out["t_y"], torch.arange(336, 336 + 96, dtype=torch.float32))
    ts = etth1.timestamps_for("test", 0)
    assert len(ts) == 96 and ts[0] == pd.Timestamp("2016-07-01") + pd.Timedelta(hours=11520)
    assert etth1.timestamps_for("test", 0, lookback=True)[-1] == ts[0] - pd.Timedelta("1h")
    assert etth1.timestamps_for("val", -1)[-1] == pd.Timestamp("2016-07-01") + pd.Timedelta(hours=11519)
    with pytest.raises(IndexError):
        etth1.timestamps_for("test", 2785)


def test_last_window_with_calendar_features(hourly_frame):
    dm = CSVDataModule(hourly_frame(300), 24, 12, calendar_features=True)
    out = dm.last_window()
    assert out["x_mark"].shape == (24, 4) and out["y_mark"].shape == (12, 4)


def test_unscaled_data_is_the_raw_values(hourly_frame):
    frame = hourly_frame(200)
    dm = CSVDataModule(frame, 8, 4, scale=False)
    dm.setup()
    assert dm.scaler is None
    torch.testing.assert_close(dm.train_dataset[0]["x"], torch.tensor(frame[["a", "b", "OT"]].to_numpy()[:8],
                                                                       dtype=torch.float32))
    y = dm.train_dataset[0]["y"]
    assert dm.inverse_transform_target(y) is y


class _Linear(pl.LightningModule):
    def __init__(self, lookback: int, horizon: int):
        super().__init__()
        self.lookback, self.horizon = lookback, horizon
        self.proj = torch.nn.Linear(lookback, horizon)

    def _loss(self, batch):
        pred = self.proj(batch["x"].transpose(1, 2)).transpose(1, 2)  # [B, H, C]
        return torch.nn.functional.mse_loss(pred, batch["y"])

    def training_step(self, batch, _):
        return self._loss(batch)

    def validation_step(self, batch, _):
        self.log("val_loss", self._loss(batch), batch_size=len(batch["x"]))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def test_plugs_into_a_lightning_trainer(hourly_frame, tmp_path):
    dm = CSVDataModule(hourly_frame(400), 24, 12, batch_size=16, seed=0)
    trainer = pl.Trainer(max_epochs=1, limit_train_batches=3, limit_val_batches=2, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=tmp_path)
    trainer.fit(_Linear(24, 12), datamodule=dm)
    assert "val_loss" in trainer.callback_metrics


def test_registry_names_resolve_case_insensitively():
    assert registry.get_spec("etth1").name == "ETTh1" and registry.get_spec("ECL").name == "electricity"
    assert set(registry.list_datasets()) == {"ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather", "electricity",
                                             "traffic", "exchange_rate", "national_illness"}


def test_a_given_scaler_and_time_unit_are_used_as_they_are(hourly_frame):
    fit = CSVDataModule(hourly_frame(300), 24, 12)
    fit.setup()
    assert fit.time_unit == pd.Timedelta("1h")  # the train segment's median step
    other = hourly_frame(300, seed=4)
    other[["a", "b", "OT"]] = other[["a", "b", "OT"]] * 3.0 + 7.0
    dm = CSVDataModule(other, 24, 12, scaler=fit.scaler, time_unit="30min")
    dm.setup()
    assert dm.scaler is fit.scaler and dm.time_unit == pd.Timedelta("30min")
    raw = other[["a", "b", "OT"]].to_numpy()[:24]
    expected = torch.tensor(fit.scaler.transform(raw), dtype=torch.float32)
    assert torch.equal(dm.train_dataset[0]["x"], expected)  # elementwise (x - mean) / scale: correctly rounded
    assert torch.equal(dm.train_dataset[0]["t_x"], 2.0 * torch.arange(24.0))  # hours in half-hours
    # with the scaler, the time unit and the frequency given, a window needs no split: L rows suffice
    short = CSVDataModule(other.iloc[-24:], 24, 12, scaler=fit.scaler, time_unit="1h", freq="h")
    window = short.last_window()
    assert torch.equal(window["x"], torch.tensor(fit.scaler.transform(other[["a", "b", "OT"]].to_numpy()[-24:]),
                                                 dtype=torch.float32))
    assert torch.equal(window["t_y"], torch.arange(24.0, 36.0))


def test_a_given_scaler_needs_scaling_on(hourly_frame):
    fit = CSVDataModule(hourly_frame(300), 24, 12)
    with pytest.raises(DataError, match="scale=True"):
        CSVDataModule(hourly_frame(300), 24, 12, scaler=fit.scaler, scale=False)
