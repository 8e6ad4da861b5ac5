"""Tasks: one implementation per kind of input (``window``, ``observations``), behind ``Task``.

``get_task(name)`` gives the task of a registered model's ``task`` (``tsattn.models.registry``).
"""
import inspect
from typing import Any

import lightning.pytorch as pl

from ..data.validation import did_you_mean
from ..models.registry import MODELS, model_task, model_trainable
from .base import Task
from .observations import ObservationModel, ObservationTask
from .window import WindowModel, WindowTask

TASKS: dict[str, Task] = {"window": WindowTask(), "observations": ObservationTask()}
TRAINER_ARGUMENTS = frozenset(inspect.signature(pl.Trainer.__init__).parameters) - {"self"}

__all__ = ["TASKS", "ObservationModel", "ObservationTask", "Task", "WindowModel", "WindowTask", "get_task",
           "split_fit_options", "task_of_model"]


def get_task(name: str) -> Task:
    """The ``Task`` called ``name``."""
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; known tasks: {sorted(TASKS)}") from None


def split_fit_options(task: Task, model: str, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A fit's keyword arguments -> (the data module's options, the Trainer's); an option of another
    task is a ``ValueError``, one that neither takes a ``TypeError`` with a did-you-mean (both
    before any data is read)."""
    mine = task.fit_options
    others = {name for t in TASKS.values() if t is not task for name in t.fit_options} - mine
    wrong = sorted(k for k in options if k in others)
    if wrong:
        models = sorted(n for n in MODELS if model_task(n) != task.name and model_trainable(n))
        raise ValueError(
            f"{wrong} apply to the models {models} (and the other task's reference forecasts) only, not to the "
            f"model {model!r} (the {task.name} task); leave them out"
        )
    unknown = sorted(k for k in options if k not in mine and k not in TRAINER_ARGUMENTS)
    if unknown:
        hint = did_you_mean(unknown[0], mine | TRAINER_ARGUMENTS)
        raise TypeError(
            f"fit() got unexpected keyword argument(s) {unknown}{hint}; it takes the data options {sorted(mine)} "
            "and lightning.pytorch.Trainer's arguments"
        )
    return {k: v for k, v in options.items() if k in mine}, {k: v for k, v in options.items() if k not in mine}


def task_of_model(model: str) -> Task:
    """The ``Task`` of the registered model ``model``."""
    return get_task(model_task(model))
