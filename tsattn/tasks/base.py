"""``Task``: everything that differs between kinds of input, behind one small interface.

A registered model names its task (``tsattn.models.registry``); the estimator (``Forecaster``), the
LightningModule (``ForecastModule``) and the CLI ask the task and never the model's kind:

- the data: which options a fit reads (``fit_options``), the fit's data module (``fit_datamodule``,
  set up), what the model is built from (``module_facts``), the span checks (``check_span``);
- the model: building the net (``build_net``), its forward on a batch, the training loss, the
  metrics (a ``ModuleDict`` of torchmetrics) and their epoch values, turning outputs back into
  units, a context for the forward and backward passes;
- forecasting: a fitted module and a data module -> a DataFrame (``forecast``).

One implementation per task: ``WindowTask`` (``tsattn.tasks.window``) and ``ObservationTask``
(``tsattn.tasks.observations``). A third kind of input is a third ``Task`` and a registration, not
a branch in every class.
"""
from __future__ import annotations

import contextlib
import inspect
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Optional

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from ..data.base import ForecastDataModule
from ..data.errors import DataError
from ..data.validation import check_positive_int
from ..intervals import check_windows, rolling_calibration
from ..metrics import mase
from .quantiles import QuantileSpec, pinball_loss

if TYPE_CHECKING:  # the LightningModule imports this package
    from ..lightning.module import ForecastModule

__all__ = ["Task", "data_options"]

# data-module arguments the estimator sets itself (the spans, batches, seeds, workers) or that are objects
_NOT_FIT_OPTIONS = ("self", "data", "lookback", "horizon", "history", "scaler", "batch_size", "num_workers",
                    "pin_memory", "drop_last_train", "seed", "kwargs")


def data_options(cls: type[ForecastDataModule]) -> frozenset[str]:
    """The reading and sampling options of a data module class (its and its bases' keyword arguments,
    less what the estimator sets itself)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if issubclass(klass, ForecastDataModule):
            names.update(inspect.signature(klass.__init__).parameters)
    return frozenset(names.difference(_NOT_FIT_OPTIONS))


class Task:
    """One kind of input and output. Subclasses set ``name`` and ``datamodule_class`` and implement the
    methods below; ``ForecastModule`` passes itself as ``module`` (its ``net``, ``hparams``, the
    output scaler buffers ``y_mean`` / ``y_scale`` and ``output_index``)."""

    name: ClassVar[str]
    datamodule_class: ClassVar[type[ForecastDataModule]]
    supports_compile: ClassVar[bool] = True

    # -- the data ----------------------------------------------------------------------------------------
    @property
    def fit_options(self) -> frozenset[str]:
        """The keyword arguments of ``Forecaster.fit`` that go to this task's data module."""
        return data_options(self.datamodule_class)

    def check_span(self, name: str, value: Any) -> Any:
        """``lookback`` / ``horizon`` as the estimator takes them (its default for None)."""
        raise NotImplementedError

    def fit_datamodule(self, data: Any, *, lookback: Any, horizon: Any, batch_size: int, seed: int,
                       **options: Any) -> ForecastDataModule:
        """The fit's data module over ``data``, read, sampled and scaled (``setup`` done, so that bad
        data fails before a model is built)."""
        raise NotImplementedError

    def module_facts(self, dm: ForecastDataModule) -> dict[str, Any]:
        """What ``ForecastModule`` is built from: ``n_channels``, ``lookback``, ``horizon``, ``target_index``."""
        return {"n_channels": dm.n_channels_in, "lookback": dm.lookback, "horizon": dm.horizon,
                "target_index": dm.target_index, "n_static": dm.n_static}

    def on_fit_setup(self, module: "ForecastModule", dm: ForecastDataModule) -> None:
        """Called when a fit sets up (warnings about the data and model together)."""

    def fit_statistics(self, module: "ForecastModule", dm: ForecastDataModule) -> None:
        """Give the net what it takes from the fit's train samples, before any training: a model that
        defines ``fit_statistics(loader, **facts)`` (the reference forecasts of ``models/baselines.py``, whose
        fit is only this; the irregular model's ``residual_start="mean"``) gets the train loader and the data's
        ``season``. The one place this is called, for trained and untrained models alike (a resumed fit's
        checkpoint then restores its own values)."""
        fit = getattr(module.net, "fit_statistics", None)
        if fit is not None:
            fit(dm.train_dataloader(), season=dm.season)

    # -- the model ---------------------------------------------------------------------------------------
    def check_hparams(self, hparams: Any) -> None:
        """Raise ``ValueError`` for settings this task does not take."""

    def build_net(self, cls: type[nn.Module], hparams: Any) -> nn.Module:
        raise NotImplementedError

    def model_kwargs(self, cls: type[nn.Module], hparams: Any) -> dict[str, Any]:
        """The model's keyword arguments: ``model_kwargs``, ``n_static`` (static covariates), and ``n_quantiles`` (and ``median_index``
        where the model takes it) for a quantile model (a model without a quantile head is an error
        naming it)."""
        kwargs = dict(hparams.model_kwargs or {})
        if hparams.get("n_static"):
            params = inspect.signature(cls).parameters
            if "n_static" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
                raise ValueError(f"the model {hparams.model!r} reads no static covariates: fit it without "
                                 "static_columns / static_variables")
            kwargs["n_static"] = int(hparams.n_static)
        if hparams.get("quantiles"):
            if "n_quantiles" not in inspect.signature(cls).parameters:
                raise ValueError(f"the model {hparams.model!r} gives point forecasts only: leave quantiles / levels None")
            kwargs["n_quantiles"] = len(hparams.quantiles)
            if "median_index" in inspect.signature(cls).parameters:
                kwargs["median_index"] = QuantileSpec.of(hparams.quantiles).median
        return kwargs

    def finish(self, module: "ForecastModule", pred: Tensor, column: Optional[Tensor], batch: dict[str, Tensor]) -> Tensor:
        """The net's raw outputs of ``batch`` -> the forecast: once ``ForecastModule.blend_naive`` has fit the
        weights, each output column's change from the naive forecast scaled by its weight ``w`` in [0, 1]
        (``naive + w * (pred - naive)``, every quantile alike; targets without a naive forecast as they
        are), then ``finish_quantiles``. ``column`` as for ``finish_quantiles``."""
        if bool(module.naive_blended):
            naive, has = self.naive_points(module, batch)
            weight = module.naive_weight if column is None else module.naive_weight[column]
            naive, weight = naive.to(pred.dtype), weight.to(pred.dtype)
            if module.quantile_spec is not None:                           # one weight for every quantile
                naive, has, weight = naive[..., None], has[..., None], weight[..., None]
            pred = torch.where(has, naive + weight * (pred - naive), pred)
        return self.finish_quantiles(module, pred, column)

    def finish_quantiles(self, module: "ForecastModule", pred: Tensor, column: Optional[Tensor]) -> Tensor:
        """A quantile model's raw outputs [..., Q] sorted (``sorted_quantiles``) and, once calibrated,
        each interval widened (or narrowed) on both sides by its conformal shift times its width, the
        width at least the calibration's floor (``module.interval_shift`` and ``module.interval_floor``
        [K, C]: per interval and output column; ``column`` [...] says each point's column, None: the
        axis before Q); a point model's outputs as they are."""
        spec = module.quantile_spec
        if spec is None:
            return pred
        pred = sorted_quantiles(pred, spec.median)
        if not bool(module.calibrated) or not spec.pairs:
            return pred
        shift = module.interval_shift.to(pred.dtype)                       # [K, C], in interval widths
        floor = module.interval_floor.to(pred.dtype)                       # [K, C], scaled units
        if column is not None:                                             # [K, ...] per point
            shift, floor = shift[:, column], floor[:, column]
        widths = interval_widths(pred, spec, floor)                          # [..., K]
        pred = pred.clone()
        for k, (_, lo, hi) in enumerate(spec.pairs):
            pred[..., lo] = pred[..., lo] - shift[k] * widths[..., k]
            pred[..., hi] = pred[..., hi] + shift[k] * widths[..., k]
        return sorted_quantiles(pred, spec.median)

    def n_outputs(self, hparams: Any) -> int:
        """Output channels (variables): the length of the output scaler."""
        return len(hparams.target_index) if hparams.target_index is not None else hparams.n_channels

    def forward(self, module: "ForecastModule", batch: dict[str, Tensor]) -> Tensor:
        """A batch -> the model's forecasts of its targets, in scaled units."""
        raise NotImplementedError

    def training_loss(self, module: "ForecastModule", batch: dict[str, Tensor],
                      net: Optional[nn.Module] = None, weight: Optional[Tensor] = None) -> Tensor:
        """The training loss of ``net`` (default ``module.net``; an ensemble's member) on ``batch``;
        ``weight``: [B] each sample's weight (``bootstrap``), None: every sample alike."""
        raise NotImplementedError

    def batch_size(self, batch: dict[str, Tensor]) -> int:
        raise NotImplementedError

    def metrics(self, n_outputs: int, quantiles: Any = None) -> nn.ModuleDict:
        """The metrics of ``update_metrics``: ``"scaled"`` and ``"orig"`` point errors, and for a quantile
        model (``quantiles``: its ``QuantileSpec``) ``"quantiles"`` / ``"quantiles_orig"``."""
        raise NotImplementedError

    def update_metrics(self, module: "ForecastModule", batch: dict[str, Tensor], metrics: nn.ModuleDict) -> None:
        raise NotImplementedError

    def compute_metrics(self, module: "ForecastModule", metrics: nn.ModuleDict) -> dict[str, Tensor]:
        """Over everything ``update_metrics`` saw (of the median, for a quantile model): ``mse``, ``mae``,
        ``rmse`` on the scaled data; the same ``_orig`` in units, with ``smape_orig`` (percent, 0-200);
        ``mase`` (against the in-sample naive forecast of ``module.naive_scale``, when known); and for a
        quantile model ``quantile_loss`` (and ``_orig``), each quantile's pinball loss and each
        interval's ``coverage_<level>``."""
        scaled, orig = metrics["scaled"].compute(), metrics["orig"].compute()
        out = {name: scaled[name] for name in ("mse", "mae", "rmse")}
        out.update({f"{name}_orig": orig[name] for name in ("mse", "mae", "rmse", "smape")})
        scale = module.naive_scale.to(torch.float64)
        if bool(torch.isfinite(scale).any()):
            out["mase"] = mase(metrics["orig"].per_group_mae(), scale.to(metrics["orig"].absolute.device))
        if "quantiles" in metrics:
            out.update(metrics["quantiles"].compute())
            units = metrics["quantiles_orig"].compute()
            out.update({f"{k}_orig": v for k, v in units.items() if not k.startswith("coverage")})
        return out

    def targets(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """``batch``'s target values, each target's output column (its channel or variable) and which
        targets are real (not padding), each in the layout of the point forecast."""
        raise NotImplementedError

    def naive_points(self, module: "ForecastModule", batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """The naive forecast of every target of ``batch`` (scaled; in the layout of the point forecast)
        and whether it has one: the window's last row (window task), the variable's last value in the
        history (observation task; none for a variable the history never showed)."""
        raise NotImplementedError

    def calibration_points(self, module: "ForecastModule", batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """A quantile model's sorted forecasts of ``batch``'s real targets [N, Q] (scaled), the targets
        [N] and each point's output column [N] (its channel or variable): what calibration reads."""
        pred = self.forward(module, batch)
        target, column, real = self.targets(batch)
        return pred[real], target[real], column[real]

    def blend_points(self, module: "ForecastModule", batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The point forecasts [N] of ``batch``'s real targets that have a naive forecast, those naive
        forecasts [N], the targets [N] and their output columns [N]: what ``blend_naive`` reads."""
        pred = self.forward(module, batch)
        if module.quantile_spec is not None:
            pred = pred[..., module.quantile_spec.median]
        target, column, real = self.targets(batch)
        naive, has = self.naive_points(module, batch)
        keep = real & has
        return pred[keep], naive[keep].to(pred.dtype), target[keep], column[keep]

    def to_original(self, module: "ForecastModule", pred: Tensor, batch: dict[str, Tensor]) -> Tensor:
        """Scaled forecasts of ``batch``'s targets -> original units."""
        raise NotImplementedError

    @contextlib.contextmanager
    def context(self) -> Iterator[None]:
        """Around the forward and backward passes (nothing by default)."""
        yield

    # -- forecasting ------------------------------------------------------------------------------------
    def check_request(self, *, at: Optional[Any] = None, origin: Optional[Any] = None) -> None:
        """Raise for request arguments this task does not take (before anything is read)."""

    @staticmethod
    def naive_scale(module: "ForecastModule", dm: ForecastDataModule, names: list[str]) -> Optional[dict[str, float]]:
        """Per output column, MASE's denominator for a backtest of ``dm``: its own train split's
        in-sample naive error, or (data too short to split, e.g. a few series) the fit data's."""
        try:
            scale = np.asarray(dm.naive_scale(), dtype=np.float64)
        except DataError:
            scale = module.naive_scale.double().cpu().numpy()
        return dict(zip(names, scale.tolist())) if np.isfinite(scale).any() else None

    def backtest(self, module: "ForecastModule", dm: ForecastDataModule, *, n_windows: int, step: Optional[Any] = None,
                 horizon: Optional[Any] = None, cutoffs: Optional[Any] = None, fit_data: bool = False) -> pd.DataFrame:
        """A rolling-origin backtest as a tidy frame (see ``Forecaster.backtest``); ``fit_data``: ``dm``
        holds the data the model was fit on (windows the model was fit on are then warned of)."""
        raise NotImplementedError

    default_backtest_step: ClassVar[Optional[int]] = None      # None: one horizon (the observation task's)

    def run_backtest(self, module: "ForecastModule", dm: ForecastDataModule, *, recalibrate: Optional[int],
                     n_windows: int, step: Optional[Any] = None, horizon: Optional[Any] = None,
                     cutoffs: Optional[Any] = None, fit_data: bool = False) -> pd.DataFrame:
        """``backtest``, with (``recalibrate`` not None) each window's intervals recalibrated on the
        ``recalibrate`` windows before it (``tsattn.intervals.rolling_calibration``). Rolling windows
        (no ``cutoffs``) are then backtested with that many windows more, plus one horizon's worth
        (which end after the first returned window's cutoff and so cannot calibrate it), and only the
        last ``n_windows`` (per series) are returned."""
        if recalibrate is None:
            return self.backtest(module, dm, n_windows=n_windows, step=step, horizon=horizon, cutoffs=cutoffs,
                                 fit_data=fit_data)
        if module.quantile_spec is None or not module.quantile_spec.pairs:
            raise ValueError("recalibrate= recalibrates intervals: backtest a quantile model (quantiles=[0.1, 0.5, "
                             "0.9] or levels=[80])")
        recalibrate = check_windows("recalibrate", recalibrate)
        extra = 0
        if cutoffs is None:
            n_windows = check_positive_int("n_windows", n_windows)
            h = self.check_span("horizon", horizon) if horizon is not None else dm.horizon
            if h is None:
                raise DataError("recalibrate= needs windows with an end: pass horizon=<time units>")
            s = self.check_span("step", step) if step is not None else (self.default_backtest_step or h)
            extra = recalibrate + int(np.floor(float(h) / float(s) + 1e-9)) + 1
        try:
            frame = self.backtest(module, dm, n_windows=n_windows + extra, step=step, horizon=horizon,
                                  cutoffs=cutoffs, fit_data=fit_data)
        except DataError as err:
            raise DataError(f"{err} (recalibrate={recalibrate} backtests {extra} earlier windows too, to calibrate "
                            "the first ones on: pass a smaller recalibrate or fewer n_windows)") from err
        frame = rolling_calibration(frame, recalibrate)
        if extra:
            by = frame.attrs.get("id_column")
            rank = (frame.groupby(by, sort=False)["cutoff"] if by else frame["cutoff"]).rank(method="dense",
                                                                                               ascending=False)
            frame = frame[(rank <= n_windows).to_numpy()].reset_index(drop=True)
        return frame

    def forecast(self, module: "ForecastModule", dm: ForecastDataModule, *, at: Optional[Any] = None,
                 origin: Optional[Any] = None) -> pd.DataFrame:
        """Forecasts in original units, as a DataFrame in the data's layout (see ``Forecaster.predict``)."""
        raise NotImplementedError


def sorted_quantiles(pred: Tensor, median: int) -> Tensor:
    """Quantile forecasts [..., Q] in increasing order along the last axis, the median's value kept at
    its position ``median`` (the lower quantiles clamped to at most it, the upper to at least it)."""
    mid = pred[..., median:median + 1]
    low = torch.minimum(pred[..., :median], mid).sort(dim=-1).values
    high = torch.maximum(pred[..., median + 1:], mid).sort(dim=-1).values
    return torch.cat([low, mid, high], dim=-1)


def interval_widths(pred: Tensor, spec: Any, floor: Optional[Tensor] = None) -> Tensor:
    """[..., K]: the width ``hi - lo`` of each interval of ``spec`` (``pred`` [..., Q], sorted), at least
    ``floor[k]`` (broadcast to ``pred[..., 0]``; the calibration's, see ``ForecastModule.calibrate``) and
    at least 1e-6 of the scaled data's unit, so that a collapsed interval can still be rescaled."""
    widths = []
    for k, (_, lo, hi) in enumerate(spec.pairs):
        width = (pred[..., hi] - pred[..., lo]).clamp_min(1e-6)
        widths.append(width if floor is None else torch.maximum(width, floor[k]))
    return torch.stack(widths, dim=-1)


def point_loss(kind: str, pred: Tensor, target: Tensor, huber_delta: float) -> Tensor:
    """Elementwise loss ``kind`` (``"mse"``, ``"mae"``, ``"huber"``) of ``pred`` against ``target``."""
    if kind == "mae":
        return (pred - target).abs()
    if kind == "huber":
        return torch.nn.functional.huber_loss(pred, target, delta=huber_delta, reduction="none")
    return (pred - target).square()


def quantile_training_loss(pred: Tensor, target: Tensor, spec: Any, kind: str, huber_delta: float) -> Tensor:
    """A quantile model's loss per point ([...]; ``pred`` [..., Q] as the head gives them, unsorted, so
    that each quantile's loss reaches only its own output; ``target`` [...]): with ``kind``
    ``"pinball"`` the mean pinball loss over every quantile (the centre is then a median); otherwise
    the point loss ``kind`` of the centre (the point forecast, trained as a point model trains it:
    ``"mse"`` makes it the mean) plus the mean pinball loss of the other quantiles."""
    pinball = pinball_loss(pred, target, spec.quantiles)                          # [..., Q]
    if kind == "pinball":
        return pinball.mean(-1)
    centre = point_loss(kind, pred[..., spec.median], target, huber_delta)
    others = [q for q in range(len(spec.quantiles)) if q != spec.median]
    return centre + pinball[..., others].mean(-1) if others else centre
