"""Lightning: the forecasting LightningModule, callbacks, and the data module (from tsattn.data)."""
from ..data import CSVDataModule
from .callbacks import AttentionSwitch, BestEpochsAverage, EpochTimer, mean_state_dicts
from .module import LOSSES, LR_SCHEDULES, ForecastModule

__all__ = ["AttentionSwitch", "BestEpochsAverage", "CSVDataModule", "EpochTimer", "ForecastModule", "LOSSES", "LR_SCHEDULES",
           "mean_state_dicts"]
