"""Callbacks: switch the attention kind mid-training; time the training epochs."""
from __future__ import annotations

import time

import lightning.pytorch as pl

from ..nn import ATTENTIONS, set_attention


class AttentionSwitch(pl.Callback):
    """Switch every attention layer to ``attention`` at the start of epoch ``epoch`` (0-based).

    Weights, sinks and optimiser state carry over: this is the source post's experiment of moving a
    softmax-trained model to continuous attention part-way. The switch is stored with the layers'
    state, so a checkpoint written after it reloads with the new kind.

    Args:
        epoch: the first epoch trained with the new attention.
        attention: ``"continuous"`` or ``"softmax"``.
    """

    def __init__(self, epoch: int, attention: str = "continuous") -> None:
        if attention not in ATTENTIONS:
            raise ValueError(f"`attention` must be one of {ATTENTIONS}, got {attention!r}")
        if not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"`epoch` must be an integer >= 0, got {epoch!r}")
        self.epoch = epoch
        self.attention = attention

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.current_epoch >= self.epoch:
            n = set_attention(pl_module, self.attention)
            if trainer.current_epoch == self.epoch:
                pl_module.print(f"AttentionSwitch: {n} attention layers now use {self.attention!r} attention")


class EpochTimer(pl.Callback):
    """Wall-clock seconds of every training epoch (the training loop only), in ``seconds``."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._start = 0.0

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.seconds.append(time.perf_counter() - self._start)

    def state_dict(self) -> dict:
        # kept in checkpoints, so that a resumed run reports the timings of all its epochs
        return {"seconds": list(self.seconds)}

    def load_state_dict(self, state_dict: dict) -> None:
        self.seconds = [float(s) for s in state_dict.get("seconds", [])]
