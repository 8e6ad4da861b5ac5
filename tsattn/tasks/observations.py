"""The observation task: irregular series, each variable observed at its own times; a model forecasts
requested (time, variable) points from the observations of a history (the irregular transformer).

Batches are ``ObservationDataModule``'s: ``"x_time"``, ``"x_var"``, ``"x_value"``, ``"x_mask"`` [B, Nx]
and ``"y_*"`` [B, Ny]. The loss and the metrics see only the observed targets (``"y_mask"``); the
metrics are per variable over all target points, then the mean over variables (``tsattn.metrics``).
"""
from __future__ import annotations

import contextlib
import warnings
from typing import TYPE_CHECKING, Any, Iterator, Optional, Protocol, runtime_checkable

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from ..data import registry
from ..data.errors import DataError, DataWarning
from ..data.observations.backtest import backtest_frame, backtest_samples, in_sample_windows
from ..data.observations.datamodule import ObservationDataModule
from ..data.validation import SPLITS, check_span
from ..metrics import PerVariableError, QuantileError
from ..models.baselines import last_values
from .base import Task, point_loss, quantile_training_loss
from .quantiles import QuantileSpec

if TYPE_CHECKING:
    from ..lightning.module import ForecastModule

__all__ = ["ObservationModel", "ObservationTask"]

INPUTS = ("x_time", "x_var", "x_value", "x_mask", "y_time", "y_var", "y_mask")


@runtime_checkable
class ObservationModel(Protocol):
    """What a model of the observation task provides (``cls(n_variables, attention=, sink=, rope=,
    **model_kwargs)`` builds one)."""

    def forward(self, x_time: Tensor, x_var: Tensor, x_value: Tensor, x_mask: Tensor, y_time: Tensor, y_var: Tensor,
                y_mask: Optional[Tensor] = None) -> Tensor:
        """Histories [B, Nx] and queries [B, Ny] -> forecasts [B, Ny] (scaled units; 0 at padding)."""


class ObservationTask(Task):
    name = "observations"
    datamodule_class = ObservationDataModule
    supports_compile = False  # ragged, data-dependent shapes

    def check_span(self, name: str, value: Any) -> Optional[float]:
        return check_span(name, value)

    def fit_datamodule(self, data: Any, *, lookback: Any, horizon: Any, batch_size: int, seed: int,
                       **options: Any) -> ObservationDataModule:
        protocol = registry.get_spec(data).protocol if isinstance(data, str) and registry.is_registered(
            data, "observations") else {}
        origins, stride = options.get("origins"), options.get("origin_stride")
        rolling = stride is not None or (origins is None and protocol.get("origins") is None)
        if rolling and (lookback is None or horizon is None):
            raise DataError(
                "rolling forecast origins (the default training samples) need a history and a target span: pass "
                "Forecaster('irregular', lookback=<history span>, horizon=<target span>) in the data's time units "
                "(e.g. lookback=48.0, horizon=12.0 with time_unit='h'), or give fit(origins=[t0, ...]) for fixed "
                "origins (there lookback=None reads all the history before each origin)"
            )
        if rolling and stride is None:
            options["origin_stride"] = horizon  # target windows tile each series: no observation is a target twice
        options["time_unit"] = options.get("time_unit") or "h"
        options["duplicates"] = options.get("duplicates") or "mean"
        dm = ObservationDataModule(data, lookback=lookback, horizon=horizon, batch_size=batch_size, seed=seed, **options)
        dm.prepare_data()
        dm.setup("fit")  # read, sample, split and scale before building anything, so bad data fails fast
        empty = [split for split in SPLITS if len(dm.samples(split)) == 0]
        if empty:
            counts = {split: len(dm.samples(split)) for split in SPLITS}
            raise DataError(
                f"the {' and '.join(empty)} split(s) hold no forecasting samples ({counts} under split={dm.split!r}, "
                f"fractions {dm.split_fractions}); validation picks the best epoch and test evaluates it: use a "
                "shorter horizon, a smaller origin_stride, other split_fractions, or more data"
            )
        if dm.forecast_span <= 0:
            raise DataError(
                "no train sample has a target observation after its origin, so there is nothing to learn; use "
                "earlier origins, a horizon, or more data"
            )
        return dm

    def on_fit_setup(self, module: "ForecastModule", dm: Any) -> None:
        if module.hparams.loss_reduction == "dataset" and isinstance(dm, ObservationDataModule):
            counts = torch.as_tensor(dm.target_counts("train"), dtype=torch.float64)
            weight = len(dm.samples("train")) / (int((counts > 0).sum()) * counts)
            module.target_weight.copy_(torch.where(counts > 0, weight, 0.0))

    # -- the model ---------------------------------------------------------------------------------------
    def check_hparams(self, hparams: Any) -> None:
        if hparams.target_index is not None:
            raise ValueError(f"model {hparams.model!r} forecasts every variable: leave `target_index` None")

    def build_net(self, cls: type[nn.Module], hparams: Any) -> nn.Module:
        return cls(hparams.n_channels, attention=hparams.attention, sink=hparams.sink, rope=hparams.rope,
                   **self.model_kwargs(cls, hparams))

    @contextlib.contextmanager
    def context(self) -> Iterator[None]:
        # oneDNN JIT-compiles and caches kernels per input shape; ragged batches bring new shapes at
        # every step, so its cache would grow by hundreds of MB an epoch and slow every step down.
        with torch.backends.mkldnn.flags(enabled=False):
            yield

    def forward(self, module: "ForecastModule", batch: dict[str, Tensor]) -> Tensor:
        """[B, Ny] (quantile models: [B, Ny, Q], sorted, calibrated), scaled units, 0 at padding."""
        with self.context():
            pred = module.net(*(batch[key] for key in INPUTS), **_static(batch))
        return self.finish(module, pred, batch["y_var"], batch)

    def training_loss(self, module: "ForecastModule", batch: dict[str, Tensor],
                      net: Optional[nn.Module] = None, weight: Optional[Tensor] = None) -> Tensor:
        with self.context():                       # the raw outputs: each quantile's loss reaches only itself
            pred = (module.net if net is None else net)(*(batch[key] for key in INPUTS), **_static(batch))
        mask, target = batch["y_mask"], batch["y_value"]
        spec = module.quantile_spec
        if spec is not None:
            per_point = quantile_training_loss(pred, target, spec, module.hparams.loss, module.hparams.huber_delta)[mask]
        else:
            per_point = point_loss(module.hparams.loss, pred, target, module.hparams.huber_delta)[mask]
        if weight is not None:
            return self._weighted_loss(module, batch, per_point, weight.to(per_point.dtype))
        if module.hparams.loss_reduction == "point" or per_point.numel() == 0:
            return per_point.mean() if per_point.numel() else pred.sum() * 0.0
        var = batch["y_var"][mask]
        if module.hparams.loss_reduction == "dataset":
            weight = self._target_weight(module)
            return (weight[var].to(per_point.dtype) * per_point).sum() / self.batch_size(batch)
        V = module.hparams.n_channels
        total = torch.zeros(V, dtype=per_point.dtype, device=pred.device).index_add(0, var, per_point)
        count = torch.bincount(var, minlength=V)
        seen = count > 0
        return (total[seen] / count[seen]).mean()

    def _weighted_loss(self, module: "ForecastModule", batch: dict[str, Tensor], per_point: Tensor,
                       series_weight: Tensor) -> Tensor:
        """``training_loss`` of ``per_point`` (the real targets' losses) with a weight per series [B]: each
        target counts as its series' weight; a zero loss when no target weighs."""
        mask = batch["y_mask"]
        weight = series_weight[:, None].expand(mask.shape)[mask]                     # [N], per real target
        if not bool((weight > 0).any()):
            return per_point.sum() * 0.0
        reduction = module.hparams.loss_reduction
        if reduction == "point":
            return (weight * per_point).sum() / weight.sum()
        var = batch["y_var"][mask]
        if reduction == "dataset":  # as unweighted: over the batch's series (here: their weights' sum)
            by_variable = self._target_weight(module)[var].to(per_point.dtype)
            return (by_variable * weight * per_point).sum() / series_weight.sum()
        V = module.hparams.n_channels
        total = torch.zeros(V, dtype=per_point.dtype, device=per_point.device).index_add(0, var, weight * per_point)
        count = torch.zeros(V, dtype=per_point.dtype, device=per_point.device).index_add(0, var, weight)
        seen = count > 0
        return (total[seen] / count[seen]).mean()

    @staticmethod
    def _target_weight(module: "ForecastModule") -> Tensor:
        """``loss_reduction="dataset"``'s weight per variable (from the data module at setup)."""
        weight = module.target_weight
        # filled once per fit and never emptied again: check once per module, not at every step (the
        # check reads the tensor back, a device sync on a GPU)
        if not getattr(module, "_target_weight_checked", False):
            if torch.isnan(weight).any():
                raise RuntimeError("loss_reduction='dataset' weighs each target by its variable's count over "
                                   "the training samples, which the fit takes from its data module: fit with a "
                                   "tsattn ObservationDataModule (trainer.fit(module, datamodule=...)), or use "
                                   "loss_reduction='variable'")
            module._target_weight_checked = True
        return weight

    def batch_size(self, batch: dict[str, Tensor]) -> int:
        return batch["y_var"].shape[0]

    def metrics(self, n_outputs: int, quantiles: Optional[QuantileSpec] = None) -> nn.ModuleDict:
        """Per-variable errors on the scaled data ("scaled") and in the variables' own units ("orig");
        a quantile model's pinball loss per variable and interval coverage over every point."""
        parts = {"scaled": PerVariableError(n_outputs), "orig": PerVariableError(n_outputs)}
        if quantiles is not None:
            for part in ("quantiles", "quantiles_orig"):
                parts[part] = QuantileError(quantiles.quantiles, quantiles.pairs, n_outputs, per_group=True)
        return nn.ModuleDict(parts)

    def update_metrics(self, module: "ForecastModule", batch: dict[str, Tensor], metrics: nn.ModuleDict) -> None:
        pred = self.forward(module, batch)
        target, var, mask = batch["y_value"], batch["y_var"], batch["y_mask"]
        spec = module.quantile_spec
        point = pred if spec is None else pred[..., spec.median]
        metrics["scaled"].update(point, target, var, mask)
        scale, mean = module.y_scale.double()[var], module.y_mean.double()[var]     # in units (sMAPE needs them)
        metrics["orig"].update(point.double() * scale + mean, target.double() * scale + mean, var, mask)
        if spec is not None:
            metrics["quantiles"].update(pred[mask], target[mask], var[mask])
            metrics["quantiles_orig"].update(pred[mask].double() * scale[mask][:, None] + mean[mask][:, None],
                                             (target.double() * scale + mean)[mask], var[mask])

    def to_original(self, module: "ForecastModule", pred: Tensor, batch: Optional[dict[str, Tensor]]) -> Tensor:
        """Scaled forecasts [B, Ny] (or [B, Ny, Q]) -> original units (each query's variable's
        statistics); 0 at padding."""
        var, mask = batch["y_var"], batch["y_mask"]
        scale, mean = module.y_scale[var], module.y_mean[var]
        if pred.dim() == var.dim() + 1:
            scale, mean, mask = scale[..., None], mean[..., None], mask[..., None]
        return torch.where(mask, pred * scale + mean, 0.0)

    def targets(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        return batch["y_value"], batch["y_var"], batch["y_mask"]

    def naive_points(self, module: "ForecastModule", batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        V = module.hparams.n_channels
        values, seen = last_values(batch["x_time"], batch["x_var"], batch["x_value"], batch["x_mask"], V)   # [B, V]
        var = batch["y_var"].long().clamp(0, V - 1)
        return values.gather(1, var), seen.gather(1, var)

    # -- forecasting ------------------------------------------------------------------------------------
    def forecast(self, module: "ForecastModule", dm: ObservationDataModule, *, at: Optional[Any] = None,
                 origin: Optional[Any] = None) -> pd.DataFrame:
        """Every request of ``at`` (from each series' last observation, or from ``origin``), in the layout
        of the table the model was fit on, in original units."""
        batches, requests = dm.queries(at=at, origin=origin)
        return dm.forecast_frame(requests, batches.forecast(module.forecast), module.quantile_spec)

    def backtest(self, module: "ForecastModule", dm: ObservationDataModule, *, n_windows: int,
                 step: Optional[Any] = None, horizon: Optional[Any] = None,
                 cutoffs: Optional[Any] = None, fit_data: bool = False) -> pd.DataFrame:
        """Windows at ``cutoffs`` (or each series' last ``n_windows``, ``step`` apart), forecast in
        batches of the data module's batch size (``tsattn.data.observations.backtest``)."""
        dataset, _ = backtest_samples(dm, n_windows, step, horizon, cutoffs)
        inside = in_sample_windows(dm, dataset.samples) if fit_data else 0
        if inside:
            warnings.warn(f"{inside} of the {len(dataset)} backtest windows forecast observations the model was fit on "
                          "(train series, or before the validation border): their errors are in-sample; backtest "
                          "validation or test data (data=...) for out-of-sample errors", DataWarning, stacklevel=3)
        counts = dataset.samples.n_targets
        forecasts = []
        for first in range(0, len(dataset), dm.batch_size):
            chunk = np.arange(first, min(first + dm.batch_size, len(dataset)))
            pred = module.forecast(dataset.batch(chunk)).double().cpu().numpy()         # [b, Ny (, Q)], units
            forecasts += [pred[b, :counts[i]] for b, i in enumerate(chunk)]
        frame = backtest_frame(dm, dataset, forecasts, module.quantile_spec)
        columns = dm.table_columns()
        frame.attrs.update(per_variable=True, variable_column=columns["variable"] or "variable",
                           time_column=columns["time"], id_column=columns["id"] or "id",
                           naive_scale=self.naive_scale(module, dm, list(dm.variables)))  # for backtest_metrics
        return frame


def _static(batch: dict[str, Tensor]) -> dict[str, Tensor]:
    """The batch's static covariates as the model's keyword (none: no keyword, as models without them take)."""
    return {"static": batch["static"]} if "static" in batch else {}
