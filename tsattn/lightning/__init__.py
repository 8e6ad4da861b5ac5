"""Lightning: the forecasting LightningModule, callbacks, and the data module (from tsattn.data)."""
from ..data import CSVDataModule
from .callbacks import AttentionSwitch, EpochTimer
from .module import LOSSES, LR_SCHEDULES, ForecastModule

__all__ = ["AttentionSwitch", "CSVDataModule", "EpochTimer", "ForecastModule", "LOSSES", "LR_SCHEDULES"]
