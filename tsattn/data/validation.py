"""Validators and constants shared by the data layer (and the estimator): one place for each rule.

Every check raises ``DataError`` with a message that names the problem and the fix.
"""
from __future__ import annotations

import datetime
import difflib
import math
import numbers
from typing import Any, Iterable, Optional, Sequence

import numpy as np
import pandas as pd

from .errors import DataError

__all__ = [
    "SHOW",
    "SPLITS",
    "check_choice",
    "check_non_negative_int",
    "check_optional_choice",
    "check_positive_int",
    "check_span",
    "check_time_unit",
    "did_you_mean",
]

SPLITS = ("train", "val", "test")
SHOW = 3  # how many offending items a message lists


def check_positive_int(name: str, value: Any) -> int:
    """``value`` as a Python int >= 1: ints and NumPy integers pass; bools, floats and strings do not."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise DataError(
            f"{name} must be a positive integer; got {value!r} of type {type(value).__name__}: "
            f"pass an int such as {name}=96"
        )
    if value <= 0:
        raise DataError(f"{name} must be a positive integer (>= 1); got {value}: pass e.g. {name}=96")
    return int(value)


def check_non_negative_int(name: str, value: Any) -> int:
    """``value`` as a Python int >= 0 (e.g. ``num_workers``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 0:
        raise DataError(f"{name} must be an integer >= 0; got {value!r}")
    return int(value)


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """Raise unless ``value`` is one of ``choices``."""
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise DataError(f"`{name}` must be one of {options}; got {value!r}")
    return value


def check_optional_choice(name: str, value: Any, choices: Sequence[str]) -> Optional[str]:
    """``check_choice`` for an option that may be None (None: a default decided elsewhere)."""
    return None if value is None else check_choice(name, value, choices)


def check_span(name: str, value: Any) -> Optional[float]:
    """A time span of the observation task: None, or a finite number > 0 (in the data's time units)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise DataError(
            f"{name} must be a finite number > 0 in the data's time units (or None); got {value!r}: "
            f"pass e.g. {name}=24.0"
        )
    return float(value)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``known`` to ``name``, or ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_time_unit(unit: Any) -> pd.Timedelta:
    """``"h"`` / ``"15min"`` / ``"1D"`` / a ``pd.Timedelta`` -> a positive ``pd.Timedelta``."""
    delta: Optional[pd.Timedelta] = None
    if isinstance(unit, (pd.Timedelta, datetime.timedelta, np.timedelta64)):
        delta = pd.Timedelta(unit)
    elif isinstance(unit, str):
        for parse in (lambda u: pd.Timedelta(1, unit=u), pd.Timedelta):
            try:
                delta = parse(unit)
                break
            except (ValueError, TypeError):
                continue
    if delta is None or pd.isna(delta) or delta <= pd.Timedelta(0):
        raise DataError(
            f"time_unit must be a positive duration such as 'h', 'min', '15min' or 'D'; got {unit!r}"
        )
    return delta
