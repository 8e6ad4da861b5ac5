"""Shared fixtures for the data-layer tests: isolated cache / offline mode, tiny CSV writers, real data.

Real benchmark files come from TSATTN_DATA_DIR (tests/conftest.py points it at ../shared/data when
unset); tests that need one skip when it is absent. They are read once per test session (per
xdist worker) through the session-scoped DataModule fixtures below.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Union

import numpy as np
import pandas as pd
import pytest

from tsattn.data import CSVDataModule, registry

_SHARED = os.environ.get("TSATTN_DATA_DIR")


def _real_file(name: str) -> Path:
    if not _SHARED or not (Path(_SHARED) / name).is_file():
        pytest.skip(f"{name} not found under TSATTN_DATA_DIR={_SHARED!r}")
    return Path(_SHARED) / name


def _hourly_frame(n: int = 200, columns=("a", "b", "OT"), start="2021-01-01", seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(np.cumsum(rng.normal(size=(n, len(columns))), axis=0), columns=list(columns))
    frame.insert(0, "date", pd.date_range(start, periods=n, freq="h").strftime("%Y-%m-%d %H:%M:%S"))
    return frame


@pytest.fixture(autouse=True)
def _isolated_registry_env(tmp_path_factory, monkeypatch):
    """No test downloads by accident or writes to the user's cache."""
    monkeypatch.setenv("TSATTN_OFFLINE", "1")
    monkeypatch.setenv("TSATTN_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def real_file():
    """real_file('ETTh1.csv') -> the path under TSATTN_DATA_DIR, or skip the test."""
    return _real_file


@pytest.fixture
def hourly_frame():
    """hourly_frame(n, columns) -> a regular hourly DataFrame with a `date` column (random walks)."""
    return _hourly_frame


@pytest.fixture
def make_csv(tmp_path):
    """make_csv(text_or_frame, name='series.csv') -> path of a CSV written in tmp_path."""

    def write(content: Union[str, pd.DataFrame], name: str = "series.csv") -> Path:
        path = tmp_path / name
        if isinstance(content, pd.DataFrame):
            content.to_csv(path, index=False)
        else:
            path.write_text(content)
        return path

    return write


@pytest.fixture(scope="session")
def etth1():
    """ETTh1, features M, L = 336, H = 96, set up."""
    _real_file("ETTh1.csv")
    dm = CSVDataModule("ETTh1", 336, 96, batch_size=64)
    dm.setup()
    return dm


@pytest.fixture(scope="session")
def weather():
    """weather (the published reading), features M, L = 336, H = 96, set up."""
    _real_file("weather.csv")
    dm = CSVDataModule("weather", 336, 96)
    dm.setup()
    return dm


@pytest.fixture(scope="session")
def metro_path():
    return _real_file("extra/Metro_Interstate_Traffic_Volume.csv")


@pytest.fixture
def toy_spec():
    """toy_spec(**overrides) -> a DatasetSpec named 'toy' (3 value columns, ratio split)."""

    def make(name: str = "toy", *, url: str = "file:///nonexistent/toy.csv", sha256=None, split: str = "ratio",
             **overrides) -> registry.DatasetSpec:
        fields = dict(
            name=name, kind="series", files=(registry.RemoteFile(f"{name}.csv", url, sha256, sha256),),
            protocol={"split": split}, read_options={"duplicates": "keep", "knot_times": "index"}, freq="h",
            target="OT", n_channels=3, n_rows=200, subdir="toydir",
        )
        fields.update(overrides)
        return registry.DatasetSpec(**fields)

    return make


def _listing(folder):
    return sorted((p.relative_to(folder), p.stat().st_size) for p in folder.rglob("*"))


@pytest.fixture
def raises(tmp_path):
    """raises(exc_type, *phrases, fn) runs fn, checks that it raises exc_type with every phrase in its
    message and that tmp_path is unchanged (bad input destroys nothing); returns the message."""

    def check(exc_type, *phrases_and_fn):
        *phrases, fn = phrases_and_fn
        before = _listing(tmp_path)
        with pytest.raises(exc_type) as info:
            fn()
        message = str(info.value)
        for phrase in phrases:
            assert phrase in message, f"{phrase!r} not in {message!r}"
        assert _listing(tmp_path) == before, "an error left files behind"
        return message

    return check
