"""Checkpoint files of fitted models: written atomically, read with ``weights_only=True``.

A checkpoint is a dict: ``state_dict`` and ``hyper_parameters`` (Lightning's: ``ForecastModule``
reads it with ``load_from_checkpoint``), the data module's record under its class name (what
Lightning's own checkpoints hold; ``tsattn.data.base.find_record``), ``tsattn_forecaster`` (the
estimator's own settings) and ``pytorch-lightning_version``. Files written by ``tsattn fit``'s
``ModelCheckpoint`` and by tsattn 0.1 read the same way.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Optional, Union

import lightning
import torch

from .data.base import find_record
from .lightning import ForecastModule

__all__ = ["read_checkpoint", "write_checkpoint"]


def write_checkpoint(path: Union[str, os.PathLike], module: ForecastModule, record: Optional[dict[str, Any]],
                     record_key: str, estimator: dict[str, Any]) -> Path:
    """Write ``module``'s weights and hyperparameters, the data ``record`` (under ``record_key``) and the
    ``estimator`` settings to ``path`` (``~`` expanded), through a temporary file beside it."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a directory; give a file name such as 'model.ckpt'")
    if not path.parent.exists():
        raise ValueError(f"the folder {str(path.parent)!r} does not exist; create it first")
    checkpoint = {"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams), record_key: record,
                  "tsattn_forecaster": estimator, "pytorch-lightning_version": lightning.__version__}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(checkpoint, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def read_checkpoint(path: Union[str, os.PathLike], map_location: str = "cpu") -> tuple[
        ForecastModule, dict[str, Any], Optional[dict[str, Any]], dict[str, Any]]:
    """``(module, hyperparameters, data record or None, estimator settings)`` of a checkpoint.

    Raises ``FileNotFoundError`` (no file at ``path``) or ``ValueError`` (not a tsattn checkpoint:
    text, CSV, truncated, another model's).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {str(path)!r}")
    not_ours = (f"{str(path)!r} is not a tsattn checkpoint; pass a file written by Forecaster.save() or by "
                "a ModelCheckpoint while training a ForecastModule (e.g. `tsattn fit`)")
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # text, CSV, truncated zip, foreign pickle: all mean the same to the user
        raise ValueError(f"{not_ours} (it could not be read as a PyTorch checkpoint: {type(exc).__name__})") from None
    hp = checkpoint.get("hyper_parameters") if isinstance(checkpoint, dict) else None
    if not isinstance(hp, dict) or "model" not in hp or not isinstance(checkpoint.get("state_dict"), dict):
        raise ValueError(f"{not_ours} (it is a PyTorch file without a tsattn model's hyperparameters and weights)")
    try:
        module = ForecastModule.from_hparams(hp)
        module.load_state_dict(checkpoint["state_dict"])
    except (RuntimeError, ValueError, TypeError) as exc:
        raise ValueError(f"{not_ours} (its weights do not fit the model it describes: {exc})") from None
    module.to(map_location)
    return module, hp, find_record(checkpoint), checkpoint.get("tsattn_forecaster") or {}
