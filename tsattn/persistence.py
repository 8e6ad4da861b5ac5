"""Saving, loading and combining fitted ``Forecaster``s (``tsattn.api``): the estimator's side of the
checkpoint files of ``tsattn.checkpoints``."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Sequence, TypeVar, Union

from .checkpoints import read_checkpoint, write_checkpoint
from .lightning import ForecastModule
from .lightning.ensemble import combine_modules

# settings a checkpoint's hyperparameters hold since a later version (older files: the defaults)
LATER_SETTINGS = ("optimizer", "weight_decay", "huber_delta", "pct_start", "loss_reduction", "ensemble",
                  "bootstrap")
F = TypeVar("F", bound="Persistence")


class Persistence:
    """``save``, ``load`` and ``combine`` of ``tsattn.Forecaster`` (a base class of it: the methods read its
    fitted module, data record and settings)."""

    def save(self, path: Union[str, os.PathLike]) -> Path:
        """Write a Lightning checkpoint (weights, hyperparameters, the data record) to ``path``,
        atomically. ``~`` is expanded. ``ForecastModule.load_from_checkpoint(path)`` reads it too."""
        estimator = {"lookback": self.lookback, "horizon": self.horizon, "given_spans": list(self._given_spans),
                     "batch_size": self.batch_size, "seed": self.seed}
        return write_checkpoint(path, self._require_fit(), self.data_record, self.task.datamodule_class.__qualname__,
                                estimator)

    @classmethod
    def load(cls: type[F], path: Union[str, os.PathLike], map_location: str = "cpu") -> F:
        """A Forecaster from a checkpoint written by ``save`` (or by a ``ModelCheckpoint`` while
        training a ``ForecastModule``, e.g. ``tsattn fit``; also tsattn 0.1's). ``~`` is expanded; the
        file is read with ``weights_only=True``. Raises ``FileNotFoundError`` or ``ValueError`` (not a
        tsattn checkpoint: text, CSV, truncated, another model's)."""
        module, hp, record, extra = read_checkpoint(path, map_location)
        return cls._of(module, hp, record, extra)

    @classmethod
    def combine(cls: type[F], forecasters: Sequence[F]) -> F:
        """One Forecaster that forecasts the mean of fitted ones' forecasts: separately trained fits of one
        model and settings (seeds), fit on the same data, as one model that predicts, evaluates, backtests,
        saves and loads as an ``ensemble=k`` fit does (``k``: their nets in all). Their naive blends and
        calibrations are not carried over: call ``blend_naive()`` / ``calibrate()`` on the result. Raises
        ``ValueError`` for fewer than two, settings that differ (other than ``seed``, ``ensemble`` and ``bootstrap``) or
        other data, ``RuntimeError`` for one not fit."""
        forecasters = list(forecasters)
        if not all(isinstance(f, cls) for f in forecasters):
            raise TypeError("Forecaster.combine takes a list of fitted Forecasters")
        modules = [f._require_fit() for f in forecasters]
        first = forecasters[0]
        for i, f in enumerate(forecasters[1:], start=2):
            if f.data_record != first.data_record:
                raise ValueError(f"forecaster {i} was fit on other data than the first (their data records differ): "
                                 "combine fits of the same data")
        module = combine_modules(modules)
        extra = {"given_spans": list(first._given_spans), "batch_size": first.batch_size, "seed": first.seed}
        f = cls._of(module, dict(module.hparams), first.data_record, extra)
        f.datamodule = first.datamodule
        return f

    @classmethod
    def _of(cls: type[F], module: ForecastModule, hp: dict[str, Any], record: Optional[dict[str, Any]],
            extra: dict[str, Any]) -> F:
        """A fitted Forecaster around ``module`` (its settings ``hp``, the fit's data ``record``, the saved
        Forecaster's own settings ``extra``)."""
        seed = extra.get("seed") if extra.get("seed") is not None else hp.get("seed")
        f = cls(hp["model"], attention=hp["attention"], sink=hp["sink"], rope=hp["rope"], lookback=hp["lookback"],
                horizon=hp["horizon"], model_kwargs=hp["model_kwargs"], loss=hp["loss"], lr=hp["lr"],
                lr_schedule=hp["lr_schedule"], compile=hp["compile"], quantiles=hp.get("quantiles"),
                **{k: hp[k] for k in LATER_SETTINGS if k in hp},
                batch_size=extra.get("batch_size") or (record or {}).get("batch_size") or 128,
                seed=2021 if seed is None else seed)
        f.config["model_kwargs"] = hp["model_kwargs"]  # as fit (no model defaults added that it was fit without)
        if "given_spans" in extra:  # a refit samples as the saved Forecaster's would (older files: the fit's spans)
            f._given_spans = tuple(extra["given_spans"])
        if record is not None:  # the spans the data gave the fit (a protocol's horizon, say)
            options, fitted = record["options"], record["fitted"]
            f._lookback = options.get("lookback", f._lookback)
            f._horizon = fitted.get("horizon", options.get("horizon", f._horizon))
        f.module, f._record = module, record
        return f


__all__ = ["Persistence", "LATER_SETTINGS"]
