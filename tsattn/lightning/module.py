"""``ForecastModule``: a registered forecasting model as a LightningModule.

Loss, metrics (MSE / MAE on the scaled data, the published convention, and on the original scale),
Adam with the PatchTST learning-rate schedules, optional ``torch.compile`` and per-step reseeding
for runs that resume exactly from a checkpoint. Two kinds of batches, the data layer's dicts:

- windows (``CSVDataModule``): ``"x"`` [B, L, C_in], ``"y"`` [B, H, C_out], ``"t_x"`` [B, L], ...
  for PatchTST and the patch decoder; metrics over every forecast value;
- observation sets (``ObservationDataModule``): ``"x_time"``, ``"x_var"``, ``"x_value"``,
  ``"x_mask"`` [B, Nx] and ``"y_*"`` [B, Ny] for the irregular model; the loss and the metrics see
  only the observed targets (``"y_mask"``), and the metrics are per variable over all target
  points, then the mean over variables (``tsattn.lightning.metrics``).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Optional, Union

import lightning.pytorch as pl
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torchmetrics import MeanAbsoluteError, MeanSquaredError, MetricCollection

from ..data.observation_datamodule import ObservationDataModule
from ..models.registry import get_model_class, input_kind
from ..nn import ATTENTIONS, SINKS
from .metrics import PerVariableError

LOSSES = ("mse", "mae", "huber")
LR_SCHEDULES = ("type3", "onecycle", "constant")
LOSS_REDUCTIONS = ("variable", "point")
_OBSERVATION_INPUTS = ("x_time", "x_var", "x_value", "x_mask", "y_time", "y_var", "y_mask")


def _metrics(prefix: str) -> MetricCollection:
    return MetricCollection(
        {"mse": MeanSquaredError(), "mae": MeanAbsoluteError(),
         "mse_orig": MeanSquaredError(), "mae_orig": MeanAbsoluteError()},
        prefix=prefix,
    )


def _observation_metrics(n_variables: int) -> torch.nn.ModuleDict:
    """Per-variable errors on the scaled data ("scaled") and in the variables' own units ("orig")."""
    return torch.nn.ModuleDict({"scaled": PerVariableError(n_variables), "orig": PerVariableError(n_variables)})


def data_info(dm) -> dict[str, Any]:
    """What a fitted data module learnt and how it read its data: what forecasting and evaluating
    on other data needs (saved in checkpoints; plain Python values only). An
    ``ObservationDataModule`` gives ``observation_data_info(dm)``; a ``CSVDataModule`` the keys:

    ``source`` (registered name or absolute path; None for a DataFrame), ``channel_names``,
    ``target_names``, ``target_index``, ``scaler_mean`` / ``scaler_scale`` (the train scaler's
    float64 statistics, exactly), ``time_unit_ns`` (the knot-time unit in nanoseconds; None for
    index knot times), ``freq``, ``time_column``, ``features``, ``target``, ``read_options`` (every
    reading option, resolved) and ``datamodule`` (the data module's hyperparameters).
    """
    if isinstance(dm, ObservationDataModule):
        return observation_data_info(dm)
    scaler = dm.scaler
    unit = dm.time_unit
    return {
        "source": dm.source,
        "channel_names": list(dm.channel_names),
        "target_names": list(dm.target_names),
        "target_index": list(dm.target_index),
        "scaler_mean": None if scaler is None else [float(v) for v in scaler.mean_],
        "scaler_scale": None if scaler is None else [float(v) for v in scaler.scale_],
        "time_unit_ns": None if unit is None else int(unit.value),
        "freq": dm.freq,
        "time_column": dm.table.time_column,
        "features": dm.features,
        "target": dm.target,
        "read_options": dm.reading_options(),
        "datamodule": {k: v for k, v in dm.hparams.items() if k != "data"},
    }


def observation_data_info(dm: ObservationDataModule) -> dict[str, Any]:
    """What a fitted ``ObservationDataModule`` learnt and how it read and sampled its data (plain
    Python values only), so that a model can read other data alike and forecast in its units.

    Keys: ``kind`` (``"observations"``), ``source`` (registered name or absolute path; None for a
    DataFrame or an ObservationSet), ``variables`` [V], ``columns`` (``dm.table_columns()``: the
    input's layout and column names), ``times`` (``"datetime"``: float time units since each
    series' first timestamp; ``"numeric"``: numbers as given), ``time_unit_ns`` (the reading's
    time unit in nanoseconds), ``read_options`` (``dm.reading_options()``, its ``time_unit`` in
    ``time_unit_ns``), ``sampling`` (``dm.sampling_options()``), ``history`` (the history span;
    None: all), ``horizon`` (``dm.forecast_span``: how far after an origin the model learnt to
    forecast), ``batch_size``, and ``scaler``: ``kind``, ``variables``, ``offset`` / ``scale``
    [V] (the fitted float64 values, exactly) and ``statistics`` (its table as
    ``{column: [V values]}``).
    """
    scaler = dm.scaler
    read = dm.reading_options()
    unit = read.pop("time_unit")
    return {
        "kind": "observations",
        "source": dm.source,
        "variables": list(dm.variables),
        "columns": dm.table_columns(),
        "times": "numeric" if dm.observations.time_unit is None else "datetime",
        "time_unit_ns": int(unit.value),
        "read_options": read,
        "sampling": dm.sampling_options(),
        "history": dm.history,
        "horizon": dm.forecast_span,
        "batch_size": dm.batch_size,
        "scaler": {
            "kind": scaler.kind,
            "variables": list(scaler.variables),
            "offset": [float(v) for v in scaler.offset],
            "scale": [float(v) for v in scaler.scale],
            "statistics": {str(c): [v.item() for v in scaler.statistics[c].to_numpy()] for c in scaler.statistics},
        },
    }


def type3_factor(epoch: int) -> float:
    """The ``type3`` learning-rate factor of 0-based ``epoch``: 1 for epochs 0-3, then 0.9 ** (epoch - 3).

    PatchTST calls ``adjust_learning_rate(optimizer, scheduler, epoch + 1, args)`` after each epoch,
    with ``lr if e < 3 else lr * 0.9 ** (e - 3)`` for its argument ``e``: the rate of 0-based epoch
    ``k`` is that formula at ``e = k``, for ``k >= 1`` (epoch 0 runs at the base rate).
    """
    return 1.0 if epoch < 3 else 0.9 ** (epoch - 3)


class ForecastModule(pl.LightningModule):
    """Train, validate and test a forecasting model from ``tsattn.models``.

    Args:
        model: registered model name (``"patchtst"``, ``"decoder"``, ``"irregular"``; see
            ``tsattn.models.registry``).
        n_channels: input channels C_in, or the number of variables V of an observation model
            (linked from the data module by the CLI and the API).
        lookback: window length L; for an observation model the history span in time units (None:
            all the history) (linked from the data module).
        horizon: forecast length H; for an observation model the target span (None: to the end)
            (linked from the data module).
        attention: ``"softmax"`` or ``"continuous"``.
        sink: sink knot, ``"zeros"``, ``"first"`` or ``"learned"``.
        rope: rotary position embedding on knot times.
        model_kwargs: further keyword arguments of the model class (e.g. ``{"d_model": 16}``).
        target_index: positions of the forecast channels among the inputs (``"MS"``/``"S"``); None = all.
            With a channel-independent model (``channel_independent``), ``"MS"`` keeps the target's
            forecast from the target's own history: the other inputs cannot inform it (fitting
            warns and names ``features="S"``).
        loss: ``"mse"``, ``"mae"`` or ``"huber"``.
        huber_delta: the Huber loss threshold (scaled units).
        loss_reduction: observation models only: ``"variable"`` (the mean of the per-variable mean
            losses over the variables with targets in the batch: what the metrics measure) or
            ``"point"`` (the mean over every observed target).
        lr: Adam learning rate.
        weight_decay: Adam weight decay.
        lr_schedule: ``"type3"`` (PatchTST's ETT schedule: the base rate in epochs 0-3, then x0.9
            per epoch: 0.9x in epoch 4, 0.81x in epoch 5, ...), ``"onecycle"`` (per step, PatchTST's
            ``TST``), or ``"constant"``.
        pct_start: warm-up fraction of ``"onecycle"``.
        compile: ``torch.compile`` the model's forward (the first batches pay the compile time; on
            CPU the eager models train faster: measured in benchmarks/RESULTS.md). Observation models
            have ragged, data-dependent shapes and run eagerly (a warning says so).
        seed: reseed torch's RNG before every train step with (seed, step), so dropout masks depend
            only on the step and a run resumed from a checkpoint repeats an uninterrupted one. None: off.
    """

    def __init__(
        self,
        model: str = "patchtst",
        n_channels: int = 7,
        lookback: Optional[Union[int, float]] = 336,
        horizon: Optional[Union[int, float]] = 96,
        attention: str = "softmax",
        sink: str = "zeros",
        rope: bool = False,
        model_kwargs: Optional[dict[str, Any]] = None,
        target_index: Optional[list[int]] = None,
        loss: str = "mse",
        huber_delta: float = 1.0,
        loss_reduction: str = "variable",
        lr: float = 1e-4,
        weight_decay: float = 0.0,
        lr_schedule: str = "type3",
        pct_start: float = 0.3,
        compile: bool = False,
        seed: Optional[int] = None,
    ) -> None:
        super().__init__()
        for name, value, choices in (("attention", attention, ATTENTIONS), ("sink", sink, SINKS),
                                     ("loss", loss, LOSSES), ("lr_schedule", lr_schedule, LR_SCHEDULES),
                                     ("loss_reduction", loss_reduction, LOSS_REDUCTIONS)):
            if value not in choices:
                raise ValueError(f"`{name}` must be one of {choices}, got {value!r}")
        if target_index is not None:
            target_index = [int(i) for i in target_index]
            if not target_index or min(target_index) < 0 or max(target_index) >= n_channels:
                raise ValueError(
                    f"`target_index` must hold channel positions in [0, {n_channels}); got {target_index}"
                )
        self.save_hyperparameters()
        cls = get_model_class(model)
        self.observations = input_kind(cls) == "observations"
        if self.observations:
            if target_index is not None:
                raise ValueError(f"model {model!r} forecasts every variable: leave `target_index` None")
            self.net = cls(n_channels, attention=attention, sink=sink, rope=rope, **(model_kwargs or {}))
        else:
            self.net = cls(n_channels, lookback, horizon, attention=attention, sink=sink, rope=rope,
                           **(model_kwargs or {}))
        self.target_index = target_index
        n_out = len(target_index) if target_index is not None else n_channels
        # scaler statistics of the output channels (or variables): original-scale metrics and forecasts
        self.register_buffer("y_mean", torch.zeros(n_out))
        self.register_buffer("y_scale", torch.ones(n_out))
        if self.observations:
            self.val_metrics = _observation_metrics(n_channels)
            self.test_metrics = _observation_metrics(n_channels)
        else:
            self.val_metrics = _metrics("val_")
            self.test_metrics = _metrics("test_")
        # What the model was fit on (channel names, scaler, frequency, reading options): saved in
        # checkpoints so that a loaded model can forecast from new data on the same scale.
        self.data_info: Optional[dict[str, Any]] = None

    # -- wiring ------------------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """Take the output channels' scaler statistics from the data module (if it has a scaler).

        Under ``Trainer(deterministic=True)`` (``torch.use_deterministic_algorithms(True)``) torch also
        fills every new uninitialised tensor with NaN, a debugging aid for code that reads memory it never
        wrote. Nothing here does, and on CPU those fills cost several times the training step of these
        small models, so ``torch.utils.deterministic.fill_uninitialized_memory`` is turned off (a
        process-wide setting) until ``teardown``, which restores it; the deterministic algorithms stay on.
        """
        if torch.are_deterministic_algorithms_enabled():
            if getattr(self, "_fill_before", None) is None:
                self._fill_before = torch.utils.deterministic.fill_uninitialized_memory
            torch.utils.deterministic.fill_uninitialized_memory = False
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        scaler = getattr(dm, "scaler", None) if dm is not None else None
        if scaler is not None:
            self.use_scaler(scaler)
        if dm is not None and stage == "fit" and hasattr(dm, "reading_options"):
            self.data_info = data_info(dm)
        if dm is not None and stage == "fit" and getattr(dm, "features", None) == "MS" and self.channel_independent:
            warnings.warn(
                f"features='MS' with the channel-independent model {self.hparams.model!r}: every channel is "
                "forecast from its own history, and only the target's forecast is kept, so the other "
                "columns cannot inform it (they only cost compute). This is a univariate forecaster of "
                "the target: fit with features='S' for the same forecasts at a fraction of the cost",
                UserWarning,
                stacklevel=2,
            )

    def teardown(self, stage: str) -> None:
        if getattr(self, "_fill_before", None) is not None:  # what setup found (it turned the fills off)
            torch.utils.deterministic.fill_uninitialized_memory = self._fill_before
            self._fill_before = None

    @property
    def channel_independent(self) -> bool:
        """Whether the model forecasts every channel from its own history alone (in eval mode), as
        PatchTST and the patch decoder do (the model class says so with ``channel_independent = True``)."""
        return bool(getattr(self.net, "channel_independent", False))

    def use_scaler(self, scaler) -> None:
        """Set the output channels' statistics (original-scale metrics and forecasts) from a fitted
        ``StandardScaler`` over the input channels, or from a per-variable ``VariableScaler`` of an
        observation data module (``offset`` / ``scale`` per variable)."""
        if hasattr(scaler, "offset"):
            if len(scaler.offset) != self.hparams.n_channels:
                raise ValueError(
                    f"the data has {len(scaler.offset)} variables but the model was built for "
                    f"{self.hparams.n_channels}; build the model with n_channels={len(scaler.offset)}"
                )
            # np.array copies: the scaler's arrays may be read-only views, which torch warns about
            self.y_mean.copy_(torch.as_tensor(np.array(scaler.offset, dtype=np.float64), dtype=self.y_mean.dtype))
            self.y_scale.copy_(torch.as_tensor(np.array(scaler.scale, dtype=np.float64), dtype=self.y_scale.dtype))
            return
        if len(scaler.mean_) != self.hparams.n_channels:
            raise ValueError(
                f"the data has {len(scaler.mean_)} input channels but the model was built for "
                f"{self.hparams.n_channels}; build the model with n_channels={len(scaler.mean_)}"
            )
        index = self.target_index if self.target_index is not None else list(range(self.hparams.n_channels))
        self.y_mean.copy_(torch.as_tensor(scaler.mean_[index], dtype=self.y_mean.dtype))
        self.y_scale.copy_(torch.as_tensor(scaler.scale_[index], dtype=self.y_scale.dtype))

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["tsattn_data_info"] = self.data_info

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.data_info = checkpoint.get("tsattn_data_info")

    def configure_model(self) -> None:
        if self.hparams.compile and self.observations:
            warnings.warn(f"compile=True is ignored for {self.hparams.model!r}: its batches have ragged, "
                          "data-dependent shapes, so it runs eagerly", UserWarning, stacklevel=2)
            return
        if self.hparams.compile and not getattr(self, "_compiled", False):
            self.net.compile()
            self._compiled = True

    # -- forward -----------------------------------------------------------------------------------
    def forward(self, x: Tensor, t_x: Optional[Tensor] = None) -> Tensor:
        """x [B, L, C_in] (+ knot times [B, L]) -> forecast [B, H, C_out] in scaled units."""
        y = self.net(x, t_x)
        return y if self.target_index is None else y[..., self.target_index]

    @torch.no_grad()
    def forecast(self, x: Tensor, t_x: Optional[Tensor] = None) -> Tensor:
        """x [B, L, C_in] (scaled) + knot times [B, L] -> forecast [B, H, C_out] in original units.

        Eval mode, no gradients, and always the eager (uncompiled) model: the same code whether the
        model was compiled for training or loaded from a checkpoint, so a forecast after ``save`` /
        ``load`` equals the one before bit for bit (same weights, same input, same thread count).
        """
        was_training = self.training
        self.eval()
        try:
            with torch.compiler.set_stance("force_eager"):
                return self.to_original(self(x.to(self.device), None if t_x is None else t_x.to(self.device)))
        finally:
            self.train(was_training)

    def to_original(self, y: Tensor) -> Tensor:
        """Scaled forecast [..., C_out] -> original units."""
        return y * self.y_scale + self.y_mean

    def _loss(self, pred: Tensor, target: Tensor) -> Tensor:
        if self.hparams.loss == "mae":
            return F.l1_loss(pred, target)
        if self.hparams.loss == "huber":
            return F.huber_loss(pred, target, delta=self.hparams.huber_delta)
        return F.mse_loss(pred, target)

    # -- observation sets --------------------------------------------------------------------------
    def forward_observations(self, batch: dict[str, Tensor]) -> Tensor:
        """An observation batch (see the module docstring) -> forecasts [B, Ny] in scaled units."""
        # oneDNN JIT-compiles and caches kernels per input shape; ragged batches bring new shapes at
        # every step, so its cache would grow by hundreds of MB an epoch and slow every step down.
        with torch.backends.mkldnn.flags(enabled=False):
            return self.net(*(batch[key] for key in _OBSERVATION_INPUTS))

    def observations_to_original(self, pred: Tensor, batch: dict[str, Tensor]) -> Tensor:
        """Scaled forecasts [B, Ny] of ``batch``'s queries -> original units (each query's variable's
        statistics); 0 at padded queries."""
        var = batch["y_var"]
        return torch.where(batch["y_mask"], pred * self.y_scale[var] + self.y_mean[var], 0.0)

    @torch.no_grad()
    def forecast_observations(self, batch: dict[str, Tensor]) -> Tensor:
        """An observation batch (scaled history ``x_*``, queries ``y_time``, ``y_var``, ``y_mask``;
        ``y_value`` is not read) -> forecasts [B, Ny] in original units, 0 at padded queries.

        Eval mode, no gradients, the eager model, as ``forecast``: a forecast after ``save`` /
        ``load`` equals the one before bit for bit (same weights, same batch, same thread count).
        """
        was_training = self.training
        self.eval()
        try:
            batch = {key: value.to(self.device) for key, value in batch.items()}
            with torch.compiler.set_stance("force_eager"):
                return self.observations_to_original(self.forward_observations(batch), batch)
        finally:
            self.train(was_training)

    def backward(self, loss: Tensor, *args: Any, **kwargs: Any) -> None:
        """Lightning's backward; for observation models without oneDNN, as ``forward_observations``."""
        if not self.observations:
            return super().backward(loss, *args, **kwargs)
        with torch.backends.mkldnn.flags(enabled=False):
            return super().backward(loss, *args, **kwargs)

    def _observation_loss(self, pred: Tensor, batch: dict[str, Tensor]) -> Tensor:
        mask, target = batch["y_mask"], batch["y_value"]
        if self.hparams.loss == "mae":
            per_point = (pred - target).abs()
        elif self.hparams.loss == "huber":
            per_point = F.huber_loss(pred, target, delta=self.hparams.huber_delta, reduction="none")
        else:
            per_point = (pred - target).square()
        per_point = per_point[mask]
        if self.hparams.loss_reduction == "point" or per_point.numel() == 0:
            return per_point.mean() if per_point.numel() else pred.sum() * 0.0
        var = batch["y_var"][mask]
        V = self.hparams.n_channels
        total = torch.zeros(V, dtype=per_point.dtype, device=pred.device).index_add(0, var, per_point)
        count = torch.bincount(var, minlength=V)
        seen = count > 0
        return (total[seen] / count[seen]).mean()

    def _observation_eval_step(self, batch: dict[str, Tensor], metrics: torch.nn.ModuleDict) -> Tensor:
        pred = self.forward_observations(batch)
        target, var, mask = batch["y_value"], batch["y_var"], batch["y_mask"]
        metrics["scaled"].update(pred, target, var, mask)
        metrics["orig"].update(pred * self.y_scale[var], target * self.y_scale[var], var, mask)
        return pred

    def _log_observation_metrics(self, metrics: torch.nn.ModuleDict, prefix: str) -> None:
        for suffix, metric in (("", metrics["scaled"]), ("_orig", metrics["orig"])):
            for name, value in metric.compute().items():
                self.log(f"{prefix}{name}{suffix}", value.float())
            metric.reset()

    def on_validation_epoch_end(self) -> None:
        if self.observations:
            self._log_observation_metrics(self.val_metrics, "val_")

    def on_test_epoch_end(self) -> None:
        if self.observations:
            self._log_observation_metrics(self.test_metrics, "test_")

    # -- steps -------------------------------------------------------------------------------------
    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        if self.observations:
            loss = self._observation_loss(self.forward_observations(batch), batch)
            self.log("train_loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=batch["y_var"].shape[0])
            return loss
        x, y, t_x = batch["x"], batch["y"], batch.get("t_x")
        if hasattr(self.net, "forward_tokens"):
            # causal decoders learn from every token: each forecasts the H rows after its patch
            tokens = self.net.forward_tokens(x, t_x)                            # [B, n, H, C_in]
            index = self.target_index if self.target_index is not None else slice(None)
            pred = tokens[..., index]                                           # [B, n, H, C_out]
            target = self.net.token_targets(x[..., index], y)                   # [B, n, H, C_out]
        else:
            pred, target = self(x, t_x), y
        loss = self._loss(pred, target)
        self.log("train_loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=x.shape[0])
        return loss

    def _eval_step(self, batch: dict[str, Tensor], metrics: MetricCollection) -> Tensor:
        pred = self(batch["x"], batch.get("t_x"))
        y = batch["y"]
        flat = pred.reshape(-1), y.reshape(-1)
        flat_orig = self.to_original(pred).reshape(-1), self.to_original(y).reshape(-1)
        metrics["mse"].update(*flat)
        metrics["mae"].update(*flat)
        metrics["mse_orig"].update(*flat_orig)
        metrics["mae_orig"].update(*flat_orig)
        return pred

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        if self.observations:
            self._observation_eval_step(batch, self.val_metrics)
            return
        self._eval_step(batch, self.val_metrics)
        self.log_dict(self.val_metrics, on_epoch=True, prog_bar=False, batch_size=batch["x"].shape[0])

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        if self.observations:
            self._observation_eval_step(batch, self.test_metrics)
            return
        self._eval_step(batch, self.test_metrics)
        self.log_dict(self.test_metrics, on_epoch=True, batch_size=batch["x"].shape[0])

    def predict_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> Tensor:
        """Forecast [B, H, C_out] in original units (observation models: [B, Ny], 0 at padded queries)."""
        if self.observations:
            return self.observations_to_original(self.forward_observations(batch), batch)
        return self.to_original(self(batch["x"], batch.get("t_x")))

    def on_fit_start(self) -> None:
        # states left by an earlier trainer.validate()/test() are inference tensors; start fresh
        for metrics in (self.val_metrics, self.test_metrics):
            for metric in (metrics.values() if isinstance(metrics, torch.nn.ModuleDict) else [metrics]):
                metric.reset()

    # -- reproducibility ---------------------------------------------------------------------------
    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self.hparams.seed is not None:  # dropout masks depend only on (seed, step): exact resume
            torch.manual_seed((int(self.hparams.seed) * 1_000_003 + self.global_step) % 2**63)

    # -- optimisation ------------------------------------------------------------------------------
    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
        schedule = self.hparams.lr_schedule
        if schedule == "constant":
            return opt
        if schedule == "type3":
            sched = torch.optim.lr_scheduler.LambdaLR(opt, type3_factor)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}
        total = self.trainer.estimated_stepping_batches
        if not math.isfinite(total):
            raise ValueError("lr_schedule='onecycle' needs a finite number of steps: set max_epochs or max_steps")
        sched = torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=self.hparams.lr, total_steps=int(total), pct_start=self.hparams.pct_start
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
