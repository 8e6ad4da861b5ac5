"""One exception hierarchy for the data layer: every message names the problem and the fix.

``DataError`` subclasses ``ValueError`` so callers that already catch ``ValueError`` keep working;
catch ``DataError`` to handle exactly the data layer's complaints.
"""
from __future__ import annotations

__all__ = [
    "DataError",
    "DataFileNotFoundError",
    "UnknownDatasetError",
    "ChecksumError",
    "DownloadError",
    "DataWarning",
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
