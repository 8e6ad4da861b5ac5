"""``Ensemble``: k nets of one model and settings, forecasting as the mean of their outputs.

``ForecastModule(ensemble=k)`` builds k members from its settings, each from its own draw of the initial
weights, and trains them side by side on the same batches: each training step sums the members' own losses
(``Task.training_loss(module, batch, net=member)``), so each member's gradient is the one it would get alone,
and validation, early stopping, checkpoints and forecasts read the ensemble's mean. Forecasting is the only
place the mean is formed: the raw outputs (a quantile model's unsorted quantiles too) are averaged, and the
task then finishes them as a single net's (the naive blend, sorting, calibration).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor, nn


class Ensemble(nn.Module):
    """The members' mean forecast. ``members``: nets of one model class with the same inputs and outputs."""

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least 2 members; got {len(members)}")
        self.members = nn.ModuleList(members)

    def forward(self, *args: Any, **kwargs: Any) -> Tensor:
        return torch.stack([member(*args, **kwargs) for member in self.members]).mean(0)

    @property
    def channel_independent(self) -> bool:
        """As each member (the window task asks, to warn about ``features="MS"``)."""
        return bool(getattr(self.members[0], "channel_independent", False))

    def fit_statistics(self, loader: Any, **facts: Any) -> None:
        """Each member's ``fit_statistics`` (those that have one: statistics of the train samples)."""
        for member in self.members:
            fit = getattr(member, "fit_statistics", None)
            if fit is not None:
                fit(loader, **facts)


def members_of(net: nn.Module) -> list[nn.Module]:
    """The nets a training step trains, each on its own loss: an ``Ensemble``'s members, else ``[net]``."""
    return list(net.members) if isinstance(net, Ensemble) else [net]


__all__ = ["Ensemble", "members_of"]
