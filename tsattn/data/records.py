"""Checkpoints of tsattn 0.1 kept what the fit learnt under ``"tsattn_data_info"``, in one schema per
task; ``record_from_legacy`` turns either into the data-pipeline record of ``ForecastDataModule``
(version 1), so that those checkpoints load and forecast as before.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from .base import RECORD_FORMAT

__all__ = ["record_from_legacy"]

_WINDOW_READING = ("features", "target", "split", "columns", "time_column", "time_format", "dayfirst", "na_values",
                   "thousands", "sep", "sort", "missing", "duplicates", "knot_times", "calendar_features",
                   "calendar_freq", "scale")
_TABLE = ("columns", "time_column", "time_format", "dayfirst", "na_values", "thousands", "sep", "sort")


def record_from_legacy(info: dict[str, Any], checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The version-1 record of a tsattn 0.1 ``tsattn_data_info`` (``checkpoint`` gives the spans and
    batch size that schema kept elsewhere)."""
    if info.get("kind") == "observations":
        task, options, fitted, batch_size = "observations", *_observation_parts(info)
    else:
        task, options, fitted, batch_size = "window", *_window_parts(info, checkpoint)
    extra = checkpoint.get("tsattn_forecaster") or {}
    return {"format": RECORD_FORMAT, "version": 1, "task": task, "source": info.get("source"), "options": options,
            "fitted": fitted, "batch_size": int(batch_size or extra.get("batch_size") or 128)}


def _window_parts(info: dict[str, Any], checkpoint: dict[str, Any]) -> tuple[dict, dict, Any]:
    hparams = info.get("datamodule") or {}
    module = checkpoint.get("hyper_parameters") or {}
    reading = info.get("read_options") or {}
    options = {"lookback": hparams.get("lookback", module.get("lookback")),
               "horizon": hparams.get("horizon", module.get("horizon")),
               **{k: reading[k] for k in _WINDOW_READING if k in reading}}
    channels = list(info["channel_names"])
    scaler = None
    if info.get("scaler_mean") is not None:
        scaler = {"kind": "standard", "names": channels, "offset": list(info["scaler_mean"]),
                  "scale": list(info["scaler_scale"])}
    fitted = {"channels": channels, "targets": list(info["target_names"]), "target_index": list(info["target_index"]),
              "scaler": scaler, "time_unit_ns": info.get("time_unit_ns"), "freq": info.get("freq"),
              "time_column": info.get("time_column")}
    return options, fitted, hparams.get("batch_size")


def _observation_parts(info: dict[str, Any]) -> tuple[dict, dict, Any]:
    reading, sampling = dict(info["read_options"]), dict(info["sampling"])
    descriptors = reading.get("unknown_descriptors")
    options = {
        "origins": sampling.get("origins"), "origin_stride": sampling.get("origin_stride"),
        "lookback": sampling.get("history"), "horizon": sampling.get("horizon"), "split": sampling.get("split"),
        "split_fractions": sampling.get("split_fractions"), "split_seed": sampling.get("split_seed"),
        "scaler": sampling.get("scaler"), "scale_from": sampling.get("scale_from"),
        "variables": reading.get("variables"), "max_series": reading.get("max_series"),
        "subsample": reading.get("subsample"), "subsample_by": reading.get("subsample_by", "time"),
        "subsample_seed": reading.get("subsample_seed", 0),
        **{k: reading.get(k) for k in _TABLE}, "sep": reading.get("sep") or ",", "sort": bool(reading.get("sort")),
        "id_column": reading.get("id_column"), "variable_column": reading.get("variable_column"),
        "value_column": reading.get("value_column"),
        "time_unit": str(pd.Timedelta(int(info["time_unit_ns"]), unit="ns")),
        "duplicates": reading.get("duplicates") or "mean",
        "reader_options": {} if descriptors is None else {"unknown_descriptors": descriptors},
    }
    scaler = dict(info["scaler"])
    fitted = {
        "variables": list(info["variables"]),
        "scaler": {"kind": scaler["kind"], "names": list(scaler["variables"]), "offset": list(scaler["offset"]),
                   "scale": list(scaler["scale"]), "statistics": scaler.get("statistics")},
        "time_unit_ns": int(info["time_unit_ns"]), "times": info["times"], "columns": dict(info["columns"]),
        "horizon": float(info["horizon"]),
    }
    return options, fitted, info.get("batch_size")
