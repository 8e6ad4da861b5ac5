"""Readers of registered observation formats, by name: a new irregular dataset is one reader + one entry.

A reader turns a registered dataset's local files into an ``ObservationSet``::

    @register_reader("my-format")
    def read_my_format(paths: Sequence[Path], *, max_series: Optional[int] = None, **options) -> ObservationSet:
        ...

``registry.DatasetSpec(format="my-format", ...)`` then names it, and
``ObservationDataModule("<dataset name>", reader_options={...})`` (or ``Forecaster.fit``) reads the
dataset through it; ``reader_options`` are the reader's own keyword arguments. The built-in
``"csv"`` format reads a dataset's CSV table with ``read_observations`` (wide layout unless the
table options say otherwise).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..errors import DataError
from ..observations.observation_set import ObservationSet
from .observation_table import read_observations

__all__ = ["ObservationReader", "get_reader", "reader_names", "register_reader", "unregister_reader"]

ObservationReader = Callable[..., ObservationSet]
_READERS: dict[str, ObservationReader] = {}


def register_reader(format: str) -> Callable[[ObservationReader], ObservationReader]:
    """Register ``reader(paths, *, max_series=None, **options) -> ObservationSet`` as the reader of ``format``."""
    def register(reader: ObservationReader) -> ObservationReader:
        if format in _READERS and _READERS[format] is not reader:
            raise ValueError(f"a reader of the format {format!r} is registered already ({_READERS[format].__name__})")
        _READERS[format] = reader
        return reader

    return register


def unregister_reader(format: str) -> None:
    """Remove the reader of ``format`` (e.g. one a test registered)."""
    _READERS.pop(format, None)


def reader_names() -> list[str]:
    """The registered formats."""
    return sorted(_READERS)


def get_reader(format: str) -> ObservationReader:
    """The reader registered for ``format``; a ``DataError`` naming the known formats otherwise."""
    try:
        return _READERS[format]
    except KeyError:
        raise DataError(
            f"no reader is registered for the format {format!r} (known: {reader_names()}); register one with "
            "tsattn.data.io.readers.register_reader"
        ) from None


@register_reader("csv")
def read_csv_observations(paths: Sequence[Path], *, max_series: Optional[int] = None, **options: Any) -> ObservationSet:
    """The built-in ``"csv"`` format: the dataset's one CSV table, read by ``read_observations`` with
    ``options`` (the table options: id / time / variable / value columns, ...)."""
    observations = read_observations(paths[0], **options)
    if max_series is not None and len(observations) > max_series:
        observations = observations.subset(np.arange(max_series))
    return observations
