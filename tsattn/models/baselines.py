"""Reference forecasts: no training, the same inputs and outputs as a model of their task, registered
like one, so that ``Forecaster("naive").fit(data)`` / ``.predict()`` / ``.evaluate()`` / ``.backtest()``
put them beside a model on the user's data.

Window task (a window x [B, L, C] -> [B, H, C]):

- ``"naive"`` (``Naive``): every future row is the window's last row;
- ``"seasonal_naive"`` (``SeasonalNaive``): row h is the row one season before it (``season`` rows,
  default 24: a day of hourly data), repeated;
- ``"mean"`` (``WindowMean``): every future row is the training mean of the channel.

Observation task (the batches of ``IrregularTransformer``, see its ``forward``; [B, Ny]):

- ``"last_observation"`` (``LastObservation``): a query (t, v) gets the last value of variable v
  observed in the history (the "persistence" forecast); a variable never observed in the history
  gets its mean;
- ``"variable_mean"`` (``VariableMean``): a query (t, v) gets the mean of variable v's training
  observations.

They are not trained: ``fit_statistics(train_loader, season=...)`` sets what they need (the means: a buffer in
scaled units, so a checkpoint keeps them); the attention settings a task passes are ignored.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional, Union

import torch
from torch import Tensor, nn

from .registry import register_model

__all__ = ["LastObservation", "Naive", "SeasonalNaive", "VariableMean", "WindowMean", "last_values", "variable_means"]


def variable_means(batches: Iterable[dict[str, Tensor]], n_variables: int) -> Tensor:
    """Mean of every variable's observations (history and targets) over ``batches`` -> [V] (float64).

    A variable with no observation gets 0 (the value of nothing seen, in scaled units)."""
    total = torch.zeros(n_variables, dtype=torch.float64)
    count = torch.zeros(n_variables, dtype=torch.float64)
    for batch in batches:
        for part in ("x", "y"):
            mask = batch[f"{part}_mask"]
            var = batch[f"{part}_var"][mask].long()
            total += torch.bincount(var, weights=batch[f"{part}_value"][mask].double(), minlength=n_variables)
            count += torch.bincount(var, minlength=n_variables).double()
    return torch.where(count > 0, total / count.clamp_min(1), 0.0)


def last_values(x_time: Tensor, x_var: Tensor, x_value: Tensor, x_mask: Tensor, n_variables: int
                ) -> tuple[Tensor, Tensor]:
    """Each series' last observed value of every variable in a history batch (``IrregularTransformer.forward``'s
    ``x_*`` [B, Nx]) -> (values [B, V] float64, 0 where never observed; seen [B, V] bool)."""
    B, V = x_time.shape[0], n_variables
    key = x_var.long()
    times = torch.where(x_mask, x_time.double(), -torch.inf)                     # [B, Nx]
    last_time = torch.full((B, V), -torch.inf, dtype=torch.float64, device=x_time.device)
    last_time.scatter_reduce_(1, key, times, reduce="amax")                      # latest time per variable
    is_last = x_mask & (times == last_time.gather(1, key))                       # the observation made then
    values = torch.zeros(B, V + 1, dtype=torch.float64, device=x_time.device)    # column V: a bin for the rest
    values.scatter_(1, torch.where(is_last, key, V), torch.where(is_last, x_value.double(), 0.0))
    return values[:, :V], torch.isfinite(last_time)


@register_model("variable_mean", task="observations", trainable=False)
class VariableMean(nn.Module):
    """Forecast every query of variable v with the mean of v.

    Args:
        n_variables: V.
    """

    def __init__(self, n_variables: int, **ignored: Any) -> None:
        super().__init__()
        self.n_variables = n_variables
        self.register_buffer("mean", torch.zeros(n_variables))

    def fit_means(self, means: Tensor) -> None:
        """Set the per-variable means [V] (e.g. ``variable_means(train_loader, V)``)."""
        self.mean.copy_(means.to(self.mean))

    def fit_statistics(self, loader: Iterable[dict[str, Tensor]], **facts: Any) -> None:
        """The means of the train batches' observations."""
        self.fit_means(variable_means(loader, self.n_variables))

    def forward(self, x_time: Tensor, x_var: Tensor, x_value: Tensor, x_mask: Tensor, y_time: Tensor,
                y_var: Tensor, y_mask: Optional[Tensor] = None, static: Optional[Tensor] = None) -> Tensor:
        """As ``IrregularTransformer.forward``: [B, Ny] forecasts, 0 at padded queries (static
        covariates ignored)."""
        out = self.mean[y_var.long()].to(y_time.dtype)
        return out if y_mask is None else torch.where(y_mask, out, 0.0)


@register_model("last_observation", task="observations", trainable=False)
class LastObservation(VariableMean):
    """Forecast every query of variable v with the last value of v in the history (its mean if none).

    Args:
        n_variables: V.
    """

    def forward(self, x_time: Tensor, x_var: Tensor, x_value: Tensor, x_mask: Tensor, y_time: Tensor,
                y_var: Tensor, y_mask: Optional[Tensor] = None, static: Optional[Tensor] = None) -> Tensor:
        values, seen = last_values(x_time, x_var, x_value, x_mask, self.n_variables)
        last_value = torch.where(seen, values, self.mean.double())
        out = last_value.gather(1, y_var.long()).to(y_time.dtype)
        return out if y_mask is None else torch.where(y_mask, out, 0.0)


class _WindowBaseline(nn.Module):
    """What the window baselines share: the window contract (``channel_independent``,
    ``training_pairs``) and no training."""

    channel_independent = True

    def __init__(self, n_channels: int, lookback: int, horizon: int, **ignored: Any) -> None:
        super().__init__()
        self.n_channels, self.lookback, self.horizon = n_channels, lookback, horizon

    def fit_statistics(self, loader: Iterable[dict[str, Tensor]], **facts: Any) -> None:
        """Nothing to learn (``WindowMean`` learns its means); ``facts``: the data's (``season``)."""

    def training_pairs(self, x: Tensor, t_x: Optional[Tensor], y: Tensor,
                       index: Union[list[int], slice]) -> tuple[Tensor, Tensor]:
        return self(x, t_x)[:, :, index], y


@register_model("naive", task="window", trainable=False)
class Naive(_WindowBaseline):
    """Every one of the H future rows is the window's last row."""

    def forward(self, x: Tensor, t_x: Optional[Tensor] = None) -> Tensor:
        """x [B, L, C] -> [B, H, C]."""
        return x[:, -1:, :].expand(-1, self.horizon, -1)


@register_model("seasonal_naive", task="window", trainable=False)
class SeasonalNaive(_WindowBaseline):
    """Future row h is the window's row one season before it: ``x[L - season + (h mod season)]``.

    Args:
        season: the seasonal period in rows (<= lookback); None: the data's, set by the fit
            (``tsattn.data.windows.calendar.seasonal_period``: 24 for hourly rows, 7 for daily, ...).
    """

    def __init__(self, n_channels: int, lookback: int, horizon: int, season: Optional[int] = None,
                 **ignored: Any) -> None:
        super().__init__(n_channels, lookback, horizon)
        self.season_given = season is not None
        self.register_buffer("rows", torch.zeros(horizon, dtype=torch.long))  # kept by checkpoints
        self._set_season(24 if season is None else season)

    def _set_season(self, season: Any) -> None:
        L = self.lookback
        if isinstance(season, bool) or not isinstance(season, int) or not 1 <= season <= L:
            raise ValueError(f"`season` must be an integer in [1, lookback={L}], got {season!r}: pass "
                             "model_kwargs={'season': <rows per season>}, or a lookback of at least one season")
        self.season = season
        self.rows.copy_(L - season + torch.arange(self.horizon) % season)

    def fit_statistics(self, loader: Iterable[dict[str, Tensor]], season: Optional[int] = None, **facts: Any) -> None:
        """Take the data's seasonal period (``season``, rows) unless one was given."""
        if season is not None and not self.season_given:
            self._set_season(int(season))

    def forward(self, x: Tensor, t_x: Optional[Tensor] = None) -> Tensor:
        return x[:, self.rows, :]


@register_model("mean", task="window", trainable=False)
class WindowMean(_WindowBaseline):
    """Every future row is the channel's mean over the training windows' inputs (scaled units: about 0
    under standard scaling, the train segment's mean in units)."""

    def __init__(self, n_channels: int, lookback: int, horizon: int, **ignored: Any) -> None:
        super().__init__(n_channels, lookback, horizon)
        self.register_buffer("mean", torch.zeros(n_channels))

    def fit_statistics(self, loader: Iterable[dict[str, Tensor]], **facts: Any) -> None:
        total, count = torch.zeros(self.n_channels, dtype=torch.float64), 0
        for batch in loader:
            total += batch["x"].double().sum(dim=(0, 1))
            count += batch["x"].shape[0] * batch["x"].shape[1]
        self.mean.copy_((total / max(count, 1)).to(self.mean))

    def forward(self, x: Tensor, t_x: Optional[Tensor] = None) -> Tensor:
        return self.mean.to(x.dtype).expand(x.shape[0], self.horizon, -1)
