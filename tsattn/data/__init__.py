"""tsattn.data: tables and registered datasets -> validated series or observation sets -> batches.

Data flows one way: this package knows nothing of models. The layout:

- ``io/``: reading. ``table`` (the core every reader shares: the table, its time column, timestamps
  and value columns), ``series`` (``read_series``: a regular series), ``observation_table``
  (``read_observations``: irregular observations from a long or wide table), ``readers`` (readers of
  registered observation formats by name), ``physionet`` (the ``"physionet2012"`` format).
- ``windows/``: the window task (a regular grid of rows): ``splits`` (the benchmark borders),
  ``channels`` (``"M"`` / ``"S"`` / ``"MS"``), ``calendar``, ``dataset`` (``WindowDataset``) and
  ``CSVDataModule``.
- ``observations/``: the observation task (each variable at its own times): ``ObservationSet``,
  ``samples`` (forecast origins and splits), ``dataset`` (training samples, inference queries),
  ``requests`` (forecast requests and result tables) and ``ObservationDataModule``.
- ``base`` (``ForecastDataModule``: sources, table options, loaders, the fitted-pipeline record),
  ``scaling`` (one ``Scaler`` for both tasks), ``registry`` (one dataset spec, one resolve / fetch
  path), ``files`` (data folder, cache, checksums, downloads), ``validation``, ``errors``.
"""
from . import registry
from .base import ForecastDataModule
from .errors import ChecksumError, DataError, DataFileNotFoundError, DataWarning, DownloadError, UnknownDatasetError
from .io import SeriesTable, get_reader, read_observations, read_series, register_reader
from .io.physionet import PHYSIONET2012_VARIABLES, load_physionet2012, parse_physionet_archives, read_physionet2012
from .io.series import infer_freq
from .observations.dataset import ForecastSampleDataset, QueryBatches, collate_forecast_samples
from .observations.datamodule import ObservationDataModule
from .observations.observation_set import ObservationSet
from .observations.samples import ForecastSamples, fixed_origin_samples, rolling_origin_samples, split_series
from .scaling import SCALER_KINDS, Scaler, fit_grid_scaler, fit_observation_scaler
from .validation import SPLITS
from .windows.calendar import calendar_feature_names, calendar_features
from .windows.channels import FEATURE_MODES, ChannelSelection, select_channels
from .windows.dataset import WindowDataset
from .windows.datamodule import CSVDataModule
from .windows.splits import SPLIT_PROTOCOLS, SplitBorders, split_borders

VariableScaler = Scaler  # the name of tsattn 0.1's per-variable scaler

__all__ = [
    "FEATURE_MODES",
    "PHYSIONET2012_VARIABLES",
    "SCALER_KINDS",
    "SPLITS",
    "SPLIT_PROTOCOLS",
    "CSVDataModule",
    "ChannelSelection",
    "ChecksumError",
    "DataError",
    "DataFileNotFoundError",
    "DataWarning",
    "DownloadError",
    "ForecastDataModule",
    "ForecastSampleDataset",
    "ForecastSamples",
    "ObservationDataModule",
    "ObservationSet",
    "QueryBatches",
    "Scaler",
    "SeriesTable",
    "SplitBorders",
    "UnknownDatasetError",
    "VariableScaler",
    "WindowDataset",
    "calendar_feature_names",
    "calendar_features",
    "collate_forecast_samples",
    "fit_grid_scaler",
    "fit_observation_scaler",
    "fixed_origin_samples",
    "get_reader",
    "infer_freq",
    "load_physionet2012",
    "parse_physionet_archives",
    "read_observations",
    "read_physionet2012",
    "read_series",
    "register_reader",
    "registry",
    "rolling_origin_samples",
    "select_channels",
    "split_borders",
    "split_series",
]
