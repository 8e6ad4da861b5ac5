"""``ForecastDataModule``: what the window and the observation data modules share.

- **Where the data comes from**: a registered name (``"ETTh1"``, ``"physionet2012"``), a path, or
  an in-memory table; ``prepare_data`` fetches a registered dataset that is not local (``setup``
  never downloads).
- **How a table is read**: the options every reader takes (time column and format, day-first dates,
  missing markers, thousands separator, decimal mark, delimiter, sorting, columns), declared and
  validated here once.
- **Loaders**: shuffled train batches (a permutation per epoch fixed by ``seed``), every val / test
  sample in order.
- **The fitted pipeline as a value**: ``record()`` is a plain, versioned dict of how the data was
  read and sampled and of what the fit learnt (scaler, time unit, frequency, variables, spans);
  ``from_record(record, data)`` rebuilds a data module that reads other data exactly the fit's way.
  Lightning's ``state_dict`` / ``load_state_dict`` carry it in every checkpoint.

A subclass sets ``task`` (``"window"`` / ``"observations"``), ``record_class`` values and implements
``_options()`` (its resolved constructor options), ``_fitted()`` (what ``setup`` learnt) and
``_restore(fitted)`` (take those as given before ``setup``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Optional, Union

import lightning.pytorch as pl
import numpy as np
import pandas as pd
from torch.utils.data import DataLoader, Dataset

from . import registry
from .errors import DataError
from .io.table import NaValues, check_reading_options, normalize_na_values
from .validation import SPLITS, check_choice, check_non_negative_int, check_positive_int

__all__ = ["RECORD_FORMAT", "RECORD_VERSION", "ForecastDataModule", "find_record", "looks_like_path"]

RECORD_FORMAT = "tsattn.data"
RECORD_VERSION = 1

# the options of the table readers, declared once here (see ForecastDataModule)
TABLE_OPTIONS = ("columns", "time_column", "time_format", "dayfirst", "na_values", "thousands", "decimal", "sep",
                 "sort")


def looks_like_path(text: str) -> bool:
    """Whether ``text`` reads as a file path rather than a registered name."""
    return (text.lower().endswith((".csv", ".csv.gz", ".txt", ".npz")) or "/" in text or os.sep in text
            or Path(text).exists())


class ForecastDataModule(pl.LightningDataModule):
    """The shared base of ``CSVDataModule`` (windows) and ``ObservationDataModule`` (observations).

    Args:
        data: a registered dataset name, a path, or an in-memory table (see the subclass).
        columns: the value (variable) columns to use; default: every numeric column.
        time_column: the column holding times; None detects ``date``, ``ds``, ``timestamp``,
            ``date_time``, ``datetime``, ``time``, ... (or a DataFrame's ``DatetimeIndex``).
        time_format: a ``strftime`` format for the timestamps; None infers it. Timestamps with
            different UTC offsets (a zone with daylight saving: ``-05:00`` in winter, ``-04:00`` in
            summer) are read as UTC, and forecasts of such data come back in UTC.
        dayfirst: read ``07/01/2016`` as 7 January (True) or 1 July (False); None decides from the
            data and raises when no row tells.
        na_values: cell values that mean "missing": one (``-9999``) or a list (``[-9999, "n/a"]``).
        thousands: the thousands separator of numbers written as text (``","`` for ``"5,827.0"``).
        decimal: the decimal mark (``","`` for ``"0,7855"``, as in ``pandas.read_csv``; with it, a
            file's fields are usually separated by ``sep=";"``).
        sep: the CSV file's field delimiter (``";"`` for semicolon-separated files).
        sort: sort rows by time instead of rejecting times that go back.
        batch_size: samples per batch.
        num_workers: DataLoader worker processes.
        pin_memory: pin batches in page-locked memory (for GPU training).
        drop_last_train: drop the last incomplete train batch (val / test keep every sample).
        seed: seed of the train shuffling: epoch e uses a permutation fixed by (seed, e), so resumed
            runs repeat uninterrupted ones; None draws it from torch's global RNG.
    """

    task: ClassVar[str] = ""
    accepts: ClassVar[str] = "a path to a file, a registered dataset name or a pandas DataFrame"
    dataset_kinds: ClassVar[tuple[str, ...]] = ()   # the registered kinds this module reads
    in_memory_types: ClassVar[tuple[type, ...]] = (pd.DataFrame,)
    collate_fn: ClassVar[Any] = None

    def __init__(
        self,
        data: Union[str, Path, pd.DataFrame],
        *,
        columns: Optional[list[str]] = None,
        time_column: Optional[str] = None,
        time_format: Optional[str] = None,
        dayfirst: Optional[bool] = None,
        na_values: NaValues = None,
        thousands: Optional[str] = None,
        decimal: str = ".",
        sep: str = ",",
        sort: bool = False,
        batch_size: int = 32,
        num_workers: int = 0,
        pin_memory: bool = False,
        drop_last_train: bool = False,
        seed: Optional[int] = None,
    ) -> None:
        super().__init__()
        if isinstance(data, os.PathLike):
            data = os.fspath(data)  # a plain string in hparams.yaml
        in_memory = isinstance(data, self.in_memory_types)
        self.save_hyperparameters(ignore=["data", "scaler"] if in_memory else ["scaler"])
        if not in_memory:
            self.hparams["data"] = data  # a path as a plain string
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.num_workers = check_non_negative_int("num_workers", num_workers)
        check_reading_options(dayfirst=dayfirst, thousands=thousands, sep=sep, decimal=decimal)
        self.table_options = {
            "columns": list(columns) if isinstance(columns, (list, tuple)) else columns, "time_column": time_column,
            "time_format": time_format, "dayfirst": dayfirst, "na_values": normalize_na_values(na_values),
            "thousands": thousands, "decimal": decimal, "sep": sep, "sort": sort,
        }
        self.pin_memory = pin_memory
        self.drop_last_train = drop_last_train
        self.seed = seed
        self.spec: Optional[registry.DatasetSpec] = None
        self._data: Any = None
        self._resolve_source(data, in_memory)
        self._fitted_given = False  # load_state_dict / from_record gave the fitted facts

    # -- where the data comes from ----------------------------------------------------------------------
    def _resolve_source(self, data: Any, in_memory: bool) -> None:
        if in_memory:
            self._data = data
            return
        if not isinstance(data, str):
            raise self._data_type_error(data)
        if not looks_like_path(data) and registry.is_registered(data):
            spec = registry.get_spec(data)
            if spec.kind not in self.dataset_kinds:
                registry.get_spec(data, kind=self.dataset_kinds[0])  # raises the message naming the right road
            self.spec = spec  # resolved lazily; downloads only in prepare_data()
        elif not looks_like_path(data):
            raise registry.UnknownDatasetError(
                f"{data!r} is neither a registered dataset ({registry.list_datasets(self._kind_listed())}) nor a "
                f"path to a file; pass a registered name or a path such as 'data/series.csv'"
            )
        else:
            self._data = Path(data).expanduser()

    def _kind_listed(self) -> str:
        return self.dataset_kinds[0] if len(self.dataset_kinds) == 1 else "all"

    def _data_type_error(self, data: Any) -> DataError:
        hint = ""
        if hasattr(data, "__array__"):
            hint = (
                "; an array has no timestamps: wrap it in a DataFrame with a time index, e.g. "
                "pd.DataFrame(values, columns=names, index=pd.date_range('2024-01-01', periods=len(values), freq='h'))"
            )
        return DataError(f"data must be {self.accepts}; got {type(data).__name__}{hint}")

    def _local_files(self) -> tuple[Path, ...]:
        """The registered dataset's local files (no download: ``prepare_data`` fetches them)."""
        assert self.spec is not None
        return registry.resolve(self.spec, download_missing=False)

    @property
    def source(self) -> Optional[str]:
        """Where the data comes from, usable from any working directory: the registered name, the
        file's absolute path, or None for an in-memory table."""
        if self.spec is not None:
            return self.spec.name
        if isinstance(self._data, Path):
            return str(self._data.resolve())
        return None

    def prepare_data(self) -> None:
        """Download a registered dataset's files into the cache if they are not available locally."""
        if self.spec is not None:
            registry.fetch(self.spec)

    # -- MASE's in-sample naive forecast ----------------------------------------------------------------
    season: int = 1  # its seasonal period in rows (a subclass's: from the data's frequency)
    n_static: int = 0  # static covariates per series the model reads (the observation task's may have some)

    def naive_scale(self) -> np.ndarray:
        """float64 [outputs]: per output column, the in-sample naive forecast's mean absolute error over
        the train split, in units (MASE's denominator); empty where a data module does not say."""
        return np.empty(0, dtype=np.float64)

    # -- datasets and loaders ---------------------------------------------------------------------------
    _datasets: Optional[dict[str, Dataset]] = None  # what setup() builds, one dataset per split

    @property
    def is_set_up(self) -> bool:
        return self._datasets is not None

    def split_dataset(self, split: str) -> Dataset:
        """The dataset of ``split`` (``"train"``, ``"val"`` or ``"test"``), set up on first use."""
        check_choice("split", split, SPLITS)
        self.setup()
        assert self._datasets is not None
        return self._datasets[split]

    @property
    def train_dataset(self) -> Dataset:
        return self.split_dataset("train")

    @property
    def val_dataset(self) -> Dataset:
        return self.split_dataset("val")

    @property
    def test_dataset(self) -> Dataset:
        return self.split_dataset("test")

    def _loader(self, dataset: Dataset, train: bool) -> DataLoader:
        from .windows.dataset import EpochShuffleSampler

        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            sampler=EpochShuffleSampler(dataset, self.seed) if train else None,
            drop_last=train and self.drop_last_train,
            collate_fn=type(self).collate_fn,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            persistent_workers=self.num_workers > 0,
        )

    def dataloader(self, split: str) -> DataLoader:
        """Every sample of ``split``, in order (what ``evaluate`` and the test step read)."""
        return self._loader(self.split_dataset(split), train=False)

    def evaluation_loader(self, split: str) -> DataLoader:
        """``dataloader(split)`` for an evaluation: a split without samples is an error saying so."""
        if len(self.split_dataset(split)) == 0:
            raise DataError(
                f"the data gives no {split} samples for this model (lookback {self.lookback!r}, horizon "
                f"{self.horizon!r}, the fit's split protocol): evaluate(split={split!r}) needs at least one; pass "
                "longer (or more) series, or another split"
            )
        return self.dataloader(split)

    def train_dataloader(self) -> DataLoader:
        """Shuffled train samples: a permutation per epoch fixed by (``seed``, epoch)."""
        return self._loader(self.train_dataset, train=True)

    def val_dataloader(self) -> DataLoader:
        """Every val sample, in order."""
        return self.dataloader("val")

    def test_dataloader(self) -> DataLoader:
        """Every test sample, in order."""
        return self.dataloader("test")

    def predict_dataloader(self) -> DataLoader:
        """Every test sample, in order."""
        return self.dataloader("test")

    # -- the fitted pipeline as a value -----------------------------------------------------------------
    def _options(self) -> dict[str, Any]:
        """The resolved constructor options (plain values) that read and sample data this way."""
        raise NotImplementedError

    def _fitted(self) -> dict[str, Any]:
        """What ``setup`` learnt (plain values; the scaler's float64 values exactly)."""
        raise NotImplementedError

    def _restore(self, fitted: dict[str, Any]) -> None:
        """Take ``fitted`` (a ``_fitted()`` of another data module) as given, before ``setup``."""
        raise NotImplementedError

    def record(self) -> dict[str, Any]:
        """The fitted pipeline: ``{"format", "version", "task", "source", "options", "fitted",
        "batch_size"}``, plain Python values (JSON-able), versioned; ``from_record`` rebuilds it."""
        self.setup()
        return {
            "format": RECORD_FORMAT, "version": RECORD_VERSION, "task": self.task, "source": self.source,
            "options": self._options(), "fitted": self._fitted(), "batch_size": self.batch_size,
        }

    def state_dict(self) -> dict[str, Any]:
        """Lightning's hook: the ``record()``, kept in every checkpoint of a fit."""
        return self.record()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Lightning's hook: before ``setup``, take the recorded fitted facts (scaler, time unit, ...) as
        given; after it (a resumed or tested run), check that they are the ones this data gives."""
        if not state_dict:
            return
        fitted = check_record(state_dict, self.task)["fitted"]
        if not self.is_set_up:
            self._restore(fitted)
            self._fitted_given = True
        elif _plain(self._fitted()) != _plain(fitted):
            raise DataError(
                "the checkpoint was fit on another data pipeline (other scaler statistics, time unit, variables or "
                "channels) than this data module's; resume or test it with the data and options it was fit on"
            )

    @classmethod
    def from_record(cls, record: dict[str, Any], data: Any = None, **options: Any) -> "ForecastDataModule":
        """A data module that reads ``data`` (default: the recorded source) the recorded way, with the
        recorded fitted facts (scaler, time unit, ...); ``options`` override constructor options
        (e.g. ``batch_size``). Not set up yet."""
        record = check_record(record, cls.task)
        source = record["source"] if data is None else data
        if source is None:
            raise RuntimeError(
                "this model was fit on an in-memory table, which a checkpoint does not keep; pass the data: "
                "predict(data) / evaluate(data=...)"
            )
        kwargs = {**cls._options_for(record, other_data=data is not None), "batch_size": record["batch_size"],
                  **options}
        dm = cls(source, **kwargs)
        dm.load_state_dict(record)
        dm.prepare_data()  # a registered name that is not local yet: fetch it (never for a path)
        return dm._checked_against(record)

    @classmethod
    def _options_for(cls, record: dict[str, Any], other_data: bool) -> dict[str, Any]:
        """The constructor options that read data the recorded way (``other_data``: not the fit's source)."""
        return dict(record["options"])

    def _checked_against(self, record: dict[str, Any]) -> "ForecastDataModule":
        """Read enough of the data to check it fits the record (raise ``DataError`` naming the fix)."""
        return self


def _plain(value: Any) -> Any:
    """Tuples as lists, recursively (a record read back from a checkpoint has lists)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def check_record(record: Any, task: Optional[str] = None) -> dict[str, Any]:
    """``record`` if it is a data-pipeline record of this version (and ``task``); else a clear error."""
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
        raise ValueError("not a tsattn data record (a dict with format='tsattn.data')")
    if record.get("version") != RECORD_VERSION:
        raise ValueError(
            f"the data record has version {record.get('version')!r}; this tsattn reads version {RECORD_VERSION}: "
            "use the tsattn version that wrote it, or fit the model again"
        )
    if task is not None and record.get("task") != task:
        raise ValueError(f"the data record is of the {record.get('task')!r} task, not {task!r}")
    return record


def find_record(checkpoint: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The data-pipeline record in a checkpoint (a fit's data module's ``state_dict``, or what
    ``Forecaster.save`` wrote); checkpoints of tsattn 0.1 (``"tsattn_data_info"``) are converted."""
    for value in checkpoint.values():
        if isinstance(value, dict) and value.get("format") == RECORD_FORMAT:
            return check_record(value)
    legacy = checkpoint.get("tsattn_data_info")
    if isinstance(legacy, dict):
        from .records import record_from_legacy

        return record_from_legacy(legacy, checkpoint)
    return None


DataLike = Union[str, os.PathLike, pd.DataFrame]
