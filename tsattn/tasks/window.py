"""The window task: a regular grid of rows; a model maps a window [B, L, C_in] (+ knot times) to the
next H rows [B, H, C_out] (PatchTST, the patch decoder).

Batches are ``CSVDataModule``'s: ``"x"`` [B, L, C_in], ``"y"`` [B, H, C_out], ``"t_x"`` [B, L]. The
metrics are MSE / MAE over every forecast value, on the scaled data (the published convention) and
in original units, accumulated in float64.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Optional, Protocol, Union, runtime_checkable

import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.validation import check_positive_int
from ..data.errors import DataWarning
from ..data.windows.backtest import backtest_frame, backtest_windows, in_sample_windows
from ..data.windows.datamodule import CSVDataModule
from ..metrics import PointError, QuantileError
from .base import Task, point_loss, quantile_training_loss
from .quantiles import QuantileSpec

if TYPE_CHECKING:
    from ..lightning.module import ForecastModule

__all__ = ["WindowModel", "WindowTask"]

_DEFAULT_SPANS = {"lookback": 336, "horizon": 96}


@runtime_checkable
class WindowModel(Protocol):
    """What a model of the window task provides (``cls(n_channels, lookback, horizon, attention=,
    sink=, rope=, **model_kwargs)`` builds one)."""

    channel_independent: bool  # every channel forecast from its own history alone (in eval mode)

    def forward(self, x: Tensor, t_x: Optional[Tensor] = None) -> Tensor:
        """x [B, L, C_in], t_x [B, L] | None -> [B, H, C_in]."""

    def training_pairs(self, x: Tensor, t_x: Optional[Tensor], y: Tensor,
                       index: Union[list[int], slice]) -> tuple[Tensor, Tensor]:
        """The predictions and targets the training loss compares (output channels ``index``)."""


class WindowTask(Task):
    name = "window"
    datamodule_class = CSVDataModule
    default_backtest_step = 1

    def check_span(self, name: str, value: Any) -> int:
        return check_positive_int(name, _DEFAULT_SPANS[name] if value is None else value)

    def fit_datamodule(self, data: Any, *, lookback: Any, horizon: Any, batch_size: int, seed: int,
                       **options: Any) -> CSVDataModule:
        dm = CSVDataModule(data, lookback, horizon, batch_size=batch_size, seed=seed, **options)
        dm.prepare_data()
        dm.setup("fit")
        return dm

    def on_fit_setup(self, module: "ForecastModule", dm: Any) -> None:
        if isinstance(dm, CSVDataModule) and dm.features == "MS" and module.net.channel_independent:
            warnings.warn(
                f"features='MS' with the channel-independent model {module.hparams.model!r}: every channel is "
                "forecast from its own history, and only the target's forecast is kept, so the other "
                "columns cannot inform it (they only cost compute). This is a univariate forecaster of "
                "the target: fit with features='S' for the same forecasts at a fraction of the cost",
                UserWarning,
                stacklevel=3,
            )

    # -- the model ---------------------------------------------------------------------------------------
    def check_hparams(self, hparams: Any) -> None:
        index = hparams.target_index
        if index is not None and (not index or min(index) < 0 or max(index) >= hparams.n_channels):
            raise ValueError(f"`target_index` must hold channel positions in [0, {hparams.n_channels}); got {index}")
        reduction = hparams.get("loss_reduction", "variable")
        if reduction != "variable":
            raise ValueError(f"loss_reduction={reduction!r} is for the observation task (irregular models, whose "
                             f"targets are ragged); the window model {hparams.model!r} averages its loss over every "
                             "forecast point: leave loss_reduction at its default")

    def build_net(self, cls: type[nn.Module], hparams: Any) -> nn.Module:
        return cls(hparams.n_channels, hparams.lookback, hparams.horizon, attention=hparams.attention,
                   sink=hparams.sink, rope=hparams.rope, **self.model_kwargs(cls, hparams))

    def forward(self, module: "ForecastModule", batch: dict[str, Tensor]) -> Tensor:
        """[B, H, C_out] (quantile models: [B, H, C_out, Q], sorted, calibrated), scaled units."""
        y = module.net(batch["x"], batch.get("t_x"))
        index = module.hparams.target_index
        y = y if index is None else y[:, :, index]                       # channels: axis 2 of [B, H, C (, Q)]
        return self.finish(module, y, None, batch)

    def training_loss(self, module: "ForecastModule", batch: dict[str, Tensor],
                      net: Optional[nn.Module] = None, weight: Optional[Tensor] = None) -> Tensor:
        index = module.hparams.target_index
        net = module.net if net is None else net
        pred, target = net.training_pairs(batch["x"], batch.get("t_x"), batch["y"], slice(None) if index is None else index)
        spec = module.quantile_spec
        kind = module.hparams.loss
        if spec is not None:
            # the raw outputs: sorting would pass a crossing quantile's loss on to the point forecast
            per_value = quantile_training_loss(pred, target, spec, kind, module.hparams.huber_delta)
        elif weight is None:
            if kind == "mae":
                return F.l1_loss(pred, target)
            if kind == "huber":
                return F.huber_loss(pred, target, delta=module.hparams.huber_delta)
            return F.mse_loss(pred, target)
        else:
            per_value = point_loss(kind, pred, target, module.hparams.huber_delta)
        if weight is None:
            return per_value.mean()
        # each window's mean loss, weighted (all weights 0: a zero loss that keeps the graph)
        per_window = per_value.reshape(per_value.shape[0], -1).mean(dim=1)            # [B]
        weight = weight.to(per_window.dtype)
        total = weight.sum()
        return (weight * per_window).sum() / torch.where(total > 0, total, torch.ones_like(total))

    def batch_size(self, batch: dict[str, Tensor]) -> int:
        return batch["x"].shape[0]

    def metrics(self, n_outputs: int, quantiles: Optional[QuantileSpec] = None) -> nn.ModuleDict:
        parts = {"scaled": PointError(n_outputs), "orig": PointError(n_outputs)}
        if quantiles is not None:
            for part in ("quantiles", "quantiles_orig"):
                parts[part] = QuantileError(quantiles.quantiles, quantiles.pairs, n_outputs)
        return nn.ModuleDict(parts)

    def update_metrics(self, module: "ForecastModule", batch: dict[str, Tensor], metrics: nn.ModuleDict) -> None:
        pred, y = self.forward(module, batch), batch["y"]                 # [B, H, C_out (, Q)], [B, H, C_out]
        spec = module.quantile_spec
        point = pred if spec is None else pred[..., spec.median]
        channel = torch.arange(y.shape[-1], device=y.device).expand_as(y).reshape(-1)
        metrics["scaled"].update(point.reshape(-1), y.reshape(-1), channel)
        metrics["orig"].update(self.to_original(module, point.double(), batch).reshape(-1),
                               self.to_original(module, y.double(), batch).reshape(-1), channel)
        if spec is not None:
            metrics["quantiles"].update(pred.reshape(-1, len(spec)), y.reshape(-1), channel)
            metrics["quantiles_orig"].update(self.to_original(module, pred.double(), batch).reshape(-1, len(spec)),
                                             self.to_original(module, y.double(), batch).reshape(-1), channel)

    def to_original(self, module: "ForecastModule", pred: Tensor, batch: Optional[dict[str, Tensor]]) -> Tensor:
        """[B, H, C_out] (or a quantile model's [B, H, C_out, Q]: one axis more) scaled -> original units
        (the output channels' statistics, in ``pred``'s dtype)."""
        scale, mean = module.y_scale.to(pred.dtype), module.y_mean.to(pred.dtype)
        if module.quantile_spec is not None and pred.dim() == 4:
            scale, mean = scale[:, None], mean[:, None]
        return pred * scale + mean

    def targets(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        y = batch["y"]                                                     # [B, H, C_out]
        channel = torch.arange(y.shape[-1], device=y.device).expand_as(y)
        return y, channel, torch.ones_like(y, dtype=torch.bool)

    def naive_points(self, module: "ForecastModule", batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        last = batch["x"][:, -1, :]                                        # [B, C_in]: the window's last row
        index = module.hparams.target_index
        last = last if index is None else last[:, index]
        naive = last[:, None, :].expand(-1, int(module.hparams.horizon), -1)   # [B, H, C_out]
        return naive, torch.ones_like(naive, dtype=torch.bool)

    # -- forecasting ------------------------------------------------------------------------------------
    def check_request(self, *, at: Optional[Any] = None, origin: Optional[Any] = None) -> None:
        for name, value in (("at", at), ("origin", origin)):
            if value is not None:
                raise ValueError(
                    f"{name}= applies to observation models; a window model forecasts the horizon rows that "
                    f"follow the data: leave {name}=None"
                )

    def forecast(self, module: "ForecastModule", dm: CSVDataModule, *, at: Optional[Any] = None,
                 origin: Optional[Any] = None) -> pd.DataFrame:
        """The H rows after the data: a DataFrame indexed by the next H timestamps (at the fit's
        frequency), one column per output channel, in original units."""
        self.check_request(at=at, origin=origin)
        window = dm.last_window()
        y = module.forecast({"x": window["x"][None], "t_x": window["t_x"][None]})[0]  # [H, C_out (, Q)], units
        future = pd.DatetimeIndex(dm.future_timestamps(), name=dm.time_column_name)
        spec = module.quantile_spec
        if spec is None:
            return pd.DataFrame(y.cpu().numpy(), index=future, columns=list(dm.target_names))
        values = y.cpu().numpy()
        columns = {name: values[:, c, q] for c, channel in enumerate(dm.target_names) for name, q in spec.columns(channel)}
        return pd.DataFrame(columns, index=future)

    def backtest(self, module: "ForecastModule", dm: CSVDataModule, *, n_windows: int, step: Optional[Any] = None,
                 horizon: Optional[Any] = None, cutoffs: Optional[Any] = None, fit_data: bool = False) -> pd.DataFrame:
        """The last ``n_windows`` windows of the series, ``step`` rows apart (default 1), each forecast
        from the ``lookback`` rows before its origin in batches of the data module's batch size
        (``tsattn.data.windows.backtest``)."""
        if cutoffs is not None:
            raise ValueError("cutoffs= applies to observation models; a window backtest takes n_windows and step")
        windows = backtest_windows(dm, n_windows, 1 if step is None else step, horizon)
        inside = in_sample_windows(dm, windows) if fit_data else 0
        if inside:
            warnings.warn(f"{inside} of the {len(windows)} backtest windows forecast rows of the train segment, which "
                          "the model was fit on: their errors are in-sample; pass fewer n_windows or a smaller step to "
                          "backtest on the validation and test rows only", DataWarning, stacklevel=3)
        outs = [module.forecast(dm.windows_ending_at(windows.starts[first:first + dm.batch_size]))
                for first in range(0, len(windows), dm.batch_size)]
        forecasts = torch.cat(outs)[:, :windows.horizon].double().cpu().numpy()      # [K, h, C_out (, Q)], units
        frame = backtest_frame(windows, forecasts, list(dm.target_names), dm.time_column_name, module.quantile_spec)
        frame.attrs.update(per_variable=False, variable_column="variable", time_column=dm.time_column_name,
                           naive_scale=self.naive_scale(module, dm, list(dm.target_names)))
        return frame
