"""Registry of the datasets tsattn knows by name: files, URLs, sha256, format, protocol, defaults.

One ``DatasetSpec`` per dataset, of either kind: ``"series"`` (a regular CSV table, e.g. ``ETTh1``,
read by ``read_series`` on the window task, or as a wide observation table) or ``"observations"``
(irregular observations, e.g. ``physionet2012``, read by the reader registered for its ``format``,
see ``tsattn.data.io.readers``). A dataset has one or more files; one path finds them:

1. the folder named by ``TSATTN_DATA_DIR`` (the file directly inside it, or inside the dataset's
   ``subdir``, e.g. ``ETT-small/ETTh1.csv``, ``physionet2012/set-a.tar.gz``);
2. the user cache, ``TSATTN_CACHE_DIR`` or else ``$XDG_CACHE_HOME/tsattn`` or ``~/.cache/tsattn``
   (in ``cache_subdir`` when the spec names one);
3. a download into the cache (only from ``fetch`` / ``resolve(download_missing=True)`` / a data
   module's ``prepare_data``), atomic and checked against the registered sha256
   (``tsattn.data.files.download``). ``TSATTN_OFFLINE=1`` forbids downloads.

A local file whose sha256 differs from the registered one is used with a warning (it may be the
same data with other line endings, or an archive re-packed); a downloaded file that differs is
deleted and an error raised.

Command line: ``python -m tsattn.data list | where NAME... | fetch NAME...``. A new dataset is one
``register(DatasetSpec(...))`` (and, for a new observation format, one reader).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from .errors import DataFileNotFoundError, DownloadError, UnknownDatasetError
from .files import cache_dir, data_dir, download, offline, sha256_of
from .io.physionet import PHYSIONET2012_VARIABLES

__all__ = [
    "DATASET_KINDS",
    "REGISTRY",
    "DatasetSpec",
    "RemoteFile",
    "fetch",
    "find_local",
    "get_spec",
    "is_registered",
    "list_datasets",
    "register",
    "resolve",
    "unregister",
]

DATASET_KINDS = ("series", "observations")
_TSLIB_HF = "https://huggingface.co/datasets/thuml/Time-Series-Library/resolve/main"
_ETT_RAW = "https://raw.githubusercontent.com/zhouhaoyi/ETDataset/main/ETT-small"
_PHYSIONET_FILES = "https://physionet.org/files/challenge-2012/1.0.0"

# How Time-Series-Library reads a benchmark file: every row kept (repeated timestamps too), rows one
# step apart, values as written (weather's -9999 sentinel stays a number). See datasets/README.md.
_BENCHMARK_READ = {"duplicates": "keep", "knot_times": "index"}


@dataclass(frozen=True)
class RemoteFile:
    """One file of a registered dataset.

    Attributes:
        filename: the file name (``"ETTh1.csv"``, ``"set-a.tar.gz"``).
        url: the canonical direct download.
        sha256: the registered copy's sha256 (a local file with it is the registered one), or None.
        download_sha256: the sha256 of the bytes ``url`` serves, which a download is checked against;
            None where unknown (the download is then unverified and a warning prints its sha256).
    """

    filename: str
    url: str
    sha256: Optional[str]
    download_sha256: Optional[str]


@dataclass(frozen=True)
class DatasetSpec:
    """One registered dataset.

    Attributes:
        name: the registry name (``"ETTh1"``, ``"physionet2012"``); looked up case-insensitively.
        kind: ``"series"`` (a regular CSV table) or ``"observations"`` (irregular observations).
        files: the files, in reading order.
        format: the reader: ``"csv"`` (a CSV table) or a registered observation format
            (``"physionet2012"``).
        subdir: the files' folder under ``TSATTN_DATA_DIR`` (optional there; Time-Series-Library's
            ``dataset/`` layout for the series).
        cache_subdir: the files' folder in the cache (None: the cache folder itself).
        protocol: the published protocol, as data-module arguments: ``{"split": "ett-hour"}`` for a
            series; origins, spans, split and scaling for observations.
        read_options: how the published protocol reads the files (series: ``read_series`` options).
        freq, target, n_channels, n_rows: facts of a series (its frequency, default target column,
            numeric columns, rows).
        n_series, variables: facts of an observation dataset (a check of a parse, the variables in
            its order).
        aliases: other names it is found by (``"ecl"``).
        homepage, notes: where it is described, quirks worth knowing.
    """

    name: str
    kind: str
    files: tuple[RemoteFile, ...]
    format: str = "csv"
    subdir: str = ""
    cache_subdir: Optional[str] = None
    protocol: Mapping[str, Any] = field(default_factory=dict)
    read_options: Mapping[str, Any] = field(default_factory=dict)
    freq: Optional[str] = None
    target: Optional[str] = None
    n_channels: Optional[int] = None
    n_rows: Optional[int] = None
    n_series: Optional[int] = None
    variables: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    homepage: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        if self.kind not in DATASET_KINDS:
            raise ValueError(f"kind must be one of {DATASET_KINDS}; got {self.kind!r}")
        if not self.files:
            raise ValueError(f"dataset {self.name!r} names no files")

    @property
    def split(self) -> Optional[str]:
        """A series' split protocol (``"ett-hour"``, ``"ett-minute"``, ``"ratio"``)."""
        return self.protocol.get("split")

    @property
    def n_variables(self) -> int:
        return len(self.variables)


def _series(name: str, filename: str, url: str, sha256: Optional[str], split: str, freq: str, n_channels: int,
            n_rows: int, subdir: str, notes: str, aliases: tuple[str, ...] = ()) -> DatasetSpec:
    return DatasetSpec(
        name=name, kind="series", files=(RemoteFile(filename, url, sha256, sha256),), subdir=subdir,
        protocol={"split": split}, read_options=dict(_BENCHMARK_READ), freq=freq, target="OT", n_channels=n_channels,
        n_rows=n_rows, aliases=aliases, notes=notes,
    )


def _ett(name: str, sha256: str, split: str, freq: str, n_rows: int) -> DatasetSpec:
    return _series(name, f"{name}.csv", f"{_ETT_RAW}/{name}.csv", sha256, split, freq, 7, n_rows, "ETT-small",
                   "Electricity Transformer Temperature; data ends 2018-06-26; regular, no gaps or NaN.")


_PHYSIONET = DatasetSpec(
    name="physionet2012",
    kind="observations",
    files=tuple(
        RemoteFile(f"set-{part}.tar.gz", f"{_PHYSIONET_FILES}/set-{part}.tar.gz", sha256, None)
        for part, sha256 in (
            ("a", "abcd119bae0f9f98d5e63b7bce5b2d37c64328e7c1acacab3836d17787d841df"),
            ("b", "668734f4ddf290edde891057c29349a04af51090b308fd5f352d0eabeb89a975"),
            ("c", "07738d739607c88bcb6c85a28a54963c8a8beaef864fbe40511c5411f07f3f2d"),
        )
    ),
    format="physionet2012",
    subdir="physionet2012",
    cache_subdir="physionet2012",
    protocol={
        "origins": (24.0,),
        "lookback": None,
        "horizon": None,
        "split": "series",
        "split_fractions": (0.6, 0.2, 0.2),
        "split_seed": 42,
        "scaler": "minmax",
        "scale_from": "seen",
    },
    n_series=12000,
    variables=PHYSIONET2012_VARIABLES,
    aliases=("physionet", "physionet-2012", "challenge-2012"),
    homepage="https://physionet.org/content/challenge-2012/1.0.0/",
    notes=(
        "PhysioNet/CinC Challenge 2012: 12,000 ICU stays (sets a, b, c), 41 variables each at its own "
        "times over 48 h. The registered sha256 are those of archives re-packed from the extracted "
        "files; PhysioNet's own archives hold the same files with other bytes (a download is not "
        "verified by sha256; the parse checks the record count)."
    ),
)

REGISTRY: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        _ett("ETTh1", "f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066", "ett-hour", "h", 17420),
        _ett("ETTh2", "a3dc2c597b9218c7ce1cd55eb77b283fd459a1d09d753063f944967dd6b9218b", "ett-hour", "h", 17420),
        _ett("ETTm1", "6ce1759b1a18e3328421d5d75fadcb316c449fcd7cec32820c8dafda71986c9e", "ett-minute", "15min", 69680),
        _ett("ETTm2", "db973ca252c6410a30d0469b13d696cf919648d0f3fd588c60f03fdbdbadd1fd", "ett-minute", "15min", 69680),
        _series("weather", "weather.csv", f"{_TSLIB_HF}/weather/weather.csv",
                "34ee981d07313e51da2a50bb600072c8ae4a69cb4b0651f4cb93a069d7a2ba63", "ratio", "10min", 21, 52696,
                "weather", "Jena 2020; -9999 marks missing readings (50 in OT, 30 in max. PAR, 1 in wv); one "
                "repeated timestamp (2020-05-12 06:00) and one 100-minute gap. Read as published: -9999 kept as a "
                "number, the repeated row kept."),
        _series("electricity", "electricity.csv", f"{_TSLIB_HF}/electricity/electricity.csv", None, "ratio", "h",
                321, 26304, "electricity", "ECL: hourly load of 321 clients.", aliases=("ecl",)),
        _series("traffic", "traffic.csv", f"{_TSLIB_HF}/traffic/traffic.csv", None, "ratio", "h", 862, 17544,
                "traffic", "Hourly road occupancy of 862 sensors."),
        _series("exchange_rate", "exchange_rate.csv", f"{_TSLIB_HF}/exchange_rate/exchange_rate.csv", None, "ratio",
                "D", 8, 7588, "exchange_rate", "Daily exchange rates of 8 countries.", aliases=("exchange",)),
        _series("national_illness", "national_illness.csv", f"{_TSLIB_HF}/illness/national_illness.csv", None,
                "ratio", "7D", 7, 966, "illness",
                "Weekly influenza-like illness counts (ILI); short: use the short ILI lookbacks.",
                aliases=("ili", "illness")),
        _PHYSIONET,
    )
}


def register(spec: DatasetSpec) -> DatasetSpec:
    """Add ``spec`` to the registry (replacing a spec of the same name)."""
    REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove the dataset ``name`` (e.g. one a test registered)."""
    REGISTRY.pop(name, None)


def list_datasets(kind: str = "series") -> list[str]:
    """The registered names of ``kind``: ``"series"`` (the default), ``"observations"`` or ``"all"``."""
    if kind not in (*DATASET_KINDS, "all"):
        raise ValueError(f"kind must be one of {(*DATASET_KINDS, 'all')}; got {kind!r}")
    return [name for name, spec in REGISTRY.items() if kind in ("all", spec.kind)]


def _lookup(name: str) -> Optional[DatasetSpec]:
    if name in REGISTRY:
        return REGISTRY[name]
    lowered = name.strip().lower()
    for key, spec in REGISTRY.items():
        if key.lower() == lowered or lowered in spec.aliases:
            return spec
    return None


def is_registered(name: Any, kind: Optional[str] = None) -> bool:
    """Whether ``name`` (case-insensitive, or an alias like ``ECL``) is a registered dataset (of ``kind``)."""
    spec = _lookup(name) if isinstance(name, str) else None
    return spec is not None and (kind is None or spec.kind == kind)


SpecLike = Union[str, DatasetSpec]


def get_spec(name: SpecLike, kind: Optional[str] = None) -> DatasetSpec:
    """The ``DatasetSpec`` of ``name`` (a spec passes through); with ``kind``, one of that kind.

    Raises:
        UnknownDatasetError: no such dataset (of that kind), naming the registered ones.
    """
    spec = name if isinstance(name, DatasetSpec) else _lookup(name) if isinstance(name, str) else None
    if spec is not None and (kind is None or spec.kind == kind):
        return spec
    if spec is not None and spec.kind == "observations":
        raise UnknownDatasetError(
            f"{spec.name!r} is a registered dataset of irregular observations, not a CSV series: read it with "
            f"tsattn.data.ObservationDataModule({spec.name!r}) or Forecaster('irregular'); CSV series datasets are "
            f"{list_datasets()}"
        )
    if spec is not None:
        raise UnknownDatasetError(f"{spec.name!r} is a registered CSV series, not an observation dataset")
    raise UnknownDatasetError(
        f"unknown dataset {name!r}: registered names are {list_datasets(kind or 'all')}; pass one of them, or a "
        "path to a CSV file (ending in .csv)"
    )


def _candidates(spec: DatasetSpec, file: RemoteFile) -> list[Path]:
    paths = []
    folder = data_dir()
    if folder is not None:
        paths += [folder / file.filename]
        if spec.subdir:
            paths.append(folder / spec.subdir / file.filename)
    paths.append(_cache_folder(spec) / file.filename)
    return paths


def _cache_folder(spec: DatasetSpec) -> Path:
    return cache_dir() / spec.cache_subdir if spec.cache_subdir else cache_dir()


def find_local(name: SpecLike) -> tuple[Optional[Path], ...]:
    """The first existing local copy of each of ``name``'s files (None where absent), in file order."""
    spec = get_spec(name)
    return tuple(next((p for p in _candidates(spec, f) if p.is_file()), None) for f in spec.files)


def _where_message(spec: DatasetSpec, files: Sequence[RemoteFile]) -> str:
    folder = data_dir()
    inside = f" (or its {spec.subdir}/ sub-folder)" if spec.subdir else ""
    place = (f"the folder TSATTN_DATA_DIR={str(folder)!r}{inside}" if folder
             else f"a folder named by TSATTN_DATA_DIR (unset){inside}")
    names = ", ".join(f.filename for f in files)
    return (
        f"put {names} (from {', '.join(f.url for f in files)}) in {place} or in the cache folder "
        f"{str(_cache_folder(spec))!r}"
    )


def _check_local(spec: DatasetSpec, file: RemoteFile, path: Path) -> None:
    if file.sha256 is None:
        return
    actual = sha256_of(path)
    if actual != file.sha256:
        repacked = (f" (an archive downloaded from {file.url} holds the same files with other bytes)"
                    if file.download_sha256 != file.sha256 else "")
        warnings.warn(
            f"{path} has sha256 {actual}, not the registered {file.sha256} of {spec.name}'s {file.filename}{repacked}; "
            f"results may differ from the published protocol's. Replace it with the registered file (from "
            f"{file.url}) to silence this",
            UserWarning,
            stacklevel=3,
        )


def resolve(name: SpecLike, *, download_missing: bool = False) -> tuple[Path, ...]:
    """The local paths of a registered dataset's files, downloading absent ones into the cache only if
    ``download_missing``.

    Raises:
        DataFileNotFoundError: some file is absent locally and ``download_missing`` is False.
        DownloadError: absent, and downloads are off (``TSATTN_OFFLINE=1``) or failed.
        ChecksumError: a download's sha256 differs from the known ``download_sha256``.
    """
    spec = get_spec(name)
    found = find_local(spec)
    for file, path in zip(spec.files, found):
        if path is not None:
            _check_local(spec, file, path)
    missing = [file for file, path in zip(spec.files, found) if path is None]
    if missing and not download_missing:
        raise DataFileNotFoundError(
            f"dataset {spec.name!r} is not available locally ({len(missing)} of {len(spec.files)} files absent); "
            f"{_where_message(spec, missing)}, or fetch it with `python -m tsattn.data fetch {spec.name}` "
            "(a data module's prepare_data() does the same)"
        )
    if missing and offline():
        raise DownloadError(
            f"dataset {spec.name!r} is not available locally and downloads are off (TSATTN_OFFLINE=1); "
            f"{_where_message(spec, missing)}, or unset TSATTN_OFFLINE"
        )
    paths = list(found)
    for file in missing:
        try:
            dest = download(file.url, _cache_folder(spec) / file.filename, file.download_sha256)
        except DownloadError as exc:  # offline machines: say where a copied file would be found
            raise DownloadError(f"{exc}; or {_where_message(spec, [file])}") from None
        if file.download_sha256 is None:
            warnings.warn(
                f"{spec.name}: no sha256 is registered for {file.url}, so the download of {file.filename} was not "
                f"verified; its sha256 is {sha256_of(dest)}",
                UserWarning,
                stacklevel=2,
            )
        paths[spec.files.index(file)] = dest
    return tuple(paths)  # type: ignore[arg-type]


def fetch(name: SpecLike) -> tuple[Path, ...]:
    """Make all of ``name``'s files available locally (download absent ones into the cache); their paths."""
    return resolve(name, download_missing=True)
