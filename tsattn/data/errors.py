"""One exception hierarchy for the data layer: every message names the problem and the fix.

``DataError`` subclasses ``ValueError`` so callers that already catch ``ValueError`` keep working;
catch ``DataError`` to handle exactly the data layer's complaints.
"""
from __future__ import annotations

import sys
import warnings

__all__ = [
    "DataError",
    "DataFileNotFoundError",
    "UnknownDatasetError",
    "ChecksumError",
    "DownloadError",
    "DataWarning",
    "warn_data",
]


class DataError(ValueError):
    """Bad input to the data layer (file, columns, timestamps, values, protocol or window sizes)."""


class DataFileNotFoundError(DataError, FileNotFoundError):
    """A CSV file, or a registered dataset's file, is not where it was looked for."""


class UnknownDatasetError(DataError):
    """A name that is neither a registered dataset nor a path to a CSV file."""


class ChecksumError(DataError):
    """A downloaded file's sha256 differs from the registered one (nothing is kept)."""


class DownloadError(DataError):
    """A download was needed but is forbidden (``TSATTN_OFFLINE=1``) or failed."""


class DataWarning(UserWarning):
    """Data that is read, but looks suspicious or lost something (dropped columns, very long steps)."""


def warn_data(message: str) -> None:
    """Warn with a ``DataWarning`` attributed to the first caller outside tsattn (the user's line, or
    the library that called into tsattn), however deep in the data layer the warning is raised."""
    frame, level = sys._getframe(1), 2  # level 2: the caller of warn_data
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "tsattn":
        frame, level = frame.f_back, level + 1
    warnings.warn(message, DataWarning, stacklevel=level - 1 if frame is None else level)
