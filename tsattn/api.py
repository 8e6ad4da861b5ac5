"""``Forecaster``: fit a forecasting transformer on a CSV file, a DataFrame or a registered dataset.

    from tsattn import Forecaster
    f = Forecaster(model="patchtst", attention="continuous", sink="learned", lookback=336, horizon=96)
    f.fit("my.csv", target="OT", max_epochs=20)
    f.predict()                 # DataFrame: the next `horizon` timestamps x target channels
    f.evaluate(split="test")    # {"mse": ..., "mae": ..., "mse_orig": ..., "mae_orig": ...}
    f.save("model.ckpt"); Forecaster.load("model.ckpt")

Training, progress bars, checkpoints, early stopping and loggers are Lightning's; this class only
wires ``CSVDataModule``, ``ForecastModule`` and a ``Trainer`` together.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import lightning
import lightning.pytorch as pl
import numpy as np
import pandas as pd
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

from .data import CSVDataModule, DataError, read_series, registry, select_channels
from .data.splits import SPLITS
from .lightning import ForecastModule

DataLike = Union[str, os.PathLike, pd.DataFrame]


class Forecaster:
    """A forecasting model with the fit / predict / evaluate / save / load life cycle.

    Args:
        model: registered model name, ``"patchtst"`` or ``"decoder"``.
        attention: ``"softmax"`` or ``"continuous"``.
        sink: ``"zeros"``, ``"first"`` or ``"learned"``.
        rope: rotary position embedding on knot times.
        lookback: L, rows of history the model reads.
        horizon: H, rows it forecasts.
        model_kwargs: further model hyperparameters (e.g. ``{"d_model": 16, "n_layers": 3}``).
        loss: ``"mse"``, ``"mae"`` or ``"huber"``.
        lr: Adam learning rate.
        lr_schedule: ``"type3"``, ``"onecycle"`` or ``"constant"`` (see ``ForecastModule``).
        batch_size: windows per batch.
        seed: seeds weights, shuffling and dropout; a fit is repeatable on CPU.
        compile: ``torch.compile`` the model (faster continuous attention on CPU after a warm-up).
    """

    def __init__(
        self,
        model: str = "patchtst",
        *,
        attention: str = "softmax",
        sink: str = "zeros",
        rope: bool = False,
        lookback: int = 336,
        horizon: int = 96,
        model_kwargs: Optional[dict[str, Any]] = None,
        loss: str = "mse",
        lr: float = 1e-4,
        lr_schedule: str = "type3",
        batch_size: int = 128,
        seed: int = 2021,
        compile: bool = False,
    ) -> None:
        self.config = dict(model=model, attention=attention, sink=sink, rope=rope, model_kwargs=model_kwargs,
                           loss=loss, lr=lr, lr_schedule=lr_schedule, compile=compile, seed=seed)
        self.lookback, self.horizon, self.batch_size, self.seed = lookback, horizon, batch_size, seed
        # validate the model's settings now rather than after the data is read
        ForecastModule(n_channels=1, lookback=lookback, horizon=horizon, **self.config)
        self.module: Optional[ForecastModule] = None
        self.datamodule: Optional[CSVDataModule] = None
        self.trainer: Optional[pl.Trainer] = None
        self.best_model_path: Optional[str] = None

    # -- fit -------------------------------------------------------------------------------------
    def fit(
        self,
        data: DataLike,
        *,
        target: Optional[Union[str, list[str]]] = None,
        features: str = "M",
        time_column: Optional[str] = None,
        na_values: Optional[list[Union[str, float]]] = None,
        missing: Optional[str] = None,
        duplicates: Optional[str] = None,
        sort: bool = False,
        knot_times: Optional[str] = None,
        split: Optional[str] = None,
        max_epochs: int = 10,
        patience: Optional[int] = None,
        accelerator: str = "auto",
        devices: Union[int, str] = "auto",
        strategy: str = "auto",
        callbacks: Optional[list[pl.Callback]] = None,
        logger: Union[bool, Any] = True,
        default_root_dir: Optional[Union[str, os.PathLike]] = None,
        enable_progress_bar: bool = True,
        **trainer_kwargs: Any,
    ) -> "Forecaster":
        """Train on ``data`` under the split protocol; keeps the weights of the best validation epoch.

        Args:
            data: a CSV path, a DataFrame, or a registered dataset name (``"ETTh1"``, ...).
            target, features, time_column, na_values, missing, duplicates, sort, knot_times, split:
                the data layer's reading options (see ``tsattn.data.CSVDataModule``).
            max_epochs: training epochs.
            patience: stop after this many epochs without a better validation MSE; None: no early stop.
            accelerator, devices, strategy, callbacks, logger, default_root_dir, enable_progress_bar,
                trainer_kwargs: passed to ``lightning.pytorch.Trainer``.
        Returns:
            self.
        """
        dm = CSVDataModule(
            data if isinstance(data, pd.DataFrame) else os.fspath(data), self.lookback, self.horizon,
            features=features, target=target, split=split, time_column=time_column, na_values=na_values,
            missing=missing, duplicates=duplicates, sort=sort, knot_times=knot_times,
            batch_size=self.batch_size, seed=self.seed,
        )
        dm.prepare_data()
        dm.setup("fit")  # read + validate before building anything, so bad data fails fast
        pl.seed_everything(self.seed, workers=True, verbose=False)
        module = ForecastModule(n_channels=dm.n_channels_in, lookback=self.lookback, horizon=self.horizon,
                                target_index=dm.target_index, **self.config)
        checkpoint = ModelCheckpoint(monitor="val_mse", mode="min", save_top_k=1, filename="best-{epoch}")
        all_callbacks = [checkpoint] + list(callbacks or [])
        if patience is not None:
            all_callbacks.append(EarlyStopping(monitor="val_mse", mode="min", patience=patience))
        trainer = pl.Trainer(
            max_epochs=max_epochs, accelerator=accelerator, devices=devices, strategy=strategy,
            callbacks=all_callbacks, logger=logger, default_root_dir=default_root_dir,
            enable_progress_bar=enable_progress_bar, deterministic=trainer_kwargs.pop("deterministic", True),
            **trainer_kwargs,
        )
        trainer.fit(module, datamodule=dm)
        if checkpoint.best_model_path:
            best = torch.load(checkpoint.best_model_path, map_location="cpu", weights_only=True)
            module.load_state_dict(best["state_dict"])
            self.best_model_path = checkpoint.best_model_path
        self.module, self.datamodule, self.trainer = module, dm, trainer
        return self

    # -- use -------------------------------------------------------------------------------------
    def _require_fit(self) -> ForecastModule:
        if self.module is None:
            raise RuntimeError("this Forecaster has no model yet: call fit(data) or Forecaster.load(path) first")
        return self.module

    def _eval_trainer(self) -> pl.Trainer:
        return pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                          enable_model_summary=False, enable_checkpointing=False)

    def evaluate(self, split: str = "test", data: Optional[DataLike] = None) -> dict[str, float]:
        """MSE / MAE on the scaled data (the published convention) and on the original scale.

        Args:
            split: ``"test"``, ``"val"`` or ``"train"`` windows of the protocol.
            data: evaluate on other data, read with the fit's options (default: the fit's data).
        Returns:
            ``{"mse", "mae", "mse_orig", "mae_orig"}`` as floats.
        """
        module = self._require_fit()
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}; got {split!r}")
        if data is None and self.datamodule is None:
            data = self._fit_source()
        dm = self.datamodule if data is None else self._datamodule_for(data)
        dm.setup("test")
        dataset = {"train": dm.train_dataset, "val": dm.val_dataset, "test": dm.test_dataset}[split]
        loader = torch.utils.data.DataLoader(dataset, batch_size=dm.batch_size)  # every window, in order
        saved = module.y_mean.clone(), module.y_scale.clone()
        try:  # original-scale metrics of other data use that data's scaler, as its scaled metrics do
            if data is not None and dm.scaler is not None:
                module.use_scaler(dm.scaler)
            result = self._eval_trainer().test(module, dataloaders=loader, verbose=False)[0]
        finally:
            module.y_mean.copy_(saved[0])
            module.y_scale.copy_(saved[1])
        return {key.removeprefix("test_"): float(value) for key, value in result.items()}

    def predict(self, data: Optional[DataLike] = None) -> pd.DataFrame:
        """Forecast the ``horizon`` rows that follow the end of ``data`` (default: the fit's data).

        Returns:
            a DataFrame indexed by the next ``horizon`` timestamps (at the series' frequency), one
            column per target channel, in original units.
        Raises:
            DataError: ``data`` lacks the channels the model was fit on, or is shorter than ``lookback``.
        """
        module = self._require_fit()
        info = module.data_info or {}
        if data is None and self.datamodule is None:
            data = self._fit_source()
        if data is None:
            window = self.datamodule.last_window()
            x, t_x = window["x"], window["t_x"]
            future = self.datamodule.future_timestamps()
            target_names = self.datamodule.target_names
        else:
            x, t_x, future, target_names = self._window_from(data, info)
        module.eval()
        with torch.no_grad():
            y = module.to_original(module(x[None].to(module.device), t_x[None].to(module.device)))[0]
        name = info.get("time_column") or "date"
        return pd.DataFrame(y.cpu().numpy(), index=pd.DatetimeIndex(future, name=name), columns=list(target_names))

    def _fit_source(self) -> str:
        """The path or registered name the loaded model was fit on (a DataFrame is not stored)."""
        source = (self._require_fit().data_info or {}).get("source")
        if not source:
            raise RuntimeError("this model was fit on a DataFrame, which a checkpoint does not keep; pass `data`")
        return source

    def _window_from(self, data: DataLike, info: dict[str, Any]):
        """The last L rows of new data, checked against the fit's channels and scaled with its scaler."""
        if isinstance(data, str) and registry.is_registered(data) and not Path(data).exists():
            data = registry.resolve(data, download_missing=True)
        table = read_series(data if isinstance(data, pd.DataFrame) else os.fspath(data), **info["read_options"])
        fitted = info["channel_names"]
        missing_channels = [c for c in fitted if c not in table.columns]
        if missing_channels:
            raise DataError(
                f"the data lacks the channels {missing_channels} that the model was fit on "
                f"(fit on {fitted}; this data has {list(table.columns)}); pass data with the same columns"
            )
        extra = [c for c in table.columns if c not in fitted]
        if extra and info["features"] == "M":
            raise DataError(
                f"the data has columns {extra} that the model was not fit on (fit on {fitted}); "
                "drop them or refit on this data"
            )
        selection = select_channels(fitted, info["features"], info["target"])
        L = self.lookback
        if len(table) < L:
            raise DataError(f"the data has {len(table)} rows but the model reads lookback={L}; pass at least {L} rows")
        raw = table.values[-L:, [table.columns.index(c) for c in selection.input_names]]
        if info.get("scaler_mean") is not None:
            raw = (raw - np.asarray(info["scaler_mean"])) / np.asarray(info["scaler_scale"])
        x = torch.as_tensor(raw, dtype=torch.float32)
        knots = torch.as_tensor(table.knot_times[-L:], dtype=torch.float64)
        t_x = (knots - knots[0]).float()
        offset = pd.tseries.frequencies.to_offset(info.get("freq") or table.freq)
        future = pd.date_range(start=table.timestamps[-1] + offset, periods=self.horizon, freq=offset)
        return x, t_x, future, selection.target_names

    def _datamodule_for(self, data: DataLike) -> CSVDataModule:
        info = self._require_fit().data_info or {}
        opts = dict(info.get("datamodule", {}))
        opts.update(lookback=self.lookback, horizon=self.horizon)
        dm = CSVDataModule(data if isinstance(data, pd.DataFrame) else os.fspath(data), **opts)
        if info.get("channel_names") and dm.channel_names != info["channel_names"]:
            raise DataError(
                f"the data's channels {dm.channel_names} differ from the fit's {info['channel_names']}; "
                "pass data with the same columns"
            )
        return dm

    # -- persistence -----------------------------------------------------------------------------
    def save(self, path: Union[str, os.PathLike]) -> Path:
        """Write a Lightning checkpoint (weights, hyperparameters, data facts) to ``path``, atomically.

        ``ForecastModule.load_from_checkpoint(path)`` reads it too.
        """
        module = self._require_fit()
        path = Path(path)
        if path.is_dir():
            raise ValueError(f"{str(path)!r} is a directory; give a file name such as 'model.ckpt'")
        if not path.parent.exists():
            raise ValueError(f"the folder {str(path.parent)!r} does not exist; create it first")
        checkpoint = {
            "state_dict": module.state_dict(),
            "hyper_parameters": dict(module.hparams),
            "tsattn_data_info": module.data_info,
            "tsattn_forecaster": {"lookback": self.lookback, "horizon": self.horizon,
                                  "batch_size": self.batch_size, "seed": self.seed},
            "pytorch-lightning_version": lightning.__version__,
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        try:
            torch.save(checkpoint, tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path

    @classmethod
    def load(cls, path: Union[str, os.PathLike], map_location: str = "cpu") -> "Forecaster":
        """A Forecaster from a checkpoint written by ``save`` (or by a ``ModelCheckpoint``)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no checkpoint at {str(path)!r}")
        module = ForecastModule.load_from_checkpoint(path, map_location=map_location, weights_only=True)
        hp = dict(module.hparams)
        extra = torch.load(path, map_location="cpu", weights_only=True).get("tsattn_forecaster", {})
        f = cls(hp["model"], attention=hp["attention"], sink=hp["sink"], rope=hp["rope"],
                lookback=hp["lookback"], horizon=hp["horizon"], model_kwargs=hp["model_kwargs"], loss=hp["loss"],
                lr=hp["lr"], lr_schedule=hp["lr_schedule"], compile=hp["compile"],
                batch_size=extra.get("batch_size", 128), seed=extra.get("seed", hp.get("seed") or 2021))
        f.module = module
        return f

    def __repr__(self) -> str:
        state = "fit" if self.module is not None else "not fit"
        return f"Forecaster({self.config['model']!r}, attention={self.config['attention']!r}, lookback={self.lookback}, horizon={self.horizon}; {state})"


__all__: Sequence[str] = ["Forecaster"]
