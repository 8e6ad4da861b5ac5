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

Irregular series (each variable observed at its own times; nothing is imputed):

- ``ObservationSet`` / ``read_observations`` (observations.py): long or wide tables -> observations
  in a CSR layout (series -> time, variable, value).
- ``load_physionet2012`` (physionet.py): the PhysioNet 2012 archives, parsed once and cached.
- ``fixed_origin_samples`` / ``rolling_origin_samples`` / ``split_series`` (forecast_samples.py):
  forecasting samples (series, origin) and their split by series or by time.
- ``fit_variable_scaler`` (variable_scaling.py): per-variable min-max / standard scaling.
- ``ObservationDataModule`` (observation_datamodule.py): all of that as a LightningDataModule
  yielding padded, masked batches.
"""
from . import registry
from .calendar import calendar_feature_names, calendar_features
from .channels import FEATURE_MODES, ChannelSelection, select_channels
from .csv import SeriesTable, infer_freq, read_series
from .datamodule import CSVDataModule
from .errors import ChecksumError, DataError, DataFileNotFoundError, DownloadError, UnknownDatasetError
from .forecast_samples import ForecastSamples, fixed_origin_samples, rolling_origin_samples, split_series
from .observation_datamodule import ForecastSampleDataset, ObservationDataModule, collate_forecast_samples
from .observations import ObservationSet, read_observations
from .physionet import PHYSIONET2012_VARIABLES, load_physionet2012, parse_physionet_archives
from .scaling import fit_scaler, inverse_transform_channels
from .splits import SPLIT_PROTOCOLS, SPLITS, SplitBorders, split_borders
from .variable_scaling import VariableScaler, fit_variable_scaler
from .windows import WindowDataset

__all__ = [
    "FEATURE_MODES",
    "PHYSIONET2012_VARIABLES",
    "SPLITS",
    "SPLIT_PROTOCOLS",
    "CSVDataModule",
    "ChannelSelection",
    "ChecksumError",
    "DataError",
    "DataFileNotFoundError",
    "DownloadError",
    "ForecastSampleDataset",
    "ForecastSamples",
    "ObservationDataModule",
    "ObservationSet",
    "SeriesTable",
    "SplitBorders",
    "UnknownDatasetError",
    "VariableScaler",
    "WindowDataset",
    "calendar_feature_names",
    "calendar_features",
    "collate_forecast_samples",
    "fit_scaler",
    "fit_variable_scaler",
    "fixed_origin_samples",
    "infer_freq",
    "inverse_transform_channels",
    "load_physionet2012",
    "parse_physionet_archives",
    "read_observations",
    "read_series",
    "registry",
    "rolling_origin_samples",
    "select_channels",
    "split_borders",
    "split_series",
]
