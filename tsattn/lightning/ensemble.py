"""``combine_modules``: fitted ``ForecastModule``s of one model and settings as one ensemble module.

Separately trained fits of a model (its seeds) err less alike than the members of one ``ensemble=k`` fit,
which share every batch (benchmarks/RESULTS.md, "Ensembles of runs"). Combining them gives the module a
saved ``ensemble=k`` fit would load as: ``ensemble`` = the members' nets in all, each member's weights
and the statistics a fit gave it (``fit_statistics``) as trained, the data's scaling from the first module.
What was fit on a member's forecast after training (the naive blend, the intervals' calibration) is not
carried over: the mean forecast is another forecast, to be blended or calibrated again.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from ..models.ensemble import members_of
from .module import ForecastModule

# settings that may differ between the modules combined: the seed each was trained from, how many nets each has
# and whether they were trained on resampled batches (none changes how a trained net forecasts)
FREE_SETTINGS = ("seed", "ensemble", "bootstrap")
# buffers of adjustments fit on a module's forecast after training: reset in the combined module
AFTER_FIT_BUFFERS = ("naive_weight", "naive_blended", "interval_shift", "interval_floor", "calibrated")


def _differences(first: dict[str, Any], other: dict[str, Any]) -> list[str]:
    keys = sorted((set(first) | set(other)) - set(FREE_SETTINGS))
    return [f"{key}: {first.get(key)!r} against {other.get(key)!r}" for key in keys if first.get(key) != other.get(key)]


def combine_modules(modules: Sequence[ForecastModule]) -> ForecastModule:
    """One module whose forecast is the mean of ``modules``' nets' raw outputs (``models.ensemble.Ensemble``).

    Raises ``ValueError`` for fewer than two modules, or modules whose settings differ in anything but
    ``seed`` and ``ensemble`` (naming the settings).
    """
    modules = list(modules)
    if len(modules) < 2:
        raise ValueError(f"combining needs at least 2 fitted models; got {len(modules)}")
    first = dict(modules[0].hparams)
    for i, module in enumerate(modules[1:], start=2):
        differ = _differences(first, dict(module.hparams))
        if differ:
            raise ValueError(f"model {i} differs from the first in {'; '.join(differ)}: combine fits of one model and "
                             "settings (its seeds, say), each fit on the same data")
    nets = [net for module in modules for net in members_of(module.net)]
    combined = ForecastModule.from_hparams({**first, "ensemble": len(nets)})
    fresh = combined.state_dict()
    state = {key: (fresh[key] if key in AFTER_FIT_BUFFERS else value)
             for key, value in modules[0].state_dict().items() if not key.startswith("net.")}
    for i, net in enumerate(nets):
        state.update({f"net.members.{i}.{key}": value for key, value in net.state_dict().items()})
    combined.load_state_dict(state)
    with torch.no_grad():  # statistics of the data kept outside the checkpoint (the MASE denominators)
        for name, buffer in modules[0].named_buffers(recurse=False):
            if name not in fresh:
                getattr(combined, name).copy_(buffer)
    return combined.to(next(modules[0].parameters()).device)


__all__ = ["combine_modules"]
