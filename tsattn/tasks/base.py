"""``Task``: everything that differs between kinds of input, behind one small interface.

A registered model names its task (``tsattn.models.registry``); the estimator (``Forecaster``), the
LightningModule (``ForecastModule``) and the CLI ask the task and never the model's kind:

- the data: which options a fit reads (``fit_options``), the fit's data module (``fit_datamodule``,
  set up), what the model is built from (``module_facts``), the span checks (``check_span``);
- the model: building the net (``build_net``), its forward on a batch, the training loss, the
  metrics (a ``ModuleDict`` of torchmetrics) and their epoch values, turning outputs back into
  units, a context for the forward and backward passes;
- forecasting: a fitted module and a data module -> a DataFrame (``forecast``).

One implementation per task: ``WindowTask`` (``tsattn.tasks.window``) and ``ObservationTask``
(``tsattn.tasks.observations``). A third kind of input is a third ``Task`` and a registration, not
a branch in every class.
"""
from __future__ import annotations

import contextlib
import inspect
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Optional

import pandas as pd
import torch
from torch import Tensor, nn

from ..data.base import ForecastDataModule

if TYPE_CHECKING:  # the LightningModule imports this package
    from ..lightning.module import ForecastModule

__all__ = ["Task", "data_options"]

# data-module arguments the estimator sets itself (the spans, batches, seeds, workers) or that are objects
_NOT_FIT_OPTIONS = ("self", "data", "lookback", "horizon", "history", "scaler", "batch_size", "num_workers",
                    "pin_memory", "drop_last_train", "seed", "kwargs")


def data_options(cls: type[ForecastDataModule]) -> frozenset[str]:
    """The reading and sampling options of a data module class (its and its bases' keyword arguments,
    less what the estimator sets itself)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if issubclass(klass, ForecastDataModule):
            names.update(inspect.signature(klass.__init__).parameters)
    return frozenset(names.difference(_NOT_FIT_OPTIONS))


class Task:
    """One kind of input and output. Subclasses set ``name`` and ``datamodule_class`` and implement the
    methods below; ``ForecastModule`` passes itself as ``module`` (its ``net``, ``hparams``, the
    output scaler buffers ``y_mean`` / ``y_scale`` and ``output_index``)."""

    name: ClassVar[str]
    datamodule_class: ClassVar[type[ForecastDataModule]]
    supports_compile: ClassVar[bool] = True

    # -- the data ----------------------------------------------------------------------------------------
    @property
    def fit_options(self) -> frozenset[str]:
        """The keyword arguments of ``Forecaster.fit`` that go to this task's data module."""
        return data_options(self.datamodule_class)

    def check_span(self, name: str, value: Any) -> Any:
        """``lookback`` / ``horizon`` as the estimator takes them (its default for None)."""
        raise NotImplementedError

    def fit_datamodule(self, data: Any, *, lookback: Any, horizon: Any, batch_size: int, seed: int,
                       **options: Any) -> ForecastDataModule:
        """The fit's data module over ``data``, read, sampled and scaled (``setup`` done, so that bad
        data fails before a model is built)."""
        raise NotImplementedError

    def module_facts(self, dm: ForecastDataModule) -> dict[str, Any]:
        """What ``ForecastModule`` is built from: ``n_channels``, ``lookback``, ``horizon``, ``target_index``."""
        return {"n_channels": dm.n_channels_in, "lookback": dm.lookback, "horizon": dm.horizon,
                "target_index": dm.target_index}

    def on_fit_setup(self, module: "ForecastModule", dm: ForecastDataModule) -> None:
        """Called when a fit sets up (warnings about the data and model together)."""

    # -- the model ---------------------------------------------------------------------------------------
    def check_hparams(self, hparams: Any) -> None:
        """Raise ``ValueError`` for settings this task does not take."""

    def build_net(self, cls: type[nn.Module], hparams: Any) -> nn.Module:
        raise NotImplementedError

    def n_outputs(self, hparams: Any) -> int:
        """Output channels (variables): the length of the output scaler."""
        return len(hparams.target_index) if hparams.target_index is not None else hparams.n_channels

    def forward(self, module: "ForecastModule", batch: dict[str, Tensor]) -> Tensor:
        """A batch -> the model's forecasts of its targets, in scaled units."""
        raise NotImplementedError

    def training_loss(self, module: "ForecastModule", batch: dict[str, Tensor]) -> Tensor:
        raise NotImplementedError

    def batch_size(self, batch: dict[str, Tensor]) -> int:
        raise NotImplementedError

    def metrics(self, n_outputs: int) -> nn.ModuleDict:
        raise NotImplementedError

    def update_metrics(self, module: "ForecastModule", batch: dict[str, Tensor], metrics: nn.ModuleDict) -> None:
        raise NotImplementedError

    def compute_metrics(self, metrics: nn.ModuleDict) -> dict[str, Tensor]:
        """``{"mse", "mae", "mse_orig", "mae_orig"}`` over everything ``update_metrics`` saw."""
        raise NotImplementedError

    def to_original(self, module: "ForecastModule", pred: Tensor, batch: dict[str, Tensor]) -> Tensor:
        """Scaled forecasts of ``batch``'s targets -> original units."""
        raise NotImplementedError

    @contextlib.contextmanager
    def context(self) -> Iterator[None]:
        """Around the forward and backward passes (nothing by default)."""
        yield

    # -- forecasting ------------------------------------------------------------------------------------
    def check_request(self, *, at: Optional[Any] = None, origin: Optional[Any] = None) -> None:
        """Raise for request arguments this task does not take (before anything is read)."""

    def forecast(self, module: "ForecastModule", dm: ForecastDataModule, *, at: Optional[Any] = None,
                 origin: Optional[Any] = None) -> pd.DataFrame:
        """Forecasts in original units, as a DataFrame in the data's layout (see ``Forecaster.predict``)."""
        raise NotImplementedError


def point_loss(kind: str, pred: Tensor, target: Tensor, huber_delta: float) -> Tensor:
    """Elementwise loss ``kind`` (``"mse"``, ``"mae"``, ``"huber"``) of ``pred`` against ``target``."""
    if kind == "mae":
        return (pred - target).abs()
    if kind == "huber":
        return torch.nn.functional.huber_loss(pred, target, delta=huber_delta, reduction="none")
    return (pred - target).square()
