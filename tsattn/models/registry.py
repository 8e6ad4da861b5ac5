"""Model registry: the names the CLI, the estimator and save / load use, each with its task.

A model registers itself next to its class::

    @register_model("patchtst", task="window")
    class PatchTST(nn.Module): ...

``task`` says what the model reads and what the rest of the package does with it (``tsattn.tasks``):

- ``"window"``: a regular window ``forward(x [B, L, C], t_x [B, L] | None) -> [B, H, C]``, built as
  ``cls(n_channels, lookback, horizon, attention=, sink=, rope=, **model_kwargs)``; the class says
  whether it is ``channel_independent`` and gives ``training_pairs(x, t_x, y, index)`` (the
  predictions and targets its loss compares);
- ``"observations"``: irregular observation sets ``forward(x_time, x_var, x_value, x_mask, y_time,
  y_var, y_mask) -> [B, Ny]``, built as ``cls(n_variables, attention=, sink=, rope=, **model_kwargs)``.

``tsattn.tasks.WindowModel`` / ``ObservationModel`` write these contracts down as protocols.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar, Union

from torch import nn

__all__ = ["ESTIMATOR_DEFAULTS", "MODELS", "TASKS", "estimator_defaults", "get_model_class", "model_task",
           "model_trainable", "register_model", "unregister_model"]

TASKS = ("window", "observations")
MODELS: dict[str, type[nn.Module]] = {}
# what Forecaster(name) trains with when it is not told: the settings a model's benchmarks use
ESTIMATOR_DEFAULTS = {"attention": "softmax", "sink": "zeros", "rope": False, "lr": 1e-4, "lr_schedule": "type3",
                      "batch_size": 128, "model_kwargs": {}}
_DEFAULTS: dict[str, dict[str, Any]] = {}

M = TypeVar("M", bound=type)


def register_model(name: str, *, task: str, defaults: Optional[dict[str, Any]] = None,
                   trainable: bool = True) -> Callable[[M], M]:
    """Register the decorated class as the model ``name`` of ``task`` (``"window"`` or ``"observations"``).

    ``defaults``: what ``Forecaster(name)`` uses for the settings it is not given (``attention``,
    ``sink``, ``rope``, ``lr``, ``lr_schedule``, ``batch_size``, ``model_kwargs``), over
    ``ESTIMATOR_DEFAULTS``: the configuration the model's benchmarks use, so that a model made with no
    settings is a good one. ``trainable=False``: a reference forecast with no weights to train; a fit
    only sets its statistics (``model.fit_statistics(train_loader, season=dm.season)``).
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}; got {task!r}")
    unknown = sorted(set(defaults or {}) - set(ESTIMATOR_DEFAULTS))
    if unknown:
        raise ValueError(f"defaults {unknown} are not estimator settings; known: {sorted(ESTIMATOR_DEFAULTS)}")

    def register(cls: M) -> M:
        if name in MODELS and MODELS[name] is not cls:
            raise ValueError(f"a model named {name!r} is registered already ({MODELS[name].__name__})")
        cls.task = task
        cls.trainable = trainable
        MODELS[name] = cls
        _DEFAULTS[name] = dict(defaults or {})
        return cls

    return register


def unregister_model(name: str) -> None:
    """Remove the model ``name`` (e.g. one a test registered)."""
    MODELS.pop(name, None)
    _DEFAULTS.pop(name, None)


def model_trainable(name: str) -> bool:
    """Whether the registered model ``name`` has weights to train (False: a reference forecast)."""
    return bool(getattr(get_model_class(name), "trainable", True))


def estimator_defaults(name: str) -> dict[str, Any]:
    """The estimator settings ``Forecaster(name)`` uses when not told (``ESTIMATOR_DEFAULTS`` and the model's)."""
    get_model_class(name)
    return {**ESTIMATOR_DEFAULTS, **_DEFAULTS.get(name, {})}


def get_model_class(name: str) -> type[nn.Module]:
    """The model class registered as ``name``; ValueError listing the known names otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known models: {sorted(MODELS)}") from None


def model_task(model: Union[str, type[nn.Module]]) -> str:
    """The task of a registered model (its name or class): ``"window"`` or ``"observations"``."""
    cls = get_model_class(model) if isinstance(model, str) else model
    task = getattr(cls, "task", None)
    if task not in TASKS:
        raise ValueError(f"{cls.__name__} is not a registered model (register it with @register_model(name, task=...))")
    return task
