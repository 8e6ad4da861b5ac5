"""Per-variable value scales of an observation model (``IrregularTransformer(value_norm="variable")``).

A dataset scaled once for all variables (PhysioNet's protocol: min-max over the seen stays) leaves a
variable whose range holds a few data-entry values (pH up to 734.6, WBC) with a spread of ~1e-4 in scaled
units, and one whose value barely changes within a stay (Weight) with changes much smaller than its spread
across stays. A model that reads every value through one embedding and writes every forecast through one
head then sees such a variable as a constant, and its forecasts move by steps of the head's size, not the
variable's. ``variable_scales`` measures, per variable on the fit's train samples:

- ``center``: the median of its history observations;
- ``spread``: the median absolute deviation of its history observations from that median (the mean
  absolute deviation where that is 0, 1 where both are: a constant variable, or one never observed);
- ``step``: the same spread of its changes, a target's value minus the last value of its variable in the
  sample's history (targets of variables the history showed; ``spread`` where there are none); 0 for a
  variable constant over the train samples (every history value and target the same: PhysioNet's
  MechVent), whose forecast is then its last value, or its center: what the data can tell of it.

Both deviations are robust to the data-entry values that set a min-max range. The model reads
``asinh((value - center) / spread)`` (about the standardised value near the center, its logarithm in the
tails: PhysioNet's lab values lie up to 600 spreads from their median, pH's data-entry values 14,600) and
forecasts ``last value + step * head`` (``center + spread * head`` for a variable the history never
showed): each variable's inputs and forecast steps on its own scale.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

import torch
from torch import Tensor, nn

from .baselines import last_values

VALUE_NORMS = ("none", "variable")

__all__ = ["VALUE_NORMS", "ValueScales", "value_scales", "variable_scales"]


class ValueScales(nn.Module):
    """A model's per-variable scales (buffers ``center``, ``spread``, ``step`` [V], set by ``fit``) and, with
    ``data_head``, an output on the data's scale beside the per-variable steps (started at zero)."""

    def __init__(self, n_variables: int, data_head: Optional[nn.Module] = None) -> None:
        super().__init__()
        self.register_buffer("center", torch.zeros(n_variables))
        self.register_buffer("spread", torch.ones(n_variables))
        self.register_buffer("step", torch.ones(n_variables))
        self.data_head = data_head
        if data_head is not None:
            for param in data_head.parameters():
                nn.init.zeros_(param)

    def fit(self, loader: Iterable[dict[str, Tensor]]) -> None:
        """Set the scales from a fit's train batches (``variable_scales``)."""
        for buffer, value in zip((self.center, self.spread, self.step),
                                 variable_scales(loader, self.center.numel())):
            buffer.copy_(value.to(buffer))

    def read(self, value: Tensor, var: Tensor) -> Tensor:
        """What the model reads of values ``value`` [E] of variables ``var`` [E]."""
        return torch.asinh((value - self.center[var]) / self.spread[var])

    def forecast(self, out: Tensor, features: Tensor, seen: Tensor, var: Tensor, *, residual: bool) -> Tensor:
        """The head's outputs ``out`` [Q, k] for queries of variables ``var`` [Q] -> moves on the data's scale:
        steps of the variable's ``step`` (``seen`` [Q] bool: its history showed the variable; residual), else of
        its ``spread``, plus the data head's output of ``features`` [Q, d]; around ``center`` unless residual. A
        variable constant over the train samples (``step`` 0) does not move: its last value, or its center."""
        moves = self.step[var] > 0
        spread = torch.where(moves, self.spread[var], 0.0)
        out = out * (torch.where(seen, self.step[var], spread) if residual else spread)[:, None]
        if self.data_head is not None:
            out = out + self.data_head(features) * moves[:, None]
        return out if residual else out + self.center[var][:, None]


def value_scales(value_norm: str, data_step: bool, n_variables: int,
                 make_head: Callable[[], nn.Module]) -> Optional[ValueScales]:
    """``IrregularTransformer``'s ``value_norm`` and ``data_step`` -> its ``ValueScales`` (None for "none");
    ``make_head()`` builds the data-scale output layer."""
    if value_norm not in VALUE_NORMS:
        raise ValueError(f"`value_norm` must be one of {VALUE_NORMS}, got {value_norm!r}")
    if not isinstance(data_step, bool) or (data_step and value_norm != "variable"):
        raise ValueError(f"`data_step` adds a data-scale output beside the per-variable steps of "
                         f"value_norm='variable': True or False, and True only with it (got {data_step!r})")
    if value_norm == "none":
        return None
    return ValueScales(n_variables, make_head() if data_step else None)


def _spread(values: Tensor, center: Tensor) -> Tensor:
    """The median absolute deviation of ``values`` [N] from ``center`` (the mean absolute deviation where that
    is 0; 0 when both are, or when there are no values)."""
    if values.numel() == 0:
        return values.new_zeros(())
    deviation = (values - center).abs()
    mad = deviation.median()
    return mad if mad > 0 else deviation.mean()


def variable_scales(batches: Iterable[dict[str, Tensor]], n_variables: int) -> tuple[Tensor, Tensor, Tensor]:
    """Per variable over ``batches`` (observation batches, ``IrregularTransformer.forward``'s keys): (center,
    spread, step), each [V] float64 (module docstring)."""
    values, variables, changes, changed, targets, targeted = [], [], [], [], [], []
    for batch in batches:
        x_mask, y_mask = batch["x_mask"], batch["y_mask"]
        values.append(batch["x_value"][x_mask].double())
        variables.append(batch["x_var"][x_mask].long())
        last, seen = last_values(batch["x_time"], batch["x_var"], batch["x_value"], x_mask, n_variables)
        y_var = batch["y_var"].long().clamp(0, n_variables - 1)
        has = y_mask & seen.gather(1, y_var)
        changes.append((batch["y_value"].double() - last.gather(1, y_var))[has])
        changed.append(y_var[has])
        targets.append(batch["y_value"][y_mask].double())
        targeted.append(y_var[y_mask])
    value, var = torch.cat(values), torch.cat(variables)
    change, change_var = torch.cat(changes), torch.cat(changed)
    target, target_var = torch.cat(targets), torch.cat(targeted)
    center = torch.zeros(n_variables, dtype=torch.float64)
    spread = torch.ones(n_variables, dtype=torch.float64)
    step = torch.ones(n_variables, dtype=torch.float64)
    for v in range(n_variables):
        own = value[var == v]
        if own.numel():
            center[v] = own.median()
            spread[v] = _spread(own, center[v])
        if spread[v] <= 0:
            spread[v] = 1.0
        own_change = change[change_var == v]
        step[v] = _spread(own_change, own_change.new_zeros(())) if own_change.numel() else spread[v]
        if step[v] <= 0:
            step[v] = spread[v]
        every = torch.cat([own, target[target_var == v]])
        if own.numel() and bool((every == every[0]).all()):    # constant over the train samples
            step[v] = 0.0
    return center, spread, step
