"""One training run of a ``ForecastModule`` on a data module: the callbacks, the Trainer, the weights kept.

``Forecaster.fit`` trains through ``train``: a ``ModelCheckpoint`` on the validation MSE (the best epoch's
weights are loaded back when training ends, unless ``BestEpochsAverage`` left the mean of the best
epochs' weights in the module), optional early stopping, and a temporary run folder removed afterwards
unless ``default_root_dir`` is given (nothing is written to the working directory).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

from .callbacks import BestEpochsAverage

__all__ = ["TrainedRun", "accelerator_name", "train"]


@dataclass
class TrainedRun:
    """What ``train`` leaves besides the module's weights."""

    trainer: pl.Trainer
    best_model_path: Optional[str]   # the best epoch's checkpoint, where the run folder is kept
    accelerator: str                 # the accelerator it ran on, as a ``Trainer(accelerator=...)`` string


def accelerator_name(trainer: pl.Trainer) -> str:
    """The accelerator a trainer ran on, as a ``Trainer(accelerator=...)`` string (``"cpu"``, ``"cuda"``, ...)."""
    name = type(trainer.accelerator).__name__.removesuffix("Accelerator").lower()
    return {"xla": "tpu"}.get(name, name) or "auto"


def train(module: pl.LightningModule, datamodule: pl.LightningDataModule, *, max_epochs: int,
          patience: Optional[int] = None, callbacks: Optional[list[pl.Callback]] = None,
          default_root_dir: Optional[Union[str, os.PathLike]] = None, enable_checkpointing: bool = True,
          **trainer_kwargs: Any) -> TrainedRun:
    """Train ``module`` on ``datamodule`` for at most ``max_epochs``, then leave in it the weights of the
    best validation epoch (``val_mse``), the mean that a ``BestEpochsAverage`` among ``callbacks`` made, or,
    with ``enable_checkpointing=False``, the last epoch's. ``patience``: early stopping on ``val_mse``.
    ``trainer_kwargs`` go to ``lightning.pytorch.Trainer`` (``deterministic`` defaults to True)."""
    all_callbacks = list(callbacks or [])
    checkpoint = None
    if enable_checkpointing:
        checkpoint = ModelCheckpoint(monitor="val_mse", mode="min", save_top_k=1, filename="best-{epoch}")
        all_callbacks.insert(0, checkpoint)
    if patience is not None:
        all_callbacks.append(EarlyStopping(monitor="val_mse", mode="min", patience=patience))
    keep = default_root_dir is not None
    trainer_kwargs.setdefault("deterministic", True)
    accelerator = trainer_kwargs.setdefault("accelerator", "auto")
    with contextlib.ExitStack() as scratch:
        root = os.fspath(Path(default_root_dir).expanduser()) if keep else scratch.enter_context(
            tempfile.TemporaryDirectory(prefix="tsattn-fit-"))
        trainer = pl.Trainer(max_epochs=max_epochs, callbacks=all_callbacks, default_root_dir=root,
                             enable_checkpointing=enable_checkpointing, **trainer_kwargs)
        trainer.fit(module, datamodule=datamodule)
        averaged = any(isinstance(c, BestEpochsAverage) and c.averaged_epochs for c in all_callbacks)
        if checkpoint is not None and checkpoint.best_model_path and not averaged:   # the mean stays
            best = torch.load(checkpoint.best_model_path, map_location="cpu", weights_only=True)
            module.load_state_dict(best["state_dict"])
        best_model_path = checkpoint.best_model_path if keep and checkpoint is not None else None
    ran_on = accelerator if isinstance(accelerator, str) and accelerator != "auto" else accelerator_name(trainer)
    return TrainedRun(trainer=trainer, best_model_path=best_model_path, accelerator=ran_on)
