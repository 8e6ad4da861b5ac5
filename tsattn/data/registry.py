"""Registry of the long-horizon forecasting benchmarks: file, URL, sha256, protocol, defaults.

Where a registered file is looked for, in order:

1. the folder named by ``TSATTN_DATA_DIR`` (the file directly inside it, or inside the
   Time-Series-Library sub-folder, e.g. ``ETT-small/ETTh1.csv``, ``weather/weather.csv``);
2. the user cache, ``TSATTN_CACHE_DIR`` or else ``$XDG_CACHE_HOME/tsattn`` or ``~/.cache/tsattn``;
3. a download into the cache (only from ``fetch`` / ``resolve(download=True)`` / the DataModule's
   ``prepare_data``), streamed to a temporary file beside the target, checked against the
   registered sha256, then renamed into place; on any failure the temporary file is removed.
   ``TSATTN_OFFLINE=1`` forbids downloads.

A local file whose sha256 differs from the registered one is used with a warning (it may be the
same data with other line endings); a downloaded file that differs is deleted and an error raised.

Command line: ``python -m tsattn.data list | where NAME... | fetch NAME...``.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

from .errors import ChecksumError, DataFileNotFoundError, DownloadError, UnknownDatasetError

__all__ = [
    "REGISTRY",
    "DatasetSpec",
    "cache_dir",
    "data_dir",
    "download",
    "fetch",
    "find_local",
    "get_spec",
    "is_registered",
    "list_datasets",
    "offline",
    "resolve",
    "sha256_of",
]

_TSLIB_HF = "https://huggingface.co/datasets/thuml/Time-Series-Library/resolve/main"
_ETT_RAW = "https://raw.githubusercontent.com/zhouhaoyi/ETDataset/main/ETT-small"

# How Time-Series-Library reads a benchmark file: every row kept (repeated timestamps too), rows one
# step apart, values as written (weather's -9999 sentinel stays a number). See datasets/README.md.
_BENCHMARK_READ = {"duplicates": "keep", "knot_times": "index"}


@dataclass(frozen=True)
class DatasetSpec:
    """One registered dataset.

    Attributes:
        name: the registry name (``"ETTh1"``).
        filename: the CSV file name (``"ETTh1.csv"``).
        url: the canonical direct download.
        sha256: the file's sha256, or None where it is not known (the download is then unchecked).
        split: the protocol, ``"ett-hour"``, ``"ett-minute"`` or ``"ratio"``.
        freq: the sampling frequency (pandas alias).
        target: the default target column.
        n_channels: numeric value columns (every column but the time column).
        n_rows: data rows, for reference.
        subdir: the file's folder in Time-Series-Library's ``dataset/`` layout.
        read_options: keyword arguments for ``read_series`` (the published reading of the file).
        notes: quirks worth knowing.
    """

    name: str
    filename: str
    url: str
    sha256: Optional[str]
    split: str
    freq: str
    target: str
    n_channels: int
    n_rows: int
    subdir: str
    read_options: Mapping[str, Any] = field(default_factory=lambda: dict(_BENCHMARK_READ))
    notes: str = ""


def _ett(name: str, sha256: str, split: str, freq: str, n_rows: int) -> DatasetSpec:
    return DatasetSpec(
        name=name, filename=f"{name}.csv", url=f"{_ETT_RAW}/{name}.csv", sha256=sha256, split=split, freq=freq,
        target="OT", n_channels=7, n_rows=n_rows, subdir="ETT-small",
        notes="Electricity Transformer Temperature; data ends 2018-06-26; regular, no gaps or NaN.",
    )


REGISTRY: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        _ett("ETTh1", "f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066", "ett-hour", "h", 17420),
        _ett("ETTh2", "a3dc2c597b9218c7ce1cd55eb77b283fd459a1d09d753063f944967dd6b9218b", "ett-hour", "h", 17420),
        _ett("ETTm1", "6ce1759b1a18e3328421d5d75fadcb316c449fcd7cec32820c8dafda71986c9e", "ett-minute", "15min", 69680),
        _ett("ETTm2", "db973ca252c6410a30d0469b13d696cf919648d0f3fd588c60f03fdbdbadd1fd", "ett-minute", "15min", 69680),
        DatasetSpec(
            name="weather", filename="weather.csv", url=f"{_TSLIB_HF}/weather/weather.csv",
            sha256="34ee981d07313e51da2a50bb600072c8ae4a69cb4b0651f4cb93a069d7a2ba63", split="ratio",
            freq="10min", target="OT", n_channels=21, n_rows=52696, subdir="weather",
            notes=(
                "Jena 2020; -9999 marks missing readings (50 in OT, 30 in max. PAR, 1 in wv); one "
                "repeated timestamp (2020-05-12 06:00) and one 100-minute gap. Read as published: "
                "-9999 kept as a number, the repeated row kept."
            ),
        ),
        DatasetSpec(
            name="electricity", filename="electricity.csv", url=f"{_TSLIB_HF}/electricity/electricity.csv",
            sha256=None, split="ratio", freq="h", target="OT", n_channels=321, n_rows=26304, subdir="electricity",
            notes="ECL: hourly load of 321 clients.",
        ),
        DatasetSpec(
            name="traffic", filename="traffic.csv", url=f"{_TSLIB_HF}/traffic/traffic.csv",
            sha256=None, split="ratio", freq="h", target="OT", n_channels=862, n_rows=17544, subdir="traffic",
            notes="Hourly road occupancy of 862 sensors.",
        ),
        DatasetSpec(
            name="exchange_rate", filename="exchange_rate.csv", url=f"{_TSLIB_HF}/exchange_rate/exchange_rate.csv",
            sha256=None, split="ratio", freq="D", target="OT", n_channels=8, n_rows=7588, subdir="exchange_rate",
            notes="Daily exchange rates of 8 countries.",
        ),
        DatasetSpec(
            name="national_illness", filename="national_illness.csv",
            url=f"{_TSLIB_HF}/illness/national_illness.csv", sha256=None, split="ratio", freq="7D", target="OT",
            n_channels=7, n_rows=966, subdir="illness",
            notes="Weekly influenza-like illness counts (ILI); short: use the short ILI lookbacks.",
        ),
    )
}
_ALIASES = {"ecl": "electricity", "ili": "national_illness", "illness": "national_illness", "exchange": "exchange_rate"}


def list_datasets() -> list[str]:
    """The registered names."""
    return list(REGISTRY)


def _lookup(name: str) -> Optional[DatasetSpec]:
    if name in REGISTRY:
        return REGISTRY[name]
    lowered = name.strip().lower()
    for key, spec in REGISTRY.items():
        if key.lower() == lowered:
            return spec
    alias = _ALIASES.get(lowered)
    return REGISTRY.get(alias) if alias else None


def is_registered(name: str) -> bool:
    """Whether ``name`` (case-insensitive, or an alias like ``ECL``) is a registered dataset."""
    return isinstance(name, str) and _lookup(name) is not None


SpecLike = Union[str, DatasetSpec]


def get_spec(name: SpecLike) -> DatasetSpec:
    """The ``DatasetSpec`` of ``name`` (a spec passes through)."""
    if isinstance(name, DatasetSpec):
        return name
    spec = _lookup(name) if isinstance(name, str) else None
    if spec is None:
        raise UnknownDatasetError(
            f"unknown dataset {name!r}: registered names are {list_datasets()}; pass one of them, or a path "
            "to a CSV file (ending in .csv)"
        )
    return spec


def _truthy(value: Optional[str]) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def offline() -> bool:
    """Whether downloads are forbidden (``TSATTN_OFFLINE=1``)."""
    return _truthy(os.environ.get("TSATTN_OFFLINE"))


def data_dir() -> Optional[Path]:
    """The folder named by ``TSATTN_DATA_DIR``, or None when unset."""
    value = os.environ.get("TSATTN_DATA_DIR")
    return Path(value).expanduser() if value else None


def cache_dir() -> Path:
    """The user cache: ``TSATTN_CACHE_DIR``, else ``$XDG_CACHE_HOME/tsattn``, else ``~/.cache/tsattn``
    (``tsattn.user_cache.cache_dir``, shared with the op's CPU kernel build)."""
    from ..user_cache import cache_dir as user_cache_dir

    return user_cache_dir()


def _candidates(spec: DatasetSpec) -> list[Path]:
    paths = []
    folder = data_dir()
    if folder is not None:
        paths += [folder / spec.filename, folder / spec.subdir / spec.filename]
    paths.append(cache_dir() / spec.filename)
    return paths


def find_local(name: SpecLike) -> Optional[Path]:
    """The first existing local copy of ``name``'s file (``TSATTN_DATA_DIR``, then the cache), or None."""
    spec = get_spec(name)
    for path in _candidates(spec):
        if path.is_file():
            return path
    return None


_SHA_MEMO: dict[tuple[str, int, int], str] = {}


def sha256_of(path: Union[str, os.PathLike]) -> str:
    """The sha256 hex digest of a file (remembered per path, size and modification time)."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHA_MEMO:
        digest = hashlib.sha256()
        with path.open("rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
        _SHA_MEMO[key] = digest.hexdigest()
    return _SHA_MEMO[key]


def _where_message(spec: DatasetSpec) -> str:
    folder = data_dir()
    place = f"the folder TSATTN_DATA_DIR={str(folder)!r}" if folder else "a folder named by TSATTN_DATA_DIR (unset)"
    return (
        f"put {spec.filename} (from {spec.url}) in {place} or in the cache folder {str(cache_dir())!r}"
    )


def download(
    url: str,
    dest: Union[str, os.PathLike],
    sha256: Optional[str] = None,
    *,
    timeout: float = 60.0,
    opener: Callable[..., Any] = urllib.request.urlopen,
) -> Path:
    """Download ``url`` to ``dest`` atomically: stream into a temporary file in ``dest``'s folder,
    check ``sha256`` (when given), then rename. On any failure nothing is left behind.

    Raises:
        ChecksumError: the bytes' sha256 differs from ``sha256``.
        DownloadError: the download failed.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            try:
                with opener(url, timeout=timeout) as response:
                    for chunk in iter(lambda: response.read(1 << 20), b""):
                        out.write(chunk)
                        digest.update(chunk)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise DownloadError(
                    f"download of {url} failed ({exc}); check the network, or download the file yourself "
                    f"and put it at {str(dest)!r}"
                ) from None
        actual = digest.hexdigest()
        if sha256 is not None and actual != sha256.lower():
            raise ChecksumError(
                f"checksum mismatch for {url}: sha256 {actual}, expected {sha256}; the file was not kept. "
                "The server may hold a different version: get the registered file (see datasets/README.md), "
                "or pass the CSV path directly to use another version"
            )
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


def resolve(name: SpecLike, *, download_missing: bool = False) -> Path:
    """The local path of a registered dataset's file, downloading it only if ``download_missing``.

    Raises:
        DataFileNotFoundError: absent locally and ``download_missing`` is False.
        DownloadError: absent, and downloads are off (``TSATTN_OFFLINE=1``) or failed.
        ChecksumError: the download's sha256 differs from the registered one.
    """
    spec = get_spec(name)
    path = find_local(spec)
    if path is not None:
        if spec.sha256 is not None:
            actual = sha256_of(path)
            if actual != spec.sha256:
                warnings.warn(
                    f"{path} has sha256 {actual}, not the registered {spec.sha256} of {spec.name}; results "
                    f"may differ from the published protocol's. Replace it with the file from {spec.url} to "
                    "silence this",
                    UserWarning,
                    stacklevel=2,
                )
        return path
    if not download_missing:
        raise DataFileNotFoundError(
            f"dataset {spec.name!r} is not available locally; {_where_message(spec)}, or fetch it with "
            f"`python -m tsattn.data fetch {spec.name}` (the DataModule's prepare_data() does the same)"
        )
    if offline():
        raise DownloadError(
            f"dataset {spec.name!r} is not available locally and downloads are off (TSATTN_OFFLINE=1); "
            f"{_where_message(spec)}, or unset TSATTN_OFFLINE"
        )
    try:
        dest = download(spec.url, cache_dir() / spec.filename, spec.sha256)
    except DownloadError as exc:  # offline machines: say where a copied file would be found
        raise DownloadError(f"{exc}; or {_where_message(spec)}") from None
    if spec.sha256 is None:
        warnings.warn(
            f"{spec.name}: no sha256 is registered, so the download from {spec.url} was not verified; its "
            f"sha256 is {sha256_of(dest)}",
            UserWarning,
            stacklevel=2,
        )
    return dest


def fetch(name: SpecLike) -> Path:
    """Make ``name``'s file available locally (download into the cache when absent); its path."""
    return resolve(name, download_missing=True)
