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

Observation datasets (irregular series, e.g. ``physionet2012``) may span several files
(``ObservationDatasetSpec.files``); each file is looked for in ``TSATTN_DATA_DIR``, in
``TSATTN_DATA_DIR/<subdir>/``, then in ``<cache>/<subdir>/``, and downloaded there on request, file by
file, with the same atomic download. They are listed apart (``list_datasets("observations")``), so
that the series datasets' names and specs keep their meaning; ``resolve_files`` / ``fetch_files``
work for both kinds.

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
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from .errors import ChecksumError, DataFileNotFoundError, DownloadError, UnknownDatasetError

__all__ = [
    "DATASET_KINDS",
    "OBSERVATION_REGISTRY",
    "REGISTRY",
    "DatasetSpec",
    "ObservationDatasetSpec",
    "RemoteFile",
    "cache_dir",
    "data_dir",
    "download",
    "fetch",
    "fetch_files",
    "find_local",
    "find_local_files",
    "get_any_spec",
    "get_observation_spec",
    "get_spec",
    "is_observation_dataset",
    "is_registered",
    "list_datasets",
    "offline",
    "resolve",
    "resolve_files",
    "sha256_of",
]

_TSLIB_HF = "https://huggingface.co/datasets/thuml/Time-Series-Library/resolve/main"
_ETT_RAW = "https://raw.githubusercontent.com/zhouhaoyi/ETDataset/main/ETT-small"

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

    @property
    def files(self) -> tuple[RemoteFile, ...]:
        """The one CSV file (its URL serves the registered bytes)."""
        return (RemoteFile(self.filename, self.url, self.sha256, self.sha256),)


@dataclass(frozen=True)
class ObservationDatasetSpec:
    """One registered dataset of irregular observations (possibly several files).

    Attributes:
        name: the registry name (``"physionet2012"``).
        files: the files, in reading order.
        subdir: the files' folder under ``TSATTN_DATA_DIR`` (optional there) and in the cache.
        format: how the files are parsed (``"physionet2012"``: PhysioNet 2012 challenge archives).
        n_series: series in the whole dataset, for reference and as a check of a parse.
        variables: the variable names, in the dataset's order.
        protocol: keyword arguments of ``ObservationDataModule`` that give the published protocol
            (origins, history / horizon, split, scaling).
        homepage: where the dataset is described.
        notes: quirks worth knowing.
    """

    name: str
    files: tuple[RemoteFile, ...]
    subdir: str
    format: str
    n_series: int
    variables: tuple[str, ...]
    protocol: Mapping[str, Any]
    homepage: str = ""
    notes: str = ""

    @property
    def n_variables(self) -> int:
        return len(self.variables)


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


_PHYSIONET_FILES = "https://physionet.org/files/challenge-2012/1.0.0"

# The 41 variables of the PhysioNet 2012 forecasting benchmark, in its order (descriptors first).
PHYSIONET2012_VARIABLES = (
    "Age", "Gender", "Height", "ICUType", "Weight", "Albumin", "ALP", "ALT", "AST", "Bilirubin", "BUN",
    "Cholesterol", "Creatinine", "DiasABP", "FiO2", "GCS", "Glucose", "HCO3", "HCT", "HR", "K", "Lactate",
    "Mg", "MAP", "MechVent", "Na", "NIDiasABP", "NIMAP", "NISysABP", "PaCO2", "PaO2", "pH", "Platelets",
    "RespRate", "SaO2", "SysABP", "Temp", "TroponinI", "TroponinT", "Urine", "WBC",
)

OBSERVATION_REGISTRY: dict[str, ObservationDatasetSpec] = {
    spec.name: spec
    for spec in (
        ObservationDatasetSpec(
            name="physionet2012",
            files=tuple(
                RemoteFile(f"set-{part}.tar.gz", f"{_PHYSIONET_FILES}/set-{part}.tar.gz", sha256, None)
                for part, sha256 in (
                    ("a", "abcd119bae0f9f98d5e63b7bce5b2d37c64328e7c1acacab3836d17787d841df"),
                    ("b", "668734f4ddf290edde891057c29349a04af51090b308fd5f352d0eabeb89a975"),
                    ("c", "07738d739607c88bcb6c85a28a54963c8a8beaef864fbe40511c5411f07f3f2d"),
                )
            ),
            subdir="physionet2012",
            format="physionet2012",
            n_series=12000,
            variables=PHYSIONET2012_VARIABLES,
            protocol={
                "origins": (24.0,),
                "history": None,
                "horizon": None,
                "split": "series",
                "split_fractions": (0.6, 0.2, 0.2),
                "split_seed": 42,
                "scaler": "minmax",
                "scale_from": "seen",
            },
            homepage="https://physionet.org/content/challenge-2012/1.0.0/",
            notes=(
                "PhysioNet/CinC Challenge 2012: 12,000 ICU stays (sets a, b, c), 41 variables each at its own "
                "times over 48 h. The registered sha256 are those of archives re-packed from the extracted "
                "files; PhysioNet's own archives hold the same files with other bytes (a download is not "
                "verified by sha256; the parse checks the record count)."
            ),
        ),
    )
}
_OBSERVATION_ALIASES = {"physionet": "physionet2012", "physionet-2012": "physionet2012", "challenge-2012": "physionet2012"}
DATASET_KINDS = ("series", "observations", "all")


def list_datasets(kind: str = "series") -> list[str]:
    """The registered names: ``"series"`` (regular CSV series, the default), ``"observations"``
    (irregular observation sets) or ``"all"``."""
    if kind not in DATASET_KINDS:
        raise ValueError(f"kind must be one of {DATASET_KINDS}; got {kind!r}")
    names = list(REGISTRY) if kind in ("series", "all") else []
    return names + (list(OBSERVATION_REGISTRY) if kind in ("observations", "all") else [])


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
        if isinstance(name, str) and _lookup_observations(name) is not None:
            raise UnknownDatasetError(
                f"{name!r} is a registered dataset of irregular observations, not a CSV series: read it with "
                f"tsattn.data.ObservationDataModule({name!r}) (or load_physionet2012()); CSV series datasets are "
                f"{list_datasets()}"
            )
        raise UnknownDatasetError(
            f"unknown dataset {name!r}: registered names are {list_datasets()}; pass one of them, or a path "
            "to a CSV file (ending in .csv)"
        )
    return spec


def _lookup_observations(name: str) -> Optional[ObservationDatasetSpec]:
    lowered = name.strip().lower()
    for key, spec in OBSERVATION_REGISTRY.items():
        if key.lower() == lowered:
            return spec
    alias = _OBSERVATION_ALIASES.get(lowered)
    return OBSERVATION_REGISTRY.get(alias) if alias else None


AnySpec = Union[DatasetSpec, ObservationDatasetSpec]


def is_observation_dataset(name: str) -> bool:
    """Whether ``name`` (case-insensitive, or an alias like ``physionet``) is a registered observation dataset."""
    return isinstance(name, str) and _lookup_observations(name) is not None


def get_observation_spec(name: Union[str, ObservationDatasetSpec]) -> ObservationDatasetSpec:
    """The ``ObservationDatasetSpec`` of ``name`` (case-insensitive; a spec passes through)."""
    if isinstance(name, ObservationDatasetSpec):
        return name
    spec = _lookup_observations(name) if isinstance(name, str) else None
    if spec is None:
        raise UnknownDatasetError(
            f"unknown observation dataset {name!r}: registered ones are {list_datasets('observations')}; pass "
            "one of them, or a path / DataFrame with reading options"
        )
    return spec


def get_any_spec(name: Union[str, AnySpec]) -> AnySpec:
    """The spec of a registered dataset of either kind (series first, then observations)."""
    if isinstance(name, (DatasetSpec, ObservationDatasetSpec)):
        return name
    spec = (_lookup(name) or _lookup_observations(name)) if isinstance(name, str) else None
    if spec is None:
        raise UnknownDatasetError(
            f"unknown dataset {name!r}: registered names are {list_datasets('all')}; pass one of them"
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


# -- datasets of several files (observation datasets; a CSV dataset is its one file) -------------------------
def _file_candidates(spec: ObservationDatasetSpec, file: RemoteFile) -> list[Path]:
    paths = []
    folder = data_dir()
    if folder is not None:
        paths += [folder / file.filename, folder / spec.subdir / file.filename]
    paths.append(cache_dir() / spec.subdir / file.filename)
    return paths


def find_local_files(name: Union[str, AnySpec]) -> tuple[Optional[Path], ...]:
    """The first existing local copy of each of ``name``'s files (None where absent), in file order."""
    spec = get_any_spec(name)
    if isinstance(spec, DatasetSpec):
        return (find_local(spec),)
    found = []
    for file in spec.files:
        found.append(next((p for p in _file_candidates(spec, file) if p.is_file()), None))
    return tuple(found)


def _files_where_message(spec: ObservationDatasetSpec, files: Sequence[RemoteFile]) -> str:
    folder = data_dir()
    place = (
        f"the folder TSATTN_DATA_DIR={str(folder)!r} (or its {spec.subdir}/ sub-folder)" if folder
        else f"a folder named by TSATTN_DATA_DIR (unset), or its {spec.subdir}/ sub-folder,"
    )
    names = ", ".join(f.filename for f in files)
    return (
        f"put {names} (from {', '.join(f.url for f in files)}) in {place} or in the cache folder "
        f"{str(cache_dir() / spec.subdir)!r}"
    )


def resolve_files(name: Union[str, AnySpec], *, download_missing: bool = False) -> tuple[Path, ...]:
    """The local paths of a registered dataset's files (one for a CSV dataset), downloading absent ones
    into ``<cache>/<subdir>/`` only if ``download_missing``.

    A local file whose sha256 differs from the registered one is used with a warning; a download
    without a known ``download_sha256`` is kept with a warning that prints its sha256.

    Raises:
        DataFileNotFoundError: some file is absent locally and ``download_missing`` is False.
        DownloadError: absent, and downloads are off (``TSATTN_OFFLINE=1``) or failed.
        ChecksumError: a download's sha256 differs from the known ``download_sha256``.
    """
    spec = get_any_spec(name)
    if isinstance(spec, DatasetSpec):
        return (resolve(spec, download_missing=download_missing),)
    found = find_local_files(spec)
    for file, path in zip(spec.files, found):
        if path is not None and file.sha256 is not None:
            actual = sha256_of(path)
            if actual != file.sha256:
                warnings.warn(
                    f"{path} has sha256 {actual}, not the registered {file.sha256} of {spec.name}'s "
                    f"{file.filename}; an archive downloaded from {file.url} holds the same files with other "
                    "bytes, any other copy may hold other data: results may then differ from the published "
                    "protocol's",
                    UserWarning,
                    stacklevel=2,
                )
    missing = [file for file, path in zip(spec.files, found) if path is None]
    if missing and not download_missing:
        raise DataFileNotFoundError(
            f"dataset {spec.name!r} is not available locally ({len(missing)} of {len(spec.files)} files absent); "
            f"{_files_where_message(spec, missing)}, or fetch them with `python -m tsattn.data fetch {spec.name}` "
            "(the DataModule's prepare_data() does the same)"
        )
    if missing and offline():
        raise DownloadError(
            f"dataset {spec.name!r} is not available locally and downloads are off (TSATTN_OFFLINE=1); "
            f"{_files_where_message(spec, missing)}, or unset TSATTN_OFFLINE"
        )
    paths = list(found)
    for file in missing:
        try:
            dest = download(file.url, cache_dir() / spec.subdir / file.filename, file.download_sha256)
        except DownloadError as exc:
            raise DownloadError(f"{exc}; or {_files_where_message(spec, [file])}") from None
        if file.download_sha256 is None:
            warnings.warn(
                f"{spec.name}: no sha256 is registered for {file.url}, so the download of {file.filename} was not "
                f"verified; its sha256 is {sha256_of(dest)}",
                UserWarning,
                stacklevel=2,
            )
        paths[spec.files.index(file)] = dest
    return tuple(paths)  # type: ignore[arg-type]


def fetch_files(name: Union[str, AnySpec]) -> tuple[Path, ...]:
    """Make all of ``name``'s files available locally (download absent ones into the cache); their paths."""
    return resolve_files(name, download_missing=True)
