"""``ForecastModule``: a registered forecasting model as a LightningModule, for either task.

Loss, metrics (MSE / MAE on the scaled data, the published convention, and on the original scale),
Adam with the PatchTST learning-rate schedules, optional ``torch.compile`` and per-step reseeding
for runs that resume exactly from a checkpoint. What differs by the model's task (the batches, the
net's constructor, the loss, the metrics, back to units) is the task's (``tsattn.tasks``): this
class asks ``self.task`` and never the model's kind.
"""
from __future__ import annotations

import inspect
import math
import numbers
import warnings
from typing import Any, Optional, Union

import lightning.pytorch as pl
import numpy as np
import torch
from torch import Tensor

from ..data.base import ForecastDataModule
from ..models.ensemble import Ensemble, members_of
from ..models.patchtst import QuantileHead
from ..models.registry import get_model_class, model_trainable
from ..nn import ATTENTIONS, SINKS
from ..tasks import task_of_model
from ..tasks.quantiles import QuantileSpec, quantiles_from

LOSSES = ("mse", "mae", "huber", "pinball")
LR_SCHEDULES = ("type3", "onecycle", "constant")
LOSS_REDUCTIONS = ("variable", "point", "dataset")
OPTIMIZERS = ("adam", "adamw")


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
        loss_reduction: observation task only (a window model takes the default alone and raises
            for another): ``"variable"`` (the mean of the per-variable mean losses over the
            variables with targets in the batch: what the metrics measure),
            ``"point"`` (the mean over every observed target), or ``"dataset"`` (each target weighted
            by 1 / its variable's target count over the training samples, so that over an epoch the
            loss is the metric's mean over variables of per-variable means on the training split,
            where ``"variable"`` gives a variable seen in few batches less than its share; the
            counts come from the data module when the fit sets up).
        lr: the learning rate.
        weight_decay: the weight decay of the optimizer.
        optimizer: ``"adam"`` (Adam; ``weight_decay`` adds an L2 term to the gradient, scaled by Adam's
            step like the rest of it) or ``"adamw"`` (AdamW: each step shrinks every weight by
            ``lr * weight_decay``, apart from the gradient's step).
        lr_schedule: ``"type3"`` (PatchTST's ETT schedule: the base rate in epochs 0-3, then x0.9
            per epoch: 0.9x in epoch 4, 0.81x in epoch 5, ...), ``"onecycle"`` (per step, PatchTST's
            ``TST``), or ``"constant"``.
        pct_start: warm-up fraction of ``"onecycle"``.
        compile: ``torch.compile`` the model's forward (the first batches pay the compile time; on
            CPU the eager models train faster: measured in benchmarks/RESULTS.md). Models of the
            observation task have ragged, data-dependent shapes and run eagerly (a warning says so).
        seed: reseed torch's RNG before every train step with (seed, step), so dropout masks depend
            only on the step and a run resumed from a checkpoint repeats an uninterrupted one. None: off.
        quantiles: None (a point forecast) or the quantile levels of a probabilistic forecast (e.g.
            ``[0.1, 0.5, 0.9]``; 0.5 is added if absent): the model gives one value per quantile,
            sorted; the centre (0.5) is the point forecast, trained with ``loss`` as a point model is
            (``"mse"``: the mean; ``"pinball"``: the median), the others with the pinball loss on
            features they do not train (``tsattn.tasks.quantiles``).
        n_static: static covariates per series (observation task; linked from the data module).
        ensemble: the number of nets (members) of the model, each from its own draw of the initial weights;
            the forecast is their mean (``tsattn.models.ensemble.Ensemble``). They train side by side on the
            same batches, each on its own loss (a training step sums them: each member's gradient is the one
            it would get alone; ``train_loss`` logs their mean); validation, early stopping and checkpoints read
            the mean. 1 (the default): one net. Costs k times the compute of one net per step.
        bootstrap: with ``ensemble`` > 1, each member weighs each sample of every training batch (a series of
            the observation task, a window of the window task) by its own Poisson(1) draw, online bagging:
            each member learns from its own resample of the data instead of all from the same batches, so
            that they err less alike. False (the default): every member on the whole batch.
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
        optimizer: str = "adam",
        lr_schedule: str = "type3",
        pct_start: float = 0.3,
        compile: bool = False,
        seed: Optional[int] = None,
        quantiles: Optional[list[float]] = None,
        n_static: int = 0,
        ensemble: int = 1,
        bootstrap: bool = False,
    ) -> None:
        super().__init__()
        quantiles = quantiles_from(quantiles, None)
        if quantiles is None and loss == "pinball":
            raise ValueError("loss='pinball' trains quantiles: give quantiles=[...] (or levels=[...]), or another loss")
        for name, value, choices in (("attention", attention, ATTENTIONS), ("sink", sink, SINKS),
                                     ("loss", loss, LOSSES), ("lr_schedule", lr_schedule, LR_SCHEDULES),
                                     ("loss_reduction", loss_reduction, LOSS_REDUCTIONS),
                                     ("optimizer", optimizer, OPTIMIZERS)):
            if value not in choices:
                raise ValueError(f"`{name}` must be one of {choices}, got {value!r}")
        for name, value, low, high, closed in (("lr", lr, 0.0, math.inf, True),
                                               ("weight_decay", weight_decay, 0.0, math.inf, True),
                                               ("huber_delta", huber_delta, 0.0, math.inf, False),
                                               ("pct_start", pct_start, 0.0, 1.0, False)):
            if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
                    or not (low <= value if closed else low < value) or value >= high):
                bounds = f"{'>=' if closed else '>'} {low:g}" + ("" if high == math.inf else f" and < {high:g}")
                raise ValueError(f"`{name}` must be a finite number {bounds}; got {value!r}")
        if isinstance(ensemble, bool) or not isinstance(ensemble, numbers.Integral) or ensemble < 1:
            raise ValueError(f"`ensemble` must be an integer >= 1 (the number of nets); got {ensemble!r}")
        if ensemble > 1 and not model_trainable(model):
            raise ValueError(f"{model!r} is a reference forecast with no weights to train: its members would all "
                             f"forecast alike; leave ensemble=1")
        if not isinstance(bootstrap, bool):
            raise ValueError(f"`bootstrap` must be True or False; got {bootstrap!r}")
        if bootstrap and ensemble < 2:
            raise ValueError("bootstrap=True resamples the batches of each member of an ensemble: set ensemble to 2 "
                             "or more, or leave bootstrap=False")
        if target_index is not None:
            target_index = [int(i) for i in target_index]
        self.save_hyperparameters()
        self.task = task_of_model(model)
        self.task.check_hparams(self.hparams)
        # each member from its own draw of the initial weights (one net: as without the option, draw for draw)
        nets = [self.task.build_net(get_model_class(model), self.hparams) for _ in range(int(ensemble))]
        self.net = nets[0] if len(nets) == 1 else Ensemble(nets)
        n_out = self.task.n_outputs(self.hparams)
        # scaler statistics of the output channels (or variables): original-scale metrics and forecasts
        self.register_buffer("y_mean", torch.zeros(n_out))
        self.register_buffer("y_scale", torch.ones(n_out))
        # MASE's denominator per output column (the data's in-sample naive error, in units; NaN: unknown)
        self.register_buffer("naive_scale", torch.full((n_out,), float("nan"), dtype=torch.float64), persistent=False)
        if loss_reduction == "dataset":  # per output variable: (train samples) / (variables x its targets)
            self.register_buffer("target_weight", torch.full((n_out,), float("nan")), persistent=False)
        # the weight of the model's change from the naive forecast per output column (``blend_naive``; 1: the model)
        self.register_buffer("naive_weight", torch.ones(n_out))
        self.register_buffer("naive_blended", torch.tensor(False))
        self.quantile_spec = None if quantiles is None else QuantileSpec.of(quantiles)
        if self.quantile_spec is not None:  # conformal widening of each interval per output column (scaled units)
            self.register_buffer("interval_shift", torch.zeros(len(self.quantile_spec.pairs), n_out))
            self.register_buffer("interval_floor", torch.zeros(len(self.quantile_spec.pairs), n_out))
            self.register_buffer("calibrated", torch.tensor(False))
        self.val_metrics = self.task.metrics(n_out, self.quantile_spec)
        self.test_metrics = self.task.metrics(n_out, self.quantile_spec)

    @classmethod
    def from_hparams(cls, hparams: dict[str, Any]) -> "ForecastModule":
        """A module built from saved hyperparameters (a checkpoint's); keys it does not take are ignored."""
        known = inspect.signature(cls).parameters
        return cls(**{key: value for key, value in hparams.items() if key in known})

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
        dm = self.trainer.datamodule if self._trainer is not None else None
        if isinstance(dm, ForecastDataModule):
            self.use_data(dm)
        if dm is not None and stage == "fit":
            self.task.on_fit_setup(self, dm)
            if isinstance(dm, ForecastDataModule):
                self.task.fit_statistics(self, dm)

    def teardown(self, stage: str) -> None:
        if getattr(self, "_fill_before", None) is not None:  # what setup found (it turned the fills off)
            torch.utils.deterministic.fill_uninitialized_memory = self._fill_before
            self._fill_before = None

    @property
    def output_index(self) -> list[int]:
        """Positions of the output channels (variables) among the inputs."""
        index = self.hparams.target_index
        return list(index) if index is not None else list(range(self.hparams.n_channels))

    def use_data(self, dm: ForecastDataModule) -> None:
        """Take the output columns' scaler statistics (original-unit forecasts and metrics) and the
        in-sample naive errors (MASE) from a set-up data module."""
        if dm.scaler is not None:
            self.use_scaler(dm.scaler)
        scale = torch.as_tensor(np.asarray(dm.naive_scale(), dtype=np.float64))
        if scale.shape == self.naive_scale.shape:
            self.naive_scale.copy_(scale)

    def use_scaler(self, scaler) -> None:
        """Set the output channels' statistics (original-scale metrics and forecasts) from a fitted
        ``tsattn.data.Scaler`` over the input channels (variables)."""
        if len(scaler.offset) != self.hparams.n_channels:
            raise ValueError(
                f"the data has {len(scaler.offset)} channels (variables) but the model was built for "
                f"{self.hparams.n_channels}; build the model with n_channels={len(scaler.offset)}"
            )
        index = self.output_index
        # np.array copies: the scaler's arrays may be read-only views, which torch warns about
        self.y_mean.copy_(torch.as_tensor(np.array(scaler.offset[index], dtype=np.float64), dtype=self.y_mean.dtype))
        self.y_scale.copy_(torch.as_tensor(np.array(scaler.scale[index], dtype=np.float64), dtype=self.y_scale.dtype))

    def configure_model(self) -> None:
        if self.hparams.compile and not self.task.supports_compile:
            warnings.warn(f"compile=True is ignored for {self.hparams.model!r}: its batches have ragged, "
                          "data-dependent shapes, so it runs eagerly", UserWarning, stacklevel=2)
            return
        if self.hparams.compile and not getattr(self, "_compiled", False):
            self.net.compile()
            self._compiled = True

    # -- forward -----------------------------------------------------------------------------------
    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        """A batch of the data module -> the forecasts of its targets, in scaled units."""
        return self.task.forward(self, batch)

    def to_original(self, pred: Tensor, batch: Optional[dict[str, Tensor]] = None) -> Tensor:
        """Scaled forecasts of ``batch``'s targets -> original units (window task: [B, H, C_out], a
        quantile model's [B, H, C_out, Q], no batch needed; observation task: the batch's queries say
        each value's variable)."""
        return self.task.to_original(self, pred, batch)

    @torch.no_grad()
    def forecast(self, batch: dict[str, Tensor]) -> Tensor:
        """A batch (scaled inputs; target values are not read) -> forecasts in original units.

        Eval mode, no gradients, and always the eager (uncompiled) model: the same code whether the
        model was compiled for training or loaded from a checkpoint, so a forecast after ``save`` /
        ``load`` equals the one before bit for bit (same weights, same input, same thread count).
        """
        was_training = self.training
        self.eval()
        try:
            batch = {key: value.to(self.device) for key, value in batch.items() if value is not None}
            with torch.compiler.set_stance("force_eager"):
                return self.to_original(self(batch), batch)
        finally:
            self.train(was_training)

    def backward(self, loss: Tensor, *args: Any, **kwargs: Any) -> None:
        """Lightning's backward, inside the task's context (as the forward pass)."""
        with self.task.context():
            return super().backward(loss, *args, **kwargs)

    @torch.no_grad()
    def calibrate(self, loader: Any, min_points: int = 30) -> Tensor:
        """Conformal calibration of a quantile model's intervals on ``loader`` (the validation split):
        per interval and output column, the shift (in units of each interval's own width, added on
        both sides) that makes the interval hold a share ``level`` of the points: the
        ``ceil((n + 1) level) / n`` empirical quantile of the scores ``max(lo - y, y - hi) / width``
        (scaled conformalized quantile regression: a window or observation the model finds uncertain
        keeps a wider interval than a calm one). The width counts as at least a floor, a fraction
        (0, 0.1, 0.3 or 1) of the column's mean absolute error of the point forecast on these points,
        the one whose calibrated intervals score best there (the interval score): an interval the
        quantile head left (nearly) collapsed is then widened by a multiple of the typical error, not
        by a multiple of its own width, which would blow up wherever the head is not collapsed. A
        column with fewer than ``min_points`` points takes the shift and floor of all columns pooled.
        Sets ``interval_shift`` and ``interval_floor`` [K, C]; returns ``interval_shift``."""
        spec = self.quantile_spec
        if spec is None or not spec.pairs:
            raise ValueError("calibration needs a quantile model with at least one interval (quantiles=[0.1, 0.5, 0.9])")
        self.calibrated.fill_(False)
        pred, target, column = self._points(loader, self.task.calibration_points)        # [N, Q], [N], [N]
        error = (pred[:, spec.median] - target).abs()
        n_columns = self.interval_shift.shape[1]
        own = torch.bincount(column, minlength=n_columns) >= min_points
        shift = torch.zeros_like(self.interval_shift, dtype=torch.float64)
        floor = torch.zeros_like(shift)
        for k, (level, lo, hi) in enumerate(spec.pairs):
            points = [pred[:, lo], pred[:, hi], target, error]
            pooled = _calibrate_interval(*points, level / 100.0)
            for c in range(n_columns):
                at = column == c
                shift[k, c], floor[k, c] = _calibrate_interval(*(x[at] for x in points), level / 100.0) if own[c] else pooled
        self.interval_shift.copy_(shift.to(self.interval_shift.dtype))
        self.interval_floor.copy_(floor.to(self.interval_floor.dtype))
        self.calibrated.fill_(True)
        return self.interval_shift

    @torch.no_grad()
    def blend_naive(self, loader: Any, min_points: int = 30) -> Tensor:
        """Fit, per output column (channel or variable), how far the forecast moves from the naive one
        (the window's last row; the variable's last observed value), on ``loader`` (the validation split):
        the forecast becomes ``naive + w * (model - naive)`` with ``w`` in [0, 1] the least-squares weight
        over the column's targets (``naive_weights``): 1 keeps the model's forecast, 0 is the naive one. A
        column the model forecasts worse than the naive forecast moves towards it; a target without a naive
        forecast (a variable the history never showed) keeps the model's. A column with fewer than
        ``min_points`` targets keeps ``w = 1``. Sets ``naive_weight`` [C] and ``naive_blended``; returns the
        weights. A quantile model's quantiles all move with the median; calibrate its intervals after this."""
        self.naive_blended.fill_(False)
        pred, naive, target, column = self._points(loader, self.task.blend_points)
        weight = naive_weights(pred - naive, target - naive, column, self.naive_weight.numel(), min_points)
        self.naive_weight.copy_(weight.to(self.naive_weight.dtype))
        self.naive_blended.fill_(True)
        return self.naive_weight

    def _points(self, loader: Any, points: Any) -> list[Tensor]:
        """``points(self, batch)`` (a task's ``calibration_points`` or ``blend_points``) over ``loader``, in eval
        mode and eagerly, concatenated (floating tensors in float64). Raises ``ValueError`` for no targets."""
        was_training = self.training
        self.eval()
        parts: list[tuple[Tensor, ...]] = []
        try:
            for batch in loader:
                batch = {key: value.to(self.device) for key, value in batch.items()}
                with torch.compiler.set_stance("force_eager"):
                    parts.append(tuple(t.double() if t.is_floating_point() else t for t in points(self, batch)))
        finally:
            self.train(was_training)
        if sum(part[0].shape[0] for part in parts) == 0:
            raise ValueError("the data has no targets to fit on: pass a split with targets (split='val' of the fit's data)")
        return [torch.cat(column) for column in zip(*parts)]

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any, **kwargs: Any) -> None:
        # quantile checkpoints written before the width floor existed: no floor (as they were calibrated)
        if self.quantile_spec is not None and prefix + "interval_shift" in state_dict:
            state_dict.setdefault(prefix + "interval_floor", torch.zeros_like(self.interval_floor))
        # checkpoints written before the naive blend existed: not blended
        if prefix + "y_mean" in state_dict:
            state_dict.setdefault(prefix + "naive_weight", torch.ones_like(self.naive_weight))
            state_dict.setdefault(prefix + "naive_blended", torch.tensor(False))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    # -- steps -------------------------------------------------------------------------------------
    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        # each member on its own loss; the sum gives each the gradient it would get alone (one net: its loss)
        members = members_of(self.net)
        if self.hparams.get("bootstrap", False):  # each member on its own Poisson(1) resample of the batch's samples
            n = self.task.batch_size(batch)
            ones = torch.ones(n, device=self.device)
            losses = [self.task.training_loss(self, batch, net, weight=torch.poisson(ones)) for net in members]
        else:
            losses = [self.task.training_loss(self, batch, net) for net in members]
        loss = losses[0] if len(losses) == 1 else torch.stack(losses).sum()
        self.log("train_loss", loss / len(losses), prog_bar=True, on_step=True, on_epoch=True,
                 batch_size=self.task.batch_size(batch))
        return loss

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self.task.update_metrics(self, batch, self.val_metrics)

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self.task.update_metrics(self, batch, self.test_metrics)

    def _log_metrics(self, metrics: torch.nn.ModuleDict, prefix: str) -> None:
        for name, value in self.task.compute_metrics(self, metrics).items():
            self.log(f"{prefix}{name}", value.double())  # float64: the squared errors of large values stay finite
        for metric in metrics.values():
            metric.reset()

    def on_validation_epoch_end(self) -> None:
        self._log_metrics(self.val_metrics, "val_")

    def on_test_epoch_end(self) -> None:
        self._log_metrics(self.test_metrics, "test_")

    def predict_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> Tensor:
        """Forecasts of the batch's targets in original units."""
        return self.to_original(self(batch), batch)

    def on_fit_start(self) -> None:
        # states left by an earlier trainer.validate()/test() are inference tensors; start fresh
        for metrics in (self.val_metrics, self.test_metrics):
            for metric in metrics.values():
                metric.reset()

    # -- reproducibility ---------------------------------------------------------------------------
    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self.hparams.seed is not None:  # dropout masks depend only on (seed, step): exact resume
            torch.manual_seed((int(self.hparams.seed) * 1_000_003 + self.global_step) % 2**63)

    # -- optimisation ------------------------------------------------------------------------------
    def configure_optimizers(self):
        lr = self.hparams.lr
        tails = [p for m in self.modules() if isinstance(m, QuantileHead) for p in m.tail_parameters()]
        if tails:  # a quantile head's other quantiles: a linear model on given features, at a higher rate
            ids = {id(p) for p in tails}
            params = [{"params": [p for p in self.parameters() if id(p) not in ids], "lr": lr},
                      {"params": tails, "lr": lr * QuantileHead.TAIL_LR_SCALE}]
        else:
            params = self.parameters()
        opt = torch.optim.Adam(params, lr=lr, weight_decay=self.hparams.weight_decay,
                               decoupled_weight_decay=self.hparams.optimizer == "adamw")
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
            opt, max_lr=[group["lr"] for group in opt.param_groups], total_steps=int(total), pct_start=self.hparams.pct_start
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def naive_weights(change: Tensor, error: Tensor, column: Tensor, n_columns: int, min_points: int = 30) -> Tensor:
    """Per column, the weight ``w`` in [0, 1] that minimises ``sum((error - w * change) ** 2)`` over the
    column's points: ``change`` [N] is the model's forecast minus the naive one, ``error`` [N] the target
    minus the naive one, ``column`` [N] each point's column in 0..n_columns-1. ``w = sum(change * error) /
    sum(change ** 2)``, clipped to [0, 1]; 1 (the model as it is) for a column with fewer than ``min_points``
    points or whose forecast never leaves the naive one. Returns [n_columns] in float64."""
    change, error, column = change.double(), error.double(), column.long()
    cross = torch.zeros(n_columns, dtype=torch.float64, device=change.device).index_add_(0, column, change * error)
    power = torch.zeros_like(cross).index_add_(0, column, change * change)
    count = torch.bincount(column, minlength=n_columns)[:n_columns]
    weight = torch.where(power > 0, cross / power.clamp_min(torch.finfo(torch.float64).tiny), torch.ones_like(cross))
    return torch.where(count >= min_points, weight.clamp(0.0, 1.0), torch.ones_like(weight))


FLOOR_FRACTIONS = (0.0, 0.1, 0.3, 1.0)


def _calibrate_interval(lo: Tensor, hi: Tensor, y: Tensor, error: Tensor, level: float) -> tuple[Tensor, Tensor]:
    """Scaled conformal calibration of one interval [lo, hi] over points ``y`` [n] (``error``: the point
    forecast's absolute errors): for each width floor ``f * mean(error)`` (``FLOOR_FRACTIONS``), the
    shift that makes the interval hold ``level`` of the points; returns the (shift, floor) whose
    intervals have the lowest mean interval score ``width + 2 / a * distance outside`` (a = 1 - level)."""
    best = None
    for fraction in FLOOR_FRACTIONS:
        floor = (error.mean() * fraction) if error.numel() else error.new_zeros(())
        width = (hi - lo).clamp_min(1e-6).maximum(floor)
        shift = _conformal_quantile(torch.maximum(lo - y, y - hi) / width, level)
        low, high = lo - shift * width, hi + shift * width
        score = ((high - low) + 2 / (1 - level) * ((low - y).clamp_min(0) + (y - high).clamp_min(0))).mean()
        if best is None or score < best[0]:
            best = (score, shift, floor)
    return best[1], best[2]


def _conformal_quantile(scores: Tensor, level: float) -> Tensor:
    """The ``ceil((n + 1) level) / n`` empirical quantile of ``scores`` [n] (its largest value when that
    exceeds 1; 0 for no scores)."""
    n = scores.numel()
    if n == 0:
        return scores.new_zeros(())
    k = min(n, math.ceil((n + 1) * level))
    return scores.sort().values[k - 1]
