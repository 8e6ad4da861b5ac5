"""``Forecaster``: fit a forecasting transformer on a CSV file, a DataFrame or a registered dataset.

    from tsattn import Forecaster
    f = Forecaster(model="patchtst", attention="continuous", sink="learned", lookback=336, horizon=96)
    f.fit("my.csv", target="OT", max_epochs=20)
    f.predict()                 # DataFrame: the next `horizon` timestamps x target channels
    f.evaluate(split="test")    # {"mse": ..., "mae": ..., "mse_orig": ..., "mae_orig": ...}
    f.save("model.ckpt"); Forecaster.load("model.ckpt")

Training, progress bars, checkpoints, early stopping and loggers are Lightning's; this class only
wires ``CSVDataModule``, ``ForecastModule`` and a ``Trainer`` together.

One scale and one time unit from fit to forecast: whatever data ``predict`` or ``evaluate`` read
(the fit's, other data, or the source again after ``load``), they read it through a
``CSVDataModule`` given the fit's scaler, knot-time unit, frequency and reading options, and
forecast the last window with ``ForecastModule.forecast``. So a model forecasts the same before and
after ``save`` / ``load``, bit for bit in one process at one thread count.
"""
from __future__ import annotations

import contextlib
import inspect
import numbers
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

from .data import CSVDataModule, DataError
from .data.csv import NaValues
from .data.scaling import scaler_from_stats
from .data.splits import SPLITS, check_positive_int
from .lightning import ForecastModule

DataLike = Union[str, os.PathLike, pd.DataFrame]

# CSVDataModule arguments that describe how data is read (taken from the fit for other data)
_READING = {
    name for name in inspect.signature(CSVDataModule).parameters
    if name not in ("data", "lookback", "horizon", "scaler", "time_unit", "freq", "seed", "num_workers",
                    "pin_memory", "drop_last_train")
}


def _accelerator_name(trainer: pl.Trainer) -> str:
    """The accelerator a trainer ran on, as a ``Trainer(accelerator=...)`` string (``"cpu"``, ``"cuda"``, ...)."""
    name = type(trainer.accelerator).__name__.removesuffix("Accelerator").lower()
    return {"xla": "tpu"}.get(name, name) or "auto"


class Forecaster:
    """A forecasting model with the fit / predict / evaluate / save / load life cycle.

    Args:
        model: registered model name, ``"patchtst"`` or ``"decoder"``.
        attention: ``"softmax"`` or ``"continuous"``.
        sink: ``"zeros"``, ``"first"`` or ``"learned"``.
        rope: rotary position embedding on knot times.
        lookback: L, rows of history the model reads (a positive int; NumPy integers are accepted).
        horizon: H, rows it forecasts (a positive int).
        model_kwargs: further model hyperparameters (e.g. ``{"d_model": 16, "n_layers": 3}``).
        loss: ``"mse"``, ``"mae"`` or ``"huber"``.
        lr: Adam learning rate.
        lr_schedule: ``"type3"``, ``"onecycle"`` or ``"constant"`` (see ``ForecastModule``).
        batch_size: windows per batch (a positive int).
        seed: seeds weights, shuffling and dropout (an int >= 0); a fit is repeatable on CPU.
        compile: ``torch.compile`` the model for training and evaluation (faster continuous
            attention on CPU after a warm-up); ``predict`` always runs the eager model.

    Raises:
        ValueError (``tsattn.data.DataError`` for the sizes): a setting of the wrong type or range.
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
        lookback = check_positive_int("lookback", lookback)
        horizon = check_positive_int("horizon", horizon)
        batch_size = check_positive_int("batch_size", batch_size)
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0; got {seed!r}: pass e.g. seed=2021")
        seed = int(seed)
        if model_kwargs is not None and not isinstance(model_kwargs, dict):
            raise ValueError(f"model_kwargs must be a dict of model hyperparameters; got {model_kwargs!r}")
        self.config = dict(model=model, attention=attention, sink=sink, rope=rope, model_kwargs=model_kwargs,
                           loss=loss, lr=lr, lr_schedule=lr_schedule, compile=compile, seed=seed)
        self.lookback, self.horizon, self.batch_size, self.seed = lookback, horizon, batch_size, seed
        # validate the model's settings now rather than after the data is read
        ForecastModule(n_channels=1, lookback=lookback, horizon=horizon, **self.config)
        self.module: Optional[ForecastModule] = None
        self.datamodule: Optional[CSVDataModule] = None
        self.trainer: Optional[pl.Trainer] = None
        self.best_model_path: Optional[str] = None
        self.accelerator: str = "auto"  # the accelerator the fit ran on: evaluate() runs there too

    # -- fit -------------------------------------------------------------------------------------
    def fit(
        self,
        data: DataLike,
        *,
        target: Optional[Union[str, list[str]]] = None,
        features: str = "M",
        columns: Optional[list[str]] = None,
        time_column: Optional[str] = None,
        time_format: Optional[str] = None,
        dayfirst: Optional[bool] = None,
        na_values: NaValues = None,
        thousands: Optional[str] = None,
        sep: str = ",",
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
        enable_checkpointing: bool = True,
        enable_progress_bar: bool = True,
        **trainer_kwargs: Any,
    ) -> "Forecaster":
        """Train on ``data`` under the split protocol; keeps the weights of the best validation epoch.

        Where runs go: with ``default_root_dir`` (a folder), Lightning's logs and checkpoints are
        written there and kept (``best_model_path`` names the best checkpoint). Without it (the
        default), the fit works in a temporary folder that is removed when ``fit`` returns: nothing
        is written to the working directory, and the best weights are kept in memory (``save()``
        writes them). ``enable_checkpointing=False`` writes no checkpoint and keeps the last
        epoch's weights instead of the best.

        Args:
            data: a CSV path, a DataFrame, or a registered dataset name (``"ETTh1"``, ...).
            target, features, columns, time_column, time_format, dayfirst, na_values, thousands, sep,
                missing, duplicates, sort, knot_times, split: the data layer's reading options (see
                ``tsattn.data.CSVDataModule``). ``features="MS"`` with PatchTST or the patch decoder
                (channel-independent models) forecasts the target from its own history only, and
                warns: the other columns cannot inform it; ``features="S"`` gives the same for less.
            max_epochs: training epochs.
            patience: stop after this many epochs without a better validation MSE; None: no early stop.
            accelerator, devices, strategy, callbacks, logger, default_root_dir, enable_checkpointing,
                enable_progress_bar, trainer_kwargs: passed to ``lightning.pytorch.Trainer``.
        Returns:
            self.
        """
        dm = CSVDataModule(
            data, self.lookback, self.horizon,
            features=features, target=target, split=split, columns=columns, time_column=time_column,
            time_format=time_format, dayfirst=dayfirst, na_values=na_values, thousands=thousands, sep=sep,
            missing=missing, duplicates=duplicates, sort=sort, knot_times=knot_times,
            batch_size=self.batch_size, seed=self.seed,
        )
        dm.prepare_data()
        dm.setup("fit")  # read + validate before building anything, so bad data fails fast
        pl.seed_everything(self.seed, workers=True, verbose=False)
        module = ForecastModule(n_channels=dm.n_channels_in, lookback=self.lookback, horizon=self.horizon,
                                target_index=dm.target_index, **self.config)
        all_callbacks = list(callbacks or [])
        checkpoint = None
        if enable_checkpointing:
            checkpoint = ModelCheckpoint(monitor="val_mse", mode="min", save_top_k=1, filename="best-{epoch}")
            all_callbacks.insert(0, checkpoint)
        if patience is not None:
            all_callbacks.append(EarlyStopping(monitor="val_mse", mode="min", patience=patience))
        keep = default_root_dir is not None
        with contextlib.ExitStack() as scratch:
            root = os.fspath(Path(default_root_dir).expanduser()) if keep else scratch.enter_context(
                tempfile.TemporaryDirectory(prefix="tsattn-fit-"))
            trainer = pl.Trainer(
                max_epochs=max_epochs, accelerator=accelerator, devices=devices, strategy=strategy,
                callbacks=all_callbacks, logger=logger, default_root_dir=root,
                enable_checkpointing=enable_checkpointing, enable_progress_bar=enable_progress_bar,
                deterministic=trainer_kwargs.pop("deterministic", True), **trainer_kwargs,
            )
            trainer.fit(module, datamodule=dm)
            if checkpoint is not None and checkpoint.best_model_path:
                best = torch.load(checkpoint.best_model_path, map_location="cpu", weights_only=True)
                module.load_state_dict(best["state_dict"])
            self.best_model_path = checkpoint.best_model_path if keep and checkpoint is not None else None
        self.accelerator = accelerator if isinstance(accelerator, str) and accelerator != "auto" else (
            _accelerator_name(trainer))
        self.module, self.datamodule, self.trainer = module, dm, trainer
        return self

    # -- use -------------------------------------------------------------------------------------
    def _require_fit(self) -> ForecastModule:
        if self.module is None:
            raise RuntimeError("this Forecaster has no model yet: call fit(data) or Forecaster.load(path) first")
        return self.module

    def _eval_trainer(self, accelerator: Optional[str]) -> pl.Trainer:
        return pl.Trainer(accelerator=accelerator or self.accelerator, devices=1, logger=False,
                          enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)

    def _datamodule(self, data: Optional[DataLike]) -> CSVDataModule:
        """The fit's data module for ``data=None`` after a fit; else ``data`` (or, after ``load``, the
        fit's source) read the fit's way, on the fit's scale and time unit."""
        if data is None and self.datamodule is not None:
            return self.datamodule
        return self._datamodule_for(self._fit_source() if data is None else data)

    def evaluate(self, split: str = "test", data: Optional[DataLike] = None,
                 accelerator: Optional[str] = None) -> dict[str, float]:
        """MSE / MAE on the scaled data (the published convention) and on the original scale.

        Args:
            split: ``"test"``, ``"val"`` or ``"train"`` windows of the protocol.
            data: evaluate on other data, read with the fit's options and scaled with the fit's
                scaler (default: the fit's data).
            accelerator: where to run (default: the accelerator the fit ran on; ``"auto"`` after
                ``load``).
        Returns:
            ``{"mse", "mae", "mse_orig", "mae_orig"}`` as floats.
        """
        module = self._require_fit()
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}; got {split!r}")
        dm = self._datamodule(data)
        dm.setup("test")
        dataset = {"train": dm.train_dataset, "val": dm.val_dataset, "test": dm.test_dataset}[split]
        loader = torch.utils.data.DataLoader(dataset, batch_size=dm.batch_size)  # every window, in order
        result = self._eval_trainer(accelerator).test(module, dataloaders=loader, verbose=False)[0]
        return {key.removeprefix("test_"): float(value) for key, value in result.items()}

    def predict(self, data: Optional[DataLike] = None) -> pd.DataFrame:
        """Forecast the ``horizon`` rows that follow the end of ``data`` (default: the fit's data).

        ``data`` may be any extract of at least ``lookback`` rows with the channels the model was
        fit on, in any column order (columns it was not fit on are ignored, except under
        ``features="M"``, where they are an error); it is read with the fit's options, scaled with
        the fit's scaler and timed in the fit's time unit.

        Returns:
            a DataFrame indexed by the next ``horizon`` timestamps (at the fit's frequency), one
            column per target channel, in original units.
        Raises:
            DataError: ``data`` lacks the channels the model was fit on, or is shorter than ``lookback``.
        """
        module = self._require_fit()
        dm = self._datamodule(data)
        window = dm.last_window()
        y = module.forecast(window["x"][None], window["t_x"][None])[0]  # [H, C_out], original units
        name = (module.data_info or {}).get("time_column") or dm.table.time_column or "date"
        future = pd.DatetimeIndex(dm.future_timestamps(), name=name)
        return pd.DataFrame(y.cpu().numpy(), index=future, columns=list(dm.target_names))

    def _fit_source(self) -> str:
        """The registered name or absolute path the loaded model was fit on (a DataFrame is not stored)."""
        source = (self._require_fit().data_info or {}).get("source")
        if not source:
            raise RuntimeError("this model was fit on a DataFrame, which a checkpoint does not keep; pass `data`")
        return source

    def _datamodule_for(self, data: DataLike) -> CSVDataModule:
        """A data module over ``data`` that reads it as the fit read its data: the fit's reading
        options, channels (by name), scaler, time unit and frequency."""
        info = self._require_fit().data_info
        if not info:
            raise RuntimeError(
                "this model carries no record of the data it was fit on (a checkpoint not written by tsattn); "
                "fit it with Forecaster.fit or the tsattn CLI"
            )
        options = {**info.get("datamodule", {}), **info.get("read_options", {})}
        options = {k: v for k, v in options.items() if k in _READING}
        options["batch_size"] = options.get("batch_size") or self.batch_size
        if info.get("scaler_mean") is not None:
            options["scaler"] = scaler_from_stats(info["scaler_mean"], info["scaler_scale"])
        if info.get("time_unit_ns"):
            options["time_unit"] = pd.Timedelta(int(info["time_unit_ns"]), unit="ns")
        options["freq"] = info.get("freq")
        fitted = list(info["channel_names"])
        dm = CSVDataModule(data, self.lookback, self.horizon, **options)
        dm.prepare_data()  # a registered name that is not local yet: fetch it (never for a path)
        have = dm.value_columns
        absent = [c for c in fitted if c not in have]
        if absent:
            raise DataError(
                f"the data lacks the channels {absent} that the model was fit on "
                f"(fit on {fitted}; this data has {have}); pass data with the same columns"
            )
        extra = [c for c in have if c not in fitted]
        if extra and info.get("features") == "M":
            raise DataError(
                f"the data has columns {extra} that the model was not fit on (fit on {fitted}); "
                "drop them or refit on this data"
            )
        if dm.channel_names != fitted:  # other column order, or unused columns: read the fit's, in its order
            options["columns"] = fitted
            dm = CSVDataModule(data, self.lookback, self.horizon, **options)
        return dm

    # -- persistence -----------------------------------------------------------------------------
    def save(self, path: Union[str, os.PathLike]) -> Path:
        """Write a Lightning checkpoint (weights, hyperparameters, data facts) to ``path``, atomically.

        ``~`` is expanded. ``ForecastModule.load_from_checkpoint(path)`` reads it too.
        """
        module = self._require_fit()
        path = Path(path).expanduser()
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
        """A Forecaster from a checkpoint written by ``save`` (or by a ``ModelCheckpoint`` while
        training a ``ForecastModule``). ``~`` is expanded; the file is read with ``weights_only=True``.

        Raises:
            FileNotFoundError: there is no file at ``path``.
            ValueError: the file is not a tsattn checkpoint (text, CSV, truncated, another model's).
        """
        path = Path(path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"no checkpoint at {str(path)!r}")
        not_ours = (f"{str(path)!r} is not a tsattn checkpoint; pass a file written by Forecaster.save() or by "
                    "a ModelCheckpoint while training a ForecastModule (e.g. `tsattn fit`)")
        try:
            checkpoint = torch.load(path, map_location=map_location, weights_only=True)
        except Exception as exc:  # text, CSV, truncated zip, foreign pickle: all mean the same to the user
            raise ValueError(f"{not_ours} (it could not be read as a PyTorch checkpoint: {type(exc).__name__})") from None
        hp = checkpoint.get("hyper_parameters") if isinstance(checkpoint, dict) else None
        if not isinstance(hp, dict) or "model" not in hp or not isinstance(checkpoint.get("state_dict"), dict):
            raise ValueError(f"{not_ours} (it is a PyTorch file without a tsattn model's hyperparameters and weights)")
        known = inspect.signature(ForecastModule).parameters
        try:
            module = ForecastModule(**{k: v for k, v in hp.items() if k in known})
            module.load_state_dict(checkpoint["state_dict"])
        except (RuntimeError, ValueError, TypeError) as exc:
            raise ValueError(f"{not_ours} (its weights do not fit the model it describes: {exc})") from None
        module.on_load_checkpoint(checkpoint)
        module.to(map_location)
        extra = checkpoint.get("tsattn_forecaster") or {}
        batch_size = extra.get("batch_size") or (module.data_info or {}).get("datamodule", {}).get("batch_size") or 128
        f = cls(hp["model"], attention=hp["attention"], sink=hp["sink"], rope=hp["rope"],
                lookback=hp["lookback"], horizon=hp["horizon"], model_kwargs=hp["model_kwargs"], loss=hp["loss"],
                lr=hp["lr"], lr_schedule=hp["lr_schedule"], compile=hp["compile"],
                batch_size=batch_size, seed=extra.get("seed", hp.get("seed") or 2021))
        f.module = module
        return f

    def __repr__(self) -> str:
        state = "fit" if self.module is not None else "not fit"
        return f"Forecaster({self.config['model']!r}, attention={self.config['attention']!r}, lookback={self.lookback}, horizon={self.horizon}; {state})"


__all__: Sequence[str] = ["Forecaster"]
