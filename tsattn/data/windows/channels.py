"""Which columns go in and which come out: the ``features`` modes of the benchmark protocol.

Time-Series-Library's convention (``Dataset_Custom``): the value columns are reordered to
``[other columns..., target]``, so the target is the last input channel.

- ``"M"``: every value column in, every value column out (the target, when given or ``OT``, last).
- ``"MS"``: every value column in, the target(s) out; ``target_index`` is the last position(s).
- ``"S"``: the target(s) in and out.

What ``"MS"`` gives depends on the model. PatchTST and the patch decoder are channel-independent:
they fold the channels into the batch and forecast each from its own history, and only the
target's forecast is kept. With them ``"MS"`` is a univariate forecaster of the target (in eval
mode, the other columns cannot change its forecast) that pays for every column: ``"S"`` gives the
same kind of model for a fraction of the cost. Fitting ``"MS"`` on such a model warns. Covariates
are not modelled yet.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union

from ..errors import DataError

__all__ = ["DEFAULT_TARGET", "FEATURE_MODES", "ChannelSelection", "select_channels"]

FEATURE_MODES = ("M", "S", "MS")
DEFAULT_TARGET = "OT"

TargetArg = Union[str, Sequence[str], None]


@dataclass(frozen=True)
class ChannelSelection:
    """Input and output channels, in model order.

    Attributes:
        input_names: the C_in input channel names, in the order of the input tensor's last axis.
        target_names: the C_out output channel names.
        target_index: positions of the outputs among the inputs (``input_names[target_index[k]] ==
            target_names[k]``).
        features: the mode, ``"M"``, ``"S"`` or ``"MS"``.
    """

    input_names: tuple[str, ...]
    target_names: tuple[str, ...]
    target_index: tuple[int, ...]
    features: str


def _targets(target: TargetArg) -> Optional[list[str]]:
    if target is None:
        return None
    names = [target] if isinstance(target, str) else list(target)
    if not names or not all(isinstance(t, str) for t in names):
        raise DataError(f"target must be a column name or a non-empty list of names; got {target!r}")
    if len(set(names)) != len(names):
        raise DataError(f"target lists a column twice: {names}; list each target once")
    return names


def select_channels(
    columns: Sequence[str],
    features: str = "M",
    target: TargetArg = None,
    *,
    dropped: Sequence[str] = (),
) -> ChannelSelection:
    """Pick the input and output channels among the value ``columns``.

    Args:
        columns: the numeric value column names, in file order.
        features: ``"M"``, ``"S"`` or ``"MS"`` (see the module docstring).
        target: a column name or a list of names; None uses ``"OT"`` when there is such a column
            (``"M"`` works without any target).
        dropped: text columns that were left out (for a clearer message when one is the target).
    """
    if features not in FEATURE_MODES:
        raise DataError(
            f"features must be 'M' (all in, all out), 'S' (target in, target out) or 'MS' (all in, "
            f"target out); got {features!r}"
        )
    columns = [str(c) for c in columns]
    targets = _targets(target)
    if targets is None and DEFAULT_TARGET in columns:
        targets = [DEFAULT_TARGET]
    for t in targets or []:
        if t in columns:
            continue
        if t in dropped:
            raise DataError(
                f"target {t!r} is not numeric (a text column, or one with no values); a target must be "
                f"numbers: pick one of {columns} or encode it as numbers"
            )
        raise DataError(f"target {t!r} is not a value column; pass target=<one of {columns}>")
    if targets is None:
        if features == "M":
            names = tuple(columns)
            return ChannelSelection(names, names, tuple(range(len(names))), features)
        raise DataError(
            f"features={features!r} needs a target column and the data has no {DEFAULT_TARGET!r} column; "
            f"pass target=<one of {columns}>"
        )
    inputs = tuple([c for c in columns if c not in targets] + targets)
    n_in, n_out = len(inputs), len(targets)
    if features == "M":
        return ChannelSelection(inputs, inputs, tuple(range(n_in)), features)
    if features == "MS":
        return ChannelSelection(inputs, tuple(targets), tuple(range(n_in - n_out, n_in)), features)
    return ChannelSelection(tuple(targets), tuple(targets), tuple(range(n_out)), features)
