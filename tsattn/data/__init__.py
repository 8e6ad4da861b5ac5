"""tsattn.data: CSV / DataFrame -> validated series -> benchmark splits -> scaled windows.

Data flows one way: this package knows nothing of models. The pieces, in pipeline order:

- ``read_series`` (csv.py): read + validate a CSV or DataFrame; knot times per row.
- ``select_channels`` (channels.py): the ``"M"`` / ``"S"`` / ``"MS"`` feature modes.
- ``split_borders`` (splits.py): the Time-Series-Library train / val / test borders.
- ``fit_scaler`` (scaling.py): ``StandardScaler`` fit on the train segment only.
- ``calendar_features`` (calendar.py): timeF calendar features in [-0.5, 0.5].
- ``WindowDataset`` (windows.py): lazy stride-1 windows as dicts of tensors.
- ``registry``: the benchmark datasets (file, URL, sha256, protocol) and where to find them.
- ``CSVDataModule`` (datamodule.py): all of the above as a LightningDataModule.
"""
from . import registry
from .calendar import calendar_feature_names, calendar_features
from .channels import FEATURE_MODES, ChannelSelection, select_channels
from .csv import SeriesTable, infer_freq, read_series
from .datamodule import CSVDataModule
from .errors import ChecksumError, DataError, DataFileNotFoundError, DownloadError, UnknownDatasetError
from .scaling import fit_scaler, inverse_transform_channels
from .splits import SPLIT_PROTOCOLS, SPLITS, SplitBorders, split_borders
from .windows import WindowDataset

__all__ = [
    "FEATURE_MODES",
    "SPLITS",
    "SPLIT_PROTOCOLS",
    "CSVDataModule",
    "ChannelSelection",
    "ChecksumError",
    "DataError",
    "DataFileNotFoundError",
    "DownloadError",
    "SeriesTable",
    "SplitBorders",
    "UnknownDatasetError",
    "WindowDataset",
    "calendar_feature_names",
    "calendar_features",
    "fit_scaler",
    "infer_freq",
    "inverse_transform_channels",
    "read_series",
    "registry",
    "select_channels",
    "split_borders",
]
