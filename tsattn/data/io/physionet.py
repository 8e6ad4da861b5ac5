"""The ``"physionet2012"`` format: PhysioNet/CinC Challenge 2012 records -> one ``ObservationSet``,
parsed once and cached (``read_physionet2012``, registered as this format's reader).

Each archive (``set-a.tar.gz``, ``set-b.tar.gz``, ``set-c.tar.gz``) holds one text file per ICU stay,
``<RecordID>.txt``: a ``Time,Parameter,Value`` header, then one observation per line,
``HH:MM,Parameter,Value``, ``HH:MM`` being the time since admission. The parse follows the
published benchmark's reading (see ``datasets/README.md``):

- time in hours, ``minutes / 60``, no rounding;
- the ``RecordID`` line gives the stay's id; it is not an observation; stays are ordered by id;
- the 41 variables in the benchmark's order (``PHYSIONET2012_VARIABLES``);
- several observations of one variable at one time are averaged;
- the descriptors' ``-1`` ("unknown", in Height, Weight and Gender) are kept as values by default,
  as the benchmark's code does; ``unknown_descriptors="drop"`` leaves them out.

Anything else unexpected is handled by an explicit rule, and counted in ``read_counts``:

- lines with an empty parameter name (2,403 in set-c, none elsewhere): left out, as the benchmark's
  code does (``empty_parameter_lines_skipped``);
- values below zero outside the descriptors (e.g. NIDiasABP, Temp, DiasABP): kept as recorded,
  as the benchmark's code does (``negative_values_kept``);
- times after 48:00: kept (``observations_after_48h``; none in the data);
- blank lines, CRLF line ends, archive members that are not ``.txt`` records: skipped and counted;
- an unknown parameter name, an unparseable or empty value, a malformed or negative time, a
  record without exactly one ``RecordID`` line, or a repeated RecordID: a ``DataError`` naming
  the archive, member and line.

All lines of all records are parsed in one pandas C-parser pass over the concatenated bytes.
``read_physionet2012`` caches the result as an ``.npz`` in the user cache, keyed by the archives'
sha256 and the parse options, written atomically. The reader's options (``unknown_descriptors``,
``cache``) reach it from a data module through ``reader_options``; they are this format's only.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
import warnings
import zlib
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import pandas as pd

from ..errors import DataError, DataFileNotFoundError
from ..files import cache_dir, sha256_of
from ..observations.observation_set import ObservationSet, assemble_observations
from ..validation import SHOW, check_choice
from .readers import register_reader

__all__ = [
    "DESCRIPTORS",
    "PHYSIONET2012_VARIABLES",
    "UNKNOWN_DESCRIPTOR_POLICIES",
    "load_physionet2012",
    "parse_physionet_archives",
    "read_physionet2012",
]

# The 41 variables of the PhysioNet 2012 forecasting benchmark, in its order (descriptors first).
PHYSIONET2012_VARIABLES = (
    "Age", "Gender", "Height", "ICUType", "Weight", "Albumin", "ALP", "ALT", "AST", "Bilirubin", "BUN",
    "Cholesterol", "Creatinine", "DiasABP", "FiO2", "GCS", "Glucose", "HCO3", "HCT", "HR", "K", "Lactate",
    "Mg", "MAP", "MechVent", "Na", "NIDiasABP", "NIMAP", "NISysABP", "PaCO2", "PaO2", "pH", "Platelets",
    "RespRate", "SaO2", "SysABP", "Temp", "TroponinI", "TroponinT", "Urine", "WBC",
)

DESCRIPTORS = ("Age", "Gender", "Height", "ICUType", "Weight")
UNKNOWN_DESCRIPTOR_POLICIES = ("keep", "drop")
_HEADER = b"Time,Parameter,Value"
_PARSE_VERSION = 1  # bump when the parse rules change: cached sets of older versions are not reused


class _Records:
    """The records read from the archives: one body (lines after the header) per stay."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.names: list[str] = []  # "<archive>:<member>" for messages
        self.stems: list[str] = []
        self.line_counts: list[int] = []
        self.blank_lines = 0
        self.other_members = 0
        self.lines_rewritten = False  # blank lines removed: line numbers in messages are data lines

    def add(self, label: str, stem: str, raw: bytes) -> None:
        header, _, body = raw.partition(b"\n")
        if header.rstrip(b"\r") != _HEADER:
            raise DataError(
                f"{label} does not start with the header 'Time,Parameter,Value' (it starts with {header[:40]!r}); "
                "it is not a PhysioNet 2012 record: check that the archive is the challenge-2012 set-a/b/c file"
            )
        if b"\r" in body:
            body = body.replace(b"\r\n", b"\n")
        if body and not body.endswith(b"\n"):
            body += b"\n"
        if body.startswith(b"\n") or b"\n\n" in body:
            stripped = re.sub(rb"\n{2,}", b"\n", body).lstrip(b"\n")
            self.blank_lines += body.count(b"\n") - stripped.count(b"\n")
            body, self.lines_rewritten = stripped, True
        self.bodies.append(body)
        self.names.append(label)
        self.stems.append(stem)
        self.line_counts.append(body.count(b"\n"))

    def where(self, line: int) -> str:
        """Global line index (0-based, over all bodies) -> "archive:member line n"."""
        starts = np.r_[0, np.cumsum(self.line_counts)]
        k = int(np.searchsorted(starts, line, side="right") - 1)
        n = line - int(starts[k])
        return f"{self.names[k]} line {n + 2}" + (" (blank lines not counted)" if self.lines_rewritten else "")


def _read_archives(paths: Sequence[Path], max_series: Optional[int]) -> _Records:
    records = _Records()
    for path in paths:
        if not path.is_file():
            raise DataFileNotFoundError(
                f"PhysioNet archive not found: {str(path)!r}; check the path, or use the registered files "
                "(`python -m tsattn.data where physionet2012`)"
            )
        try:
            data = zlib.decompress(path.read_bytes(), wbits=31)  # the whole gzip stream at once
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
                for member in tar:
                    if max_series is not None and len(records.bodies) >= max_series:
                        break
                    if not member.isfile():
                        continue
                    name = member.name.rsplit("/", 1)[-1]
                    if not name.endswith(".txt"):
                        records.other_members += 1
                        continue
                    raw = data[member.offset_data : member.offset_data + member.size]
                    if len(raw) != member.size:
                        raise EOFError(f"member {member.name} ends early")
                    records.add(f"{path.name}:{member.name}", name[: -len(".txt")], raw)
        except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
            raise DataError(
                f"{str(path)!r} is not a readable .tar.gz archive ({type(exc).__name__}: {exc}); it is probably "
                "truncated or corrupt: delete it and copy it again, or fetch it again with `python -m tsattn.data "
                "fetch physionet2012`"
            ) from None
        if max_series is not None and len(records.bodies) >= max_series:
            break
    if not records.bodies:
        raise DataError(f"no PhysioNet records (*.txt) found in {[str(p) for p in paths]}; check the archives")
    return records


def _diagnose(records: _Records, blob: bytes) -> DataError:
    """The first malformed line of ``blob`` (slow; only after the fast parse failed)."""
    for i, line in enumerate(blob.split(b"\n")[:-1]):
        fields = line.split(b",")
        text = line.decode("utf-8", "replace")
        if len(fields) != 3:
            return DataError(
                f"{records.where(i)}: {text!r} does not have the 3 fields Time,Parameter,Value; fix or remove "
                "that line"
            )
        hm = fields[0].split(b":")
        if len(hm) != 2 or not all(part.strip().isdigit() for part in hm):
            return DataError(
                f"{records.where(i)}: time {fields[0].decode('utf-8', 'replace')!r} is not HH:MM (hours and "
                "minutes since admission, not negative); fix or remove that line"
            )
        try:
            float(fields[2])
        except ValueError:
            return DataError(
                f"{records.where(i)}: value {fields[2].decode('utf-8', 'replace')!r} of "
                f"{fields[1].decode('utf-8', 'replace')!r} is not a number (empty or text); fix or remove that line"
            )
    return DataError("the PhysioNet records could not be parsed, but no malformed line was found; check the archives")


def _parse_lines(records: _Records, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray, pd.Series, np.ndarray]:
    """Every line of every record -> (hours [L], minutes [L], parameter [L] (categorical), value [L]),
    in one pass of pandas' C parser over the concatenated bytes."""
    blob = b"".join(records.bodies)
    if blob.startswith(b"-") or b"\n-" in blob:  # "-00:30" would parse as hour 0: look before parsing
        i = 0 if blob.startswith(b"-") else blob[: blob.index(b"\n-") + 1].count(b"\n")
        shown = blob.split(b"\n", i + 1)[i][:12].decode("utf-8", "replace")
        raise DataError(
            f"{records.where(i)}: negative time in {shown!r}; times are HH:MM since ICU admission: fix or remove "
            "that line"
        )
    try:
        table = pd.read_csv(
            io.BytesIO(blob.replace(b":", b",")),  # HH:MM -> two integer fields, parsed by the C engine
            header=None,
            names=["hours", "minutes", "parameter", "value"],
            dtype={"hours": np.int64, "minutes": np.int64, "parameter": "category"},
            na_filter=False,
            engine="c",
            low_memory=False,  # one pass, no chunks to concatenate
        )
    except (ValueError, pd.errors.ParserError):
        raise _diagnose(records, blob) from None
    if len(table) != int(lines.sum()):
        raise _diagnose(records, blob)
    if not pd.api.types.is_numeric_dtype(table["value"]) or pd.api.types.is_bool_dtype(table["value"]):
        raise _diagnose(records, blob)  # text or empty values somewhere
    hours = table["hours"].to_numpy()
    minutes = table["minutes"].to_numpy()
    value = table["value"].to_numpy(dtype=np.float64)
    bad_time = (minutes < 0) | (minutes > 59) | (hours < 0)
    if bad_time.any():
        i = int(np.flatnonzero(bad_time)[0])
        raise DataError(
            f"{records.where(i)}: time {hours[i]:02d}:{minutes[i]:02d} is not HH:MM with minutes 0-59; fix or "
            "remove that line"
        )
    if not np.isfinite(value).all():
        i = int(np.flatnonzero(~np.isfinite(value))[0])
        raise DataError(f"{records.where(i)}: value {value[i]!r} is not a finite number; fix or remove that line")
    return hours, minutes, table["parameter"], value


def _variable_codes(parameter: pd.Series, records: _Records) -> np.ndarray:
    """Parameter names [L] -> variable index (-1 RecordID, -2 empty name); an unknown name is an error."""
    categories = [str(c) for c in parameter.cat.categories]
    lookup = np.array(
        [
            PHYSIONET2012_VARIABLES.index(c) if c in PHYSIONET2012_VARIABLES
            else -1 if c == "RecordID" else -2 if c.strip() == "" else -3
            for c in categories
        ] or [-3],
        dtype=np.int64,
    )
    variable = lookup[parameter.cat.codes.to_numpy()]  # [L]
    unknown = variable == -3
    if unknown.any():
        names = pd.Series(parameter.to_numpy()[unknown]).value_counts()
        raise DataError(
            f"unknown parameter name(s) {dict(names.head(10))} (first at {records.where(int(np.flatnonzero(unknown)[0]))}); "
            f"the PhysioNet 2012 variables are {list(PHYSIONET2012_VARIABLES)} and RecordID: check the archive"
        )
    return variable


def _record_ids(is_id: np.ndarray, stay: np.ndarray, value: np.ndarray, records: _Records,
                n_stays: int) -> tuple[np.ndarray, np.ndarray]:
    """(the RecordIDs sorted [S], each stay's rank among them [S]): exactly one integer RecordID line
    per record, matching its file name, none repeated."""
    per_stay = np.bincount(stay[is_id], minlength=n_stays)
    if np.any(per_stay != 1):
        k = int(np.flatnonzero(per_stay != 1)[0])
        raise DataError(
            f"{records.names[k]} has {int(per_stay[k])} RecordID lines; a PhysioNet record has exactly one (its "
            "id): fix or remove that file"
        )
    id_values = value[is_id]  # one per stay, in stay order (rows are in stay order)
    if np.any(id_values != np.round(id_values)):
        k = int(np.flatnonzero(id_values != np.round(id_values))[0])
        raise DataError(f"{records.names[k]}: RecordID {id_values[k]!r} is not an integer; fix that line")
    ids = id_values.astype(np.int64)
    for k, (stem, rid) in enumerate(zip(records.stems, ids)):
        if stem.isdigit() and int(stem) != rid:
            raise DataError(
                f"{records.names[k]} says RecordID {rid}, but its file name says {stem}; the archive's records are "
                "mixed up: get a clean copy"
            )
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    if np.any(sorted_ids[1:] == sorted_ids[:-1]):
        rid = int(sorted_ids[1:][sorted_ids[1:] == sorted_ids[:-1]][0])
        clash = [records.names[k] for k in np.flatnonzero(ids == rid)]
        raise DataError(f"RecordID {rid} occurs in several records {clash}; read each record once")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return sorted_ids, rank


def parse_physionet_archives(
    paths: Sequence[Union[str, os.PathLike]],
    *,
    unknown_descriptors: str = "keep",
    max_series: Optional[int] = None,
) -> ObservationSet:
    """Parse PhysioNet 2012 challenge archives into one ``ObservationSet`` (no cache; see
    ``read_physionet2012``).

    Args:
        paths: the ``.tar.gz`` archives, read in this order.
        unknown_descriptors: ``"keep"`` (the benchmark's reading) keeps the descriptors' ``-1``
            ("unknown") as values; ``"drop"`` leaves those observations out.
        max_series: read only the first this many records (in archive order), e.g. for quick tests.

    Returns:
        an ``ObservationSet`` of the stays, ordered by RecordID (``series_ids``, int64); time in
        hours since admission (numbers: ``time_unit`` and ``origins`` are None); the 41
        variables; ``read_counts`` records what the rules of the module docstring did.

    Raises:
        DataError naming the archive, member and line of anything malformed.
    """
    check_choice("unknown_descriptors", unknown_descriptors, UNKNOWN_DESCRIPTOR_POLICIES)
    if max_series is not None and (isinstance(max_series, bool) or not isinstance(max_series, int) or max_series < 1):
        raise DataError(f"max_series must be a positive integer or None; got {max_series!r}")
    paths = [Path(p).expanduser() for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
    records = _read_archives(paths, max_series)
    lines = np.asarray(records.line_counts, dtype=np.int64)  # [S]
    hours, minutes, parameter, value = _parse_lines(records, lines)
    variable = _variable_codes(parameter, records)
    stay = np.repeat(np.arange(len(lines), dtype=np.int64), lines)  # [L]
    is_id = variable == -1
    sorted_ids, rank = _record_ids(is_id, stay, value, records, len(lines))

    empty_name = variable == -2
    keep = variable >= 0
    time = (hours * 60 + minutes) / 60.0  # hours since admission, minutes / 60, no rounding
    descriptor = np.isin(variable, [PHYSIONET2012_VARIABLES.index(d) for d in DESCRIPTORS])
    unknown_descriptor = keep & descriptor & (value == -1.0)
    counts = {
        "records": len(lines),
        "lines": int(lines.sum()),
        "record_id_lines": int(is_id.sum()),
        "empty_parameter_lines_skipped": int(empty_name.sum()),
        "blank_lines_skipped": records.blank_lines,
        "other_archive_members_skipped": records.other_members,
        f"unknown_descriptors_{'kept' if unknown_descriptors == 'keep' else 'dropped'}": int(unknown_descriptor.sum()),
        "negative_values_kept": int((keep & ~descriptor & (value < 0)).sum()),
        "observations_after_48h": int((keep & (time > 48.0)).sum()),
    }
    if unknown_descriptors == "drop":
        keep &= ~unknown_descriptor
    offsets, time, variable, value, merged = assemble_observations(
        rank[stay[keep]], time[keep], variable[keep], value[keep], len(lines), "mean"
    )
    counts["duplicates_merged"] = merged
    counts["observations"] = len(value)
    return ObservationSet(
        series_ids=sorted_ids, offsets=offsets, time=time, variable=variable, value=value,
        variables=PHYSIONET2012_VARIABLES, time_unit=None, origins=None, source=", ".join(str(p) for p in paths),
        read_counts=counts,
    )


def _cache_key(paths: Sequence[Path], unknown_descriptors: str, max_series: Optional[int]) -> str:
    digest = hashlib.sha256(f"physionet2012 parse v{_PARSE_VERSION}|{unknown_descriptors}|{max_series}".encode())
    for path in paths:
        digest.update(sha256_of(path).encode())
    return digest.hexdigest()


@register_reader("physionet2012")
def read_physionet2012(
    paths: Sequence[Union[str, os.PathLike]],
    *,
    max_series: Optional[int] = None,
    unknown_descriptors: str = "keep",
    cache: bool = True,
    cache_folder: Optional[Union[str, os.PathLike]] = None,
) -> ObservationSet:
    """The reader of the ``"physionet2012"`` format: the archives' stays, parsed once and then read
    from a cache.

    Args:
        paths: the ``set-a/b/c.tar.gz`` archives.
        max_series: parse only the first this many records (archive order).
        unknown_descriptors: ``"keep"`` (default, the benchmark's reading) or ``"drop"`` the
            descriptors' -1 ("unknown").
        cache: read / write the parsed set in the cache.
        cache_folder: where parsed sets are kept; default ``<user cache>/physionet2012``.

    The cache file is ``parsed-<key>.npz``, the key a sha256 over the archives' sha256, the parse
    options and the parse rules' version: changed archives or rules are parsed again. It is written
    to a temporary file and renamed; an unreadable cache file is parsed again and replaced.
    """
    paths = [Path(p).expanduser() for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
    check_choice("unknown_descriptors", unknown_descriptors, UNKNOWN_DESCRIPTOR_POLICIES)
    for path in paths:
        if not path.is_file():
            raise DataFileNotFoundError(f"PhysioNet archive not found: {str(path)!r}; check the path")
    source = ", ".join(str(p) for p in paths)
    target = None
    if cache:
        folder = Path(cache_folder).expanduser() if cache_folder is not None else cache_dir() / "physionet2012"
        target = folder / f"parsed-{_cache_key(paths, unknown_descriptors, max_series)[:24]}.npz"
        if target.is_file():
            try:
                cached = ObservationSet.load_npz(target)
            except DataError as exc:
                warnings.warn(f"{exc}; parsing the archives again", UserWarning, stacklevel=2)
            else:
                return cached if cached.source == source else _with_source(cached, source)
    observations = parse_physionet_archives(paths, unknown_descriptors=unknown_descriptors, max_series=max_series)
    if target is not None:
        observations.save_npz(target)
    return observations


def load_physionet2012(
    paths: Optional[Sequence[Union[str, os.PathLike]]] = None,
    *,
    unknown_descriptors: str = "keep",
    max_series: Optional[int] = None,
    cache: bool = True,
    cache_folder: Optional[Union[str, os.PathLike]] = None,
    download_missing: bool = False,
    dataset: str = "physionet2012",
) -> ObservationSet:
    """The PhysioNet 2012 stays as an ``ObservationSet`` (``read_physionet2012``), from ``paths`` or
    from the registered dataset's files.

    Args:
        paths: the archives; None finds the files of the registered ``dataset`` (``TSATTN_DATA_DIR``,
            its ``physionet2012/`` folder, then the cache; see ``tsattn.data.registry``).
        unknown_descriptors, max_series, cache, cache_folder: as for ``read_physionet2012``.
        download_missing: download absent archives into the cache first (never done by default).
        dataset: the registered dataset whose files ``paths=None`` finds (its format must be
            ``"physionet2012"``).
    """
    from .. import registry  # the registry lists this format's dataset: imported here, not at module level

    spec = registry.get_spec(dataset)
    if spec.format != "physionet2012":
        raise DataError(f"{spec.name!r} is not in the PhysioNet 2012 format ({spec.format!r})")
    registered = paths is None
    if paths is None:
        paths = registry.resolve(spec, download_missing=download_missing)
    observations = read_physionet2012(paths, max_series=max_series, unknown_descriptors=unknown_descriptors,
                                      cache=cache, cache_folder=cache_folder)
    if registered and max_series is None and len(observations) != spec.n_series:
        warnings.warn(
            f"the {spec.name} archives hold {len(observations)} records, not the registered {spec.n_series}; "
            "results will not be comparable with the published protocol's",
            UserWarning,
            stacklevel=2,
        )
    return observations


def _with_source(observations: ObservationSet, source: str) -> ObservationSet:
    return ObservationSet(
        series_ids=observations.series_ids, offsets=observations.offsets, time=observations.time,
        variable=observations.variable, value=observations.value, variables=observations.variables,
        time_unit=observations.time_unit, origins=observations.origins, source=source,
        read_counts=observations.read_counts,
    )
