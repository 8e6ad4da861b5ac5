"""Callbacks: switch the attention kind mid-training; time the training epochs; average the best epochs."""
from __future__ import annotations

import copy
import os
import time
from typing import Any, Mapping, Optional, Sequence, Union

import lightning.pytorch as pl
import torch
from lightning.pytorch.trainer.states import TrainerFn

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


def mean_state_dicts(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The entry-wise mean of state dicts of one model: floating tensors averaged in float64 and cast
    back to their dtype; every other entry (counters, integer buffers) taken from the first."""
    if not states:
        raise ValueError("no state dicts to average")
    first = states[0]
    if any(state.keys() != first.keys() for state in states):
        raise ValueError("the state dicts hold different parameters: they are not states of one model")
    out: dict[str, Any] = {}
    for name, value in first.items():
        if torch.is_tensor(value) and value.is_floating_point():
            out[name] = (sum(state[name].double() for state in states) / len(states)).to(value.dtype)
        else:
            out[name] = value
    return out


class BestEpochsAverage(pl.Callback):
    """When training ends, give the model the mean of the weights of its ``k`` best validation epochs.

    After every validation (not the sanity check) the epoch's weights are kept if its ``monitor`` is
    among the ``k`` best so far (a copy on the CPU; ``k`` copies of the weights at most); at the end
    of ``fit`` the module's weights become their entry-wise mean (``mean_state_dicts``). The epochs of
    one run at a constant rate lie close enough to average: on PhysioNet 2012 the mean of the 3 best
    had a lower test MAE than the best epoch in all six runs measured, and a lower MSE on average
    (benchmarks/RESULTS.md, "Checkpoint ensembles"). The kept weights
    travel in the trainer's checkpoints, so a resumed run averages the same epochs. Checkpoint files of
    single epochs (``ModelCheckpoint``) stay single epochs; ``Forecaster.fit(average_best=k)`` keeps
    the mean, and ``save`` writes it; ``save_to`` writes it as a checkpoint when training ends (what
    ``tsattn fit`` needs: ``Forecaster.load`` reads that file).

    Args:
        k: how many of the best epochs to average (1: the best epoch's weights).
        monitor: the logged validation metric that ranks epochs.
        mode: ``"min"`` or ``"max"``: which end of ``monitor`` is best.
        save_to: a file path (``~`` expanded): write the averaged model there as a Lightning checkpoint
            (``trainer.save_checkpoint``) when training ends; None: write nothing.

    Attributes: ``kept`` (score, epoch from 0, weights) best first; ``scores``: every validation's
    (epoch, score); ``averaged_epochs``: the epochs averaged at the end of the last ``fit``.
    """

    def __init__(self, k: int = 3, monitor: str = "val_mse", mode: str = "min",
                 save_to: Optional[Union[str, os.PathLike]] = None) -> None:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"`k` must be an integer >= 1 (how many best epochs to average), got {k!r}")
        if mode not in ("min", "max"):
            raise ValueError(f"`mode` must be 'min' or 'max', got {mode!r}")
        self.k, self.monitor, self.mode = k, monitor, mode
        self.save_to = None if save_to is None else os.path.expanduser(os.fspath(save_to))
        self.kept: list[tuple[float, int, dict[str, torch.Tensor]]] = []
        self.scores: list[tuple[int, float]] = []
        self.averaged_epochs: list[int] = []

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage == "fit":  # a new fit starts empty (a resumed one then restores its state)
            self.kept, self.scores, self.averaged_epochs = [], [], []

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:   # a later validate() ranks nothing
            return
        value = trainer.callback_metrics.get(self.monitor)
        if value is None:
            raise RuntimeError(f"BestEpochsAverage: the monitored metric {self.monitor!r} was not logged "
                               f"(logged: {sorted(trainer.callback_metrics)}); pass monitor= one of them")
        score, epoch = float(value), int(trainer.current_epoch)
        self.scores.append((epoch, score))
        if score != score:  # NaN never ranks among the best
            return
        weights = {name: t.detach().to("cpu", copy=True) if torch.is_tensor(t) else copy.deepcopy(t)
                   for name, t in pl_module.state_dict().items()}
        sign = 1.0 if self.mode == "min" else -1.0
        self.kept = sorted(self.kept + [(score, epoch, weights)], key=lambda row: (sign * row[0], row[1]))[: self.k]

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.kept:
            return
        pl_module.load_state_dict(mean_state_dicts([weights for _, _, weights in self.kept]))
        self.averaged_epochs = [epoch for _, epoch, _ in self.kept]
        if self.save_to is not None:
            os.makedirs(os.path.dirname(os.path.abspath(self.save_to)), exist_ok=True)
            trainer.save_checkpoint(self.save_to)

    def state_dict(self) -> dict:
        return {"kept": [{"score": s, "epoch": e, "weights": w} for s, e, w in self.kept],
                "scores": [list(row) for row in self.scores]}

    def load_state_dict(self, state_dict: dict) -> None:
        self.kept = [(float(row["score"]), int(row["epoch"]), dict(row["weights"])) for row in state_dict.get("kept", [])]
        self.scores = [(int(e), float(s)) for e, s in state_dict.get("scores", [])]
