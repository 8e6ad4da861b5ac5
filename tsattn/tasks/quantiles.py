"""Quantile forecasts: the output kind a task adds with ``quantiles=[...]`` (a head and a loss).

A model built with ``n_quantiles=Q`` gives Q values per forecast point; the tasks sort them (so they
never cross), train them and read intervals off pairs ``(q, 1 - q)``:

- the **centre** (0.5, always among the quantiles) is the point forecast, named as a point forecast
  is (the channel or value column) and trained with the model's ``loss`` as a point model is
  (``"mse"``, the default: the mean, as good a point forecast as the MSE model's; ``"pinball"``: the
  median); the other quantiles are trained with the pinball loss, on their raw (unsorted) values
  and on features detached from the layers below (``models.patchtst.QuantileHead``), so that their
  loss trains their own output weights only and the point forecast is trained as a point model's;
- each pair ``(q, 1 - q)`` is a central interval of level ``100 (1 - 2 q)`` %: columns
  ``<name>-lo-<level>`` and ``<name>-hi-<level>`` (neuralforecast's convention, e.g. ``OT-lo-80``);
- a quantile without its partner is a column ``<name>-q<q>`` (e.g. ``OT-q0.7``).

``levels=[80, 95]`` is the same thing said as intervals: quantiles 0.1, 0.9, 0.025, 0.975 and the
median. Give one vocabulary or the other, not both.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

from ..metrics import pinball_loss  # noqa: F401  (defined beside the metrics, which use it too)

__all__ = ["QuantileSpec", "pinball_loss", "quantiles_from"]


@dataclass(frozen=True)
class QuantileSpec:
    """The quantiles of a model (sorted, the median among them) and how they read as intervals.

    Attributes:
        quantiles: the Q quantile levels, increasing, in (0, 1), 0.5 among them.
        median: the median's position among them.
        pairs: ``(level, lo, hi)`` for each central interval: its level in percent and the positions
            of its lower and upper quantile; from the widest to the narrowest.
        singles: positions of quantiles other than the median without a partner.
    """

    quantiles: tuple[float, ...]
    median: int
    pairs: tuple[tuple[float, int, int], ...]
    singles: tuple[int, ...]

    @classmethod
    def of(cls, quantiles: Sequence[float]) -> "QuantileSpec":
        qs = tuple(float(q) for q in quantiles)
        median = qs.index(0.5)
        pairs, used = [], {median}
        for i, q in enumerate(qs):
            partner = next((j for j, p in enumerate(qs) if j > i and math.isclose(p, 1.0 - q, abs_tol=1e-9)), None)
            if q < 0.5 and partner is not None:
                pairs.append((round(100.0 * (qs[partner] - q), 9), i, partner))
                used.update((i, partner))
        return cls(qs, median, tuple(pairs), tuple(i for i in range(len(qs)) if i not in used))

    def __len__(self) -> int:
        return len(self.quantiles)

    def suffixes(self) -> list[tuple[str, int]]:
        """``(column suffix, quantile position)``: the median first (``""``), then each interval's
        ``-lo-<level>`` / ``-hi-<level>``, then single quantiles ``-q<q>``."""
        out = [("", self.median)]
        for level, lo, hi in self.pairs:
            out += [(f"-lo-{level:g}", lo), (f"-hi-{level:g}", hi)]
        return out + [(f"-q{self.quantiles[i]:g}", i) for i in self.singles]

    def columns(self, name: str) -> list[tuple[str, int]]:
        """``(column name, quantile position)`` of ``name``'s forecast (``name`` itself: the median)."""
        return [(name + suffix, i) for suffix, i in self.suffixes()]


def quantiles_from(quantiles: Optional[Sequence[float]], levels: Optional[Sequence[float]]) -> Optional[list[float]]:
    """The quantile levels a model trains: ``quantiles`` or the ones ``levels`` (central intervals in
    percent) name, sorted, with the median added; None when neither is given.

    Raises:
        ValueError: both given; a quantile outside (0, 1), repeated or unsorted; a level outside (0, 100).
    """
    if quantiles is not None and levels is not None:
        raise ValueError("give quantiles=[...] or levels=[...] (intervals in percent), not both: levels=[80] is "
                         "quantiles=[0.1, 0.5, 0.9]")
    if levels is not None:
        values = _numbers("levels", levels)
        bad = [v for v in values if not 0 < v < 100]
        if bad:
            raise ValueError(f"levels are central intervals in percent, each in (0, 100); got {bad}: pass e.g. levels=[80, 95]")
        if len(set(values)) != len(values):
            raise ValueError(f"levels repeat: {values}; give each interval once")
        quantiles = [0.5] + [q for v in values for q in (0.5 - v / 200.0, 0.5 + v / 200.0)]
        return sorted(round(q, 12) for q in quantiles)
    if quantiles is None:
        return None
    values = _numbers("quantiles", quantiles)
    bad = [q for q in values if not 0 < q < 1]
    if bad:
        raise ValueError(f"quantiles are levels in (0, 1); got {bad}: pass e.g. quantiles=[0.1, 0.5, 0.9] (or levels=[80])")
    if any(b <= a for a, b in zip(values, values[1:])):
        raise ValueError(f"quantiles must be increasing, each given once; got {values}: pass them sorted, e.g. "
                         f"{sorted(set(values))}")
    return sorted(set(values) | {0.5})


def _numbers(name: str, values: Sequence[float]) -> list[float]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise ValueError(f"{name} must be a non-empty list of numbers; got {values!r}")
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a non-empty list of numbers; got {values!r}") from None
