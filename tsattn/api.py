"""``Forecaster``: fit a forecasting transformer on a CSV file, a DataFrame or a registered dataset.

    from tsattn import Forecaster
    f = Forecaster(model="patchtst", attention="continuous", sink="learned", lookback=336, horizon=96)
    f.fit("my.csv", target="OT", max_epochs=20)
    f.predict()                 # DataFrame: the next `horizon` timestamps x target channels
    f.evaluate(split="test")    # {"mse": ..., "mae": ..., "mse_orig": ..., "mae_orig": ...}
    f.save("model.ckpt"); Forecaster.load("model.ckpt")

    # irregular series (each variable at its own times; nothing imputed): spans in time units
    g = Forecaster(model="irregular", attention="continuous", sink="learned", lookback=48.0, horizon=12.0)
    g.fit(table, id_column="patient", time_column="time", variable_column="name", value_column="value")
    g.predict(at=["2024-03-02 08:00", "2024-03-02 14:00"])   # every series and variable at those times

The model's task (``tsattn.tasks``: ``"window"`` for PatchTST and the decoder, ``"observations"`` for
the irregular model) decides what ``fit`` reads, how the model is built and how a forecast comes
back; this class only wires a data module, ``ForecastModule`` and a Lightning ``Trainer`` together.

One scale and one time unit from fit to forecast: whatever data ``predict`` or ``evaluate`` read
(the fit's, other data, or the source again after ``load``), they read it through a data module
rebuilt from the fit's data record (``ForecastDataModule.record``: reading options, scaler, time
unit, frequency, variables, spans). So a model forecasts the same before and after ``save`` /
``load``, bit for bit in one process at one thread count.
"""
from __future__ import annotations

import numbers
import os
from typing import Any, Optional, Union

import lightning.pytorch as pl
import numpy as np
import pandas as pd

from .data.base import ForecastDataModule
from .data.validation import SPLITS, check_choice, check_positive_int
from .lightning import BestEpochsAverage, ForecastModule
from .lightning.training import train
from .models.registry import estimator_defaults, model_trainable
from .persistence import Persistence
from .tasks import split_fit_options, task_of_model
from .tasks.quantiles import quantiles_from

DataLike = Union[str, os.PathLike, pd.DataFrame, Any]


class Forecaster(Persistence):
    """A forecasting model with the fit / predict / evaluate / save / load life cycle.

    Args:
        model: a registered model name: ``"patchtst"`` or ``"decoder"`` (the window task: a regular
            grid of rows), or ``"irregular"`` (the observation task: irregular series, each variable
            at its own times, nothing imputed); see ``tsattn.models.registry``.
        attention, sink, rope: ``"softmax"`` | ``"continuous"``; ``"zeros"`` | ``"first"`` | ``"learned"``;
            RoPE on knot times. These, ``lr``, ``lr_schedule``, ``batch_size`` (None) and ``model_kwargs``
            default to what the model's benchmarks use (``estimator_defaults``): PatchTST and the decoder
            softmax, zero sink, lr 1e-4, ``"type3"``, batch 128; the irregular model continuous, learned
            sink, RoPE, lr 1e-3, ``"constant"``, batch 32, ``residual=True``.
        lookback: window task: L, rows of history the model reads (None: 336). Observation task: the
            history span before a forecast origin in the data's time units (None: all the history).
        horizon: window task: H, rows it forecasts (None: 96). Observation task: the target span
            after an origin (None: a registered dataset's protocol, or the longest target span of the
            training samples at fixed ``origins``). After a fit, ``lookback`` and ``horizon`` hold the
            spans the model was fit with (as after ``load``); a later ``fit`` samples with these.
        model_kwargs: further model hyperparameters (e.g. ``{"d_model": 16, "n_layers": 3}``).
        loss, lr, lr_schedule: ``"mse"`` | ``"mae"`` | ``"huber"`` (| ``"pinball"`` with quantiles); Adam's
            rate; ``"type3"`` | ``"onecycle"`` | ``"constant"`` (see ``ForecastModule``).
        optimizer, weight_decay: ``"adam"`` (``weight_decay`` an L2 term in the gradient) | ``"adamw"``
            (decoupled: each step shrinks the weights by ``lr * weight_decay``); default 0.0.
        huber_delta, pct_start, loss_reduction: the Huber loss's threshold (scaled units; 1.0), the
            warm-up share of ``"onecycle"`` (0.3), and, observation task only, how a batch's targets
            are averaged (``"variable"``, ``"point"``, ``"dataset"``); as in ``ForecastModule``.
        batch_size: windows (observation task: samples, and series in ``predict``) per batch.
        seed: seeds weights, shuffling and dropout (an int >= 0); a fit is repeatable on CPU.
        ensemble: train this many nets side by side (each from its own initial weights, each on its own loss,
            the same batches) and forecast their mean; k times the compute (``ForecastModule``). Default 1.
        bootstrap: with ``ensemble`` > 1, each member weighs each sample of a training batch by its own
            Poisson(1) draw (online bagging: each learns from its own resample, so they err less alike).
        quantiles: a probabilistic forecast: the quantile levels to forecast (e.g. ``[0.1, 0.5, 0.9]``;
            0.5 is added: the point forecast, trained with ``loss``, ``"pinball"`` making it a median),
            the others with the pinball loss; ``predict`` adds the intervals (``OT-lo-80``, ``OT-hi-80``).
        levels: the same said as central intervals in percent (``[80, 95]``); not with ``quantiles``.
        calibrate: after a fit, calibrate the intervals on the validation split (``calibrate()``).
        blend_naive: after a fit (before ``calibrate``), move each output column's forecast towards the naive
            forecast as far as the validation split says (``blend_naive()``).
        compile: ``torch.compile`` the model for training and evaluation (off by default: on CPU the
            eager models train faster; the observation task always runs eagerly); ``predict`` runs eagerly.

    Raises ``ValueError`` (``tsattn.data.DataError`` for the sizes) for a setting of the wrong type or range.
    """

    def __init__(
        self,
        model: str = "patchtst",
        *,
        attention: Optional[str] = None,
        sink: Optional[str] = None,
        rope: Optional[bool] = None,
        lookback: Optional[Union[int, float]] = None,
        horizon: Optional[Union[int, float]] = None,
        model_kwargs: Optional[dict[str, Any]] = None,
        loss: str = "mse",
        lr: Optional[float] = None,
        lr_schedule: Optional[str] = None,
        optimizer: str = "adam",
        weight_decay: float = 0.0,
        huber_delta: float = 1.0,
        pct_start: float = 0.3,
        loss_reduction: str = "variable",
        batch_size: Optional[int] = None,
        seed: int = 2021,
        ensemble: int = 1,
        bootstrap: bool = False,
        compile: bool = False,
        quantiles: Optional[list[float]] = None,
        levels: Optional[list[float]] = None,
        calibrate: bool = False,
        blend_naive: bool = False,
    ) -> None:
        self.task = task_of_model(model)
        defaults = estimator_defaults(model)  # what the model's benchmarks train with
        attention, sink, rope, lr, lr_schedule, batch_size = (
            defaults[k] if v is None else v for k, v in (("attention", attention), ("sink", sink), ("rope", rope),
                                                         ("lr", lr), ("lr_schedule", lr_schedule),
                                                         ("batch_size", batch_size)))
        lookback, horizon = self.task.check_span("lookback", lookback), self.task.check_span("horizon", horizon)
        batch_size = check_positive_int("batch_size", batch_size)
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0; got {seed!r}: pass e.g. seed=2021")
        if model_kwargs is not None and not isinstance(model_kwargs, dict):
            raise ValueError(f"model_kwargs must be a dict of model hyperparameters; got {model_kwargs!r}")
        model_kwargs = {**defaults["model_kwargs"], **(model_kwargs or {})} or None
        self.config = dict(model=model, attention=attention, sink=sink, rope=rope, model_kwargs=model_kwargs,
                           loss=loss, lr=lr, lr_schedule=lr_schedule, optimizer=optimizer,
                           weight_decay=weight_decay, huber_delta=huber_delta, pct_start=pct_start,
                           loss_reduction=loss_reduction, compile=compile, seed=int(seed), ensemble=ensemble,
                           bootstrap=bootstrap, quantiles=quantiles_from(quantiles, levels))
        if calibrate and not self.config["quantiles"]:
            raise ValueError("calibrate=True widens or narrows intervals: give quantiles=[...] or levels=[...] too")
        self.calibrate_on_fit = bool(calibrate)
        self.blend_naive_on_fit = bool(blend_naive)
        self._lookback, self._horizon, self.batch_size, self.seed = lookback, horizon, batch_size, int(seed)
        self._given_spans = (lookback, horizon)  # what a fit samples with (fit fills lookback / horizon in)
        # validate the model's settings now rather than after the data is read
        ForecastModule(n_channels=1, lookback=lookback, horizon=horizon, **self.config)
        self.module: Optional[ForecastModule] = None
        self.datamodule: Optional[ForecastDataModule] = None
        self._record: Optional[dict[str, Any]] = None  # the fit's data record (the data module's, or a checkpoint's)
        self.trainer: Optional[pl.Trainer] = None
        self.best_model_path: Optional[str] = None
        self.accelerator: str = "auto"  # the accelerator the fit ran on: evaluate() runs there too

    # -- spans -----------------------------------------------------------------------------------
    def _set_span(self, name: str, value: Any) -> None:
        if getattr(self, "module", None) is not None:
            raise ValueError(
                f"{name} is the span the model was fit with ({getattr(self, '_' + name)!r}) and forecasts read; "
                f"to fit with another, make a new Forecaster(..., {name}={value!r}) and fit it"
            )
        value = self.task.check_span(name, value)
        setattr(self, "_" + name, value)
        lookback, horizon = self._given_spans
        self._given_spans = (value, horizon) if name == "lookback" else (lookback, value)

    @property
    def lookback(self) -> Optional[Union[int, float]]:
        """Window task: L rows; observation task: the history span (None: all). Settable before a
        fit (validated as in the constructor); after a fit, the span the model was fit with."""
        return self._lookback

    @lookback.setter
    def lookback(self, value: Any) -> None:
        self._set_span("lookback", value)

    @property
    def horizon(self) -> Optional[Union[int, float]]:
        """Window task: H rows; observation task: the target span. Settable before a fit; after a
        fit, the span the model was fit with."""
        return self._horizon

    @horizon.setter
    def horizon(self, value: Any) -> None:
        self._set_span("horizon", value)

    @property
    def data_record(self) -> Optional[dict[str, Any]]:
        """What the fit read and learnt (``ForecastDataModule.record``): plain values, as saved."""
        if self._record is None and self.datamodule is not None:
            self._record = self.datamodule.record()
        return self._record

    # -- fit -------------------------------------------------------------------------------------
    def fit(self, data: DataLike, *, max_epochs: int = 10, patience: Optional[int] = None,
            callbacks: Optional[list[pl.Callback]] = None, default_root_dir: Optional[Union[str, os.PathLike]] = None,
            enable_checkpointing: bool = True, average_best: Optional[int] = None, **options: Any) -> "Forecaster":
        """Train on ``data`` under the split protocol; keeps the weights of the best validation epoch
        (or, with ``average_best=k``, the mean of the k best epochs' weights).

        Runs go to ``default_root_dir`` (logs and checkpoints kept; ``best_model_path``), else to a
        temporary folder removed when ``fit`` returns (nothing is written to the working directory;
        the best weights stay in memory, ``save()`` writes them). ``enable_checkpointing=False``
        writes no checkpoint and keeps the last epoch's weights instead of the best.

        Args:
            data: a CSV path, a DataFrame, or a registered dataset name (``"ETTh1"``, ...; for the
                observation task also ``"physionet2012"`` with its protocol, or an ``ObservationSet``).
            max_epochs: training epochs.
            patience: stop after this many epochs without a better validation MSE; None: no early stop.
            callbacks, default_root_dir, enable_checkpointing: as for ``lightning.pytorch.Trainer``.
            average_best: keep the mean of the weights of the ``k`` best validation epochs, not the
                best epoch's (``tsattn.lightning.BestEpochsAverage``: one model); None: the best epoch.
            **options: the data module's reading and sampling options, checked before anything is
                read (``tsattn.data.CSVDataModule``: ``target``, ``features``, ``columns``,
                ``time_column``, ``sep``, ``decimal``, ``missing``, ``split``, ...;
                ``tsattn.data.ObservationDataModule``: ``id_column``, ``time_column``,
                ``variable_column``, ``value_column`` (a long table; without them a wide one),
                ``time_unit``, ``origins`` / ``origin_stride`` (default: rolling origins every
                ``horizon``), ``split_fractions``, ``max_series``, ``reader_options``, ...); the rest
                goes to ``lightning.pytorch.Trainer`` (``accelerator``, ``logger``, ...).
        Returns self. Raises ``ValueError`` for an option of the other task (``target`` for the
        irregular model), ``TypeError`` for one that neither the data module nor the Trainer takes
        (with a did-you-mean), ``DataError`` when the data cannot be read or sampled.
        """
        if average_best is not None:  # BestEpochsAverage checks k before anything is read
            callbacks = [*(callbacks or []), BestEpochsAverage(average_best)]
        data_options, trainer_options = split_fit_options(self.task, self.config["model"], options)
        lookback, horizon = self._given_spans
        dm = self.task.fit_datamodule(data, lookback=lookback, horizon=horizon, batch_size=self.batch_size,
                                      seed=self.seed, **data_options)
        pl.seed_everything(self.seed, workers=True, verbose=False)
        facts = self.task.module_facts(dm)
        module = ForecastModule(**facts, **self.config)
        self._lookback, self._horizon = facts["lookback"], facts["horizon"]  # as a loaded model reports them
        if not model_trainable(self.config["model"]):  # a reference forecast: its statistics, no training
            module.use_data(dm)
            self.task.fit_statistics(module, dm)
            self.module, self.datamodule, self._record = module, dm, None
        else:
            run = train(module, dm, max_epochs=max_epochs, patience=patience, callbacks=callbacks,
                        default_root_dir=default_root_dir, enable_checkpointing=enable_checkpointing, **trainer_options)
            self.module, self.datamodule, self.trainer, self._record = module, dm, run.trainer, None
            self.best_model_path, self.accelerator = run.best_model_path, run.accelerator
        if self.blend_naive_on_fit:   # a reference forecast too (the seasonal naive blended with the last value)
            self.blend_naive()
        if self.calibrate_on_fit:
            self.calibrate()
        return self

    def blend_naive(self, data: Optional[DataLike] = None, split: str = "val") -> "Forecaster":
        """Per output column (channel, or variable), move the forecast towards the naive forecast (the
        window's last row; the variable's last observed value) as far as ``split`` of ``data`` (default: the
        fit's validation split) says: ``naive + w * (model - naive)``, ``w`` in [0, 1] the least-squares
        weight over that column's targets there (``ForecastModule.blend_naive``). A column the model forecasts
        worse than carrying the last value forward then forecasts (nearly) that; one it forecasts well keeps
        ``w`` near 1. ``naive_weights`` shows the weights. A quantile model's quantiles move with its median,
        and intervals calibrated before are calibrated again on the same split. Applies to ``predict``,
        ``evaluate`` and ``backtest``; kept by ``save``."""
        module = self._require_fit()
        loader = self._split_loader(data, split)
        module.blend_naive(loader)
        if module.quantile_spec is not None and bool(module.calibrated):   # intervals of the unblended forecast
            module.calibrate(loader)
        return self

    @property
    def naive_weights(self) -> Optional[pd.Series]:
        """The weight of the model's change from the naive forecast per output column (``blend_naive``),
        indexed by the channel or variable name; None before ``blend_naive``."""
        module = self._require_fit()
        if not bool(module.naive_blended):
            return None
        scaler = ((self.data_record or {}).get("fitted") or {}).get("scaler") or {}
        names = scaler.get("names")
        index = [str(names[i]) for i in module.output_index] if names else list(range(module.naive_weight.numel()))
        return pd.Series(module.naive_weight.double().cpu().numpy(), index=index, name="naive_weight")

    def calibrate(self, data: Optional[DataLike] = None, split: str = "val") -> "Forecaster":
        """Conformal calibration of a quantile model's intervals on ``split`` of ``data`` (default: the
        fit's validation split): each interval is widened (or narrowed) per output channel (variable)
        so that it holds its level's share of those targets (conformalized quantile regression). The
        intervals then cover their level on data like the calibration data, whatever the quantile
        head learnt; the median (the point forecast) does not move. Kept by ``save``."""
        self._require_fit().calibrate(self._split_loader(data, split))
        return self

    def _split_loader(self, data: Optional[DataLike], split: str) -> Any:
        """The evaluation loader of ``split`` of ``data`` (``_datamodule``), for fitting an adjustment on it."""
        check_choice("split", split, SPLITS)
        dm = self._datamodule(data)
        dm.setup("test")
        return dm.evaluation_loader(split)

    # -- use -------------------------------------------------------------------------------------
    def _require_fit(self) -> ForecastModule:
        if self.module is None:
            raise RuntimeError("this Forecaster has no model yet: call fit(data) or Forecaster.load(path) first")
        return self.module

    def _datamodule(self, data: Optional[DataLike]) -> ForecastDataModule:
        """The fit's data module for ``data=None`` after a fit; else ``data`` (or, after ``load``, the
        fit's source) read the fit's way, on the fit's scale and time unit."""
        self._require_fit()
        if data is None and self.datamodule is not None:
            return self.datamodule
        record = self.data_record
        if record is None:
            raise RuntimeError(
                "this model carries no record of the data it was fit on (a checkpoint not written by tsattn); "
                "fit it with Forecaster.fit or the tsattn CLI"
            )
        return self.task.datamodule_class.from_record(record, data, batch_size=record.get("batch_size") or self.batch_size)

    def evaluate(self, split: str = "test", data: Optional[DataLike] = None,
                 accelerator: Optional[str] = None) -> dict[str, float]:
        """MSE / MAE on the scaled data (the published convention) and on the original scale.

        Observation task: the protocol's metrics: per variable over every target observation of the
        split, then the mean over the variables.

        Args:
            split: ``"test"``, ``"val"`` or ``"train"`` windows (samples) of the protocol.
            data: evaluate on other data, read with the fit's options, sampled and split the fit's
                way and scaled with the fit's scaler (default: the fit's data).
            accelerator: where to run (default: the accelerator the fit ran on; ``"auto"`` after ``load``).
        Returns: ``{"mse", "mae", "mse_orig", "mae_orig", ...}`` as floats."""
        module = self._require_fit()
        check_choice("split", split, SPLITS)
        dm = self._datamodule(data)
        dm.setup("test")
        module.use_data(dm)  # MASE against this data's in-sample naive forecast
        trainer = pl.Trainer(accelerator=accelerator or self.accelerator, devices=1, logger=False,
                             enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)
        result = trainer.test(module, dataloaders=dm.evaluation_loader(split), verbose=False)[0]
        return {key.removeprefix("test_"): float(value) for key, value in result.items()}

    def predict(self, data: Optional[DataLike] = None, at: Optional[Any] = None,
                origin: Optional[Any] = None) -> pd.DataFrame:
        """Forecast from the end of ``data`` (default: the fit's data; after ``load``, its source),
        read with the fit's options, scaled with the fit's scaler and timed in the fit's time unit.

        Window task: the ``horizon`` rows that follow ``data`` (any extract of at least ``lookback``
        rows with the channels the model was fit on, in any column order; under ``features="M"``
        other columns are an error): a DataFrame indexed by the next ``horizon`` timestamps (at the
        fit's frequency), one column per target channel, in original units. ``at`` and ``origin``
        must be None.

        Observation task: a series' history is every observation within ``lookback`` of its last one
        (the forecast origin); ``at`` requests times after it, up to ``horizon``: a long table (id,
        time, variable: a request a row), a wide one (id, time and the variables' columns, cells not
        read), a list of times (or one) for every series and variable, or None: every variable at the
        series' median observation step. ``origin`` (one time for every series) forecasts as the model
        was trained: the history is ``[origin - lookback, origin)``, nothing later is read, and ``at``
        asks for times in ``[origin, origin + horizon]``. Forecasts come back in original units in the
        layout of the table the model was fit on; a quantile model's intervals beside each value.

        Raises ``DataError`` naming the problem and the fix: data without the channels (variables)
        the model was fit on, or too short; a request before the origin, beyond ``horizon``, for an
        unknown series or variable, or repeated.
        """
        self.task.check_request(at=at, origin=origin)
        module = self._require_fit()
        return self.task.forecast(module, self._datamodule(data), at=at, origin=origin)

    def backtest(self, data: Optional[DataLike] = None, *, n_windows: int = 1, step: Optional[Any] = None,
                 horizon: Optional[Any] = None, cutoffs: Optional[Any] = None,
                 recalibrate: Optional[int] = None) -> pd.DataFrame:
        """How the fitted model would have forecast ``data`` (default: the fit's) from past origins: one
        tidy frame of every window's forecasts beside what was observed, in units, in batches of
        windows. Nothing at or after a window's cutoff is read for it; a window of the data the model
        was fit on (its train rows or series) is in-sample, and a ``DataWarning`` says so.

        Window task: the last ``n_windows`` windows, ``step`` rows apart (default 1), each forecasting
        ``horizon`` rows (default: the model's; not more); columns ``cutoff`` (the last input row's
        time), the time column, ``variable`` (the channel), ``step`` (1..h), ``forecast`` and
        ``observed``. Observation task: per series the last ``n_windows`` cutoffs, ``step`` time units
        apart (default ``horizon``), the last ``horizon`` before the series' end; or ``cutoffs=[t0,
        ...]`` for every series; every observation in ``[cutoff, cutoff + horizon)`` a target; columns
        id, ``cutoff``, time, variable, ``lead`` (time after the cutoff), ``forecast``, ``observed``.
        A quantile model adds ``forecast-lo-80`` ...; ``recalibrate=N``: each window's intervals conformally
        recalibrated on the N windows of its series observed before its cutoff (``tsattn.intervals``).
        ``tsattn.metrics.backtest_metrics(frame, by="cutoff")`` gives ``evaluate``'s metrics from it."""
        return self.task.run_backtest(self._require_fit(), self._datamodule(data), recalibrate=recalibrate,
                                      n_windows=n_windows, step=step, horizon=horizon, cutoffs=cutoffs, fit_data=data is None)

    def __repr__(self) -> str:
        return (f"Forecaster({self.config['model']!r}, attention={self.config['attention']!r}, lookback={self.lookback}, "
                f"horizon={self.horizon}; {'fit' if self.module is not None else 'not fit'})")


__all__ = ["Forecaster"]
