"""Where the error is: a fitted irregular model's error per variable beside the last-observation forecast.

    python benchmarks/per_variable.py --ckpt runs/early/physionet2012_irregular_continuous_s1/checkpoints/epoch=4-step=1125.ckpt
    python benchmarks/per_variable.py --ckpt ... --split val --out benchmarks/results/per_variable.csv
    python benchmarks/per_variable.py --ckpt A.ckpt B.ckpt C.ckpt     # one model: the mean of their weights
    python benchmarks/per_variable.py --ckpt ... --by-history          # targets split by a history of their variable

The model forecasts every target of the chosen split's series from the protocol's origin
(``Forecaster.backtest(cutoffs=[origin])``: the data read and scaled the fit's way), and so does the
last-observation forecast (``Forecaster("last_observation")`` fit on the same data: no training). Per
variable: the number of targets, each forecast's MSE on the protocol's scale (the fit's per-variable
scaler, so the numbers add up to the protocol's metric: their mean over variables) and MAE in units, the
model's MSE over the last observation's, and each variable's share of the model's metric. The validation
split by default: the analysis reads no test data. Several checkpoints of one run (e.g. its k best epochs)
give one model whose weights are their mean (``tsattn.lightning.mean_state_dicts``, what
``BestEpochsAverage`` keeps), read with the first checkpoint's settings and data. The reference is fit
with the spans the model's fit was given (the registered protocol's own when none), so that both forecast
the same targets (checked). ``--by-history`` splits each variable's targets in two: those whose series
observed the variable in the history the model read (``_seen``) and the rest (``_unseen``, where the
last-observation forecast is the variable's mean), with each part's share of the metric.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import warnings
from typing import Any, Optional, Sequence

import pandas as pd

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.fit_data import FitData  # noqa: E402


def per_variable(frame: pd.DataFrame, scale: pd.Series, variable: str) -> pd.DataFrame:
    """Per variable: targets, MSE on the scaled data (units / ``scale``), MAE in units."""
    error = frame["forecast"] - frame["observed"]
    table = pd.DataFrame({"variable": frame[variable], "sq": (error / frame[variable].map(scale)) ** 2,
                          "abs": error.abs()})
    out = table.groupby("variable").agg(targets=("sq", "size"), mse=("sq", "mean"), mae_units=("abs", "mean"))
    return out


def compare(frames: dict[str, pd.DataFrame], scale: pd.Series, variable: str) -> pd.DataFrame:
    """The model's table beside the last observation's (``frames``: "model", "last_observation"), and their
    MSE ratio."""
    tables = {name: per_variable(frame, scale, variable) for name, frame in frames.items()}
    out = tables["model"].merge(tables["last_observation"], how="left", left_index=True, right_index=True,
                                suffixes=("", "_last"))
    out["mse_ratio"] = out["mse"] / out["mse_last"]
    return out.drop(columns=["targets_last"])


def by_history(out: pd.DataFrame, frames: dict[str, pd.DataFrame], seen: dict[str, pd.Series], scale: pd.Series,
               variable: str) -> pd.DataFrame:
    """``out`` (the whole split's table) with each variable's targets split by ``seen`` (its series observed it
    in the history, per frame row): per part the columns of ``compare`` and its share of the model's metric
    (the part's squared errors over the variable's targets, over the metric's sum), suffixed ``_seen`` and
    ``_unseen``. The two shares of a variable add up to its ``share_of_metric``."""
    total = out["mse"].sum()
    for part, keep in (("seen", True), ("unseen", False)):
        table = compare({name: frame[seen[name] == keep] for name, frame in frames.items()}, scale, variable)
        table["share_of_metric"] = table["mse"] * table["targets"] / out["targets"].reindex(table.index) / total
        out = out.join(table.add_suffix(f"_{part}"))
    return out


def read_options(model: Any) -> dict[str, Any]:
    """The options ``model`` was fit with that ``Forecaster.fit`` takes (the spans aside: the reference is
    built with the spans the fit was given), so that another model fit with them reads the same data the same way."""
    return {key: value for key, value in model.data_record["options"].items()
            if key in model.task.fit_options and key not in ("lookback", "horizon") and value is not None}


def load_mean(paths: Sequence[pathlib.Path]):
    """``Forecaster.load`` of the first checkpoint, with the mean of all their weights when there are several."""
    import torch

    from tsattn import Forecaster
    from tsattn.lightning import mean_state_dicts

    model = Forecaster.load(paths[0])
    if len(paths) > 1:
        states = [torch.load(path, map_location="cpu", weights_only=True)["state_dict"] for path in paths]
        model.module.load_state_dict(mean_state_dicts(states))
    return model


def forecast_frames(model: Any, data: FitData, split: str) -> dict[str, pd.DataFrame]:
    """The backtest frames (``Forecaster.backtest(cutoffs=data.origins)``) of ``model`` and of the last-observation
    forecast fit on the same data, the rows of ``split``'s series only: {"model": ..., "last_observation": ...},
    row for row the same targets (checked)."""
    from tsattn import Forecaster

    ids = data.series_ids(split)
    options = model.data_record["options"]   # the spans the fit was given (None: the protocol's), so that the
    reference = Forecaster("last_observation", lookback=options.get("lookback"),   # reference reads the same targets
                           horizon=options.get("horizon"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                       # in-sample warnings: the rows are filtered below
        reference.fit(model.data_record["source"], **read_options(model))   # the fit's data, read its way
        frames = {name: f.backtest(cutoffs=data.origins) for name, f in (("model", model), ("last_observation", reference))}
    keys = [data.id_column, data.variable_column, "cutoff", "lead"]
    frames = {name: frame[frame[data.id_column].isin(ids)].sort_values(keys, kind="stable").reset_index(drop=True)
              for name, frame in frames.items()}
    if len(frames["model"]) != len(frames["last_observation"]) or not \
            frames["model"][keys].equals(frames["last_observation"][keys]):
        raise SystemExit(f"the model forecasts {len(frames['model'])} targets and the last observation "
                         f"{len(frames['last_observation'])}: not the same targets")
    return frames


def load_frames(paths: Sequence[pathlib.Path], split: str) -> tuple[Any, FitData, dict[str, pd.DataFrame]]:
    """The model of ``paths`` (``load_mean``), its data (``FitData``) and ``forecast_frames`` on ``split``, with
    one torch thread."""
    import torch

    torch.set_num_threads(1)
    model = load_mean(paths)
    data = FitData.of(model, str(paths[0]))
    return model, data, forecast_frames(model, data, split)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", type=pathlib.Path, nargs="+", required=True,
                        help="a checkpoint, or several of one run: the mean of their weights")
    parser.add_argument("--split", choices=["train", "val", "test"], default="val")
    parser.add_argument("--by-history", action="store_true",
                        help="also split each variable's targets by whether its series observed it in the history "
                             "(columns *_seen and *_unseen; the last observation's forecast of an unseen variable "
                             "is its mean)")
    parser.add_argument("--out", type=pathlib.Path, help="write the table as CSV here too")
    args = parser.parse_args(argv)
    model, data, frames = load_frames(args.ckpt, args.split)
    out = compare(frames, data.scale, data.variable_column)
    out["share_of_metric"] = out["mse"] / out["mse"].sum()
    if args.by_history:
        seen = {name: data.observed_in_history(frame, model.lookback) for name, frame in frames.items()}
        out = by_history(out, frames, seen, data.scale, data.variable_column)
        for part in ("seen", "unseen"):
            weight = out[f"targets_{part}"] / out["targets"]
            last = float((out[f"mse_last_{part}"] * weight).sum())
            ratio = float((out[f"mse_{part}"] * weight).sum()) / last if last > 0 else float("nan")
            print(f"targets whose variable was {'' if part == 'seen' else 'not '}observed in the history: "
                  f"{out[f'share_of_metric_{part}'].sum():.1%} of the metric, the model's MSE {ratio:.3f} x the last "
                  f"observation's there")
    out = out.sort_values("share_of_metric", ascending=False)
    print(f"{' + '.join(map(str, args.ckpt))} on the {args.split} split: the protocol's metric {out['mse'].mean():.4e} "
          f"(last observation {out['mse_last'].mean():.4e})")
    print(out.to_string(float_format=lambda v: f"{v:.4g}"))
    if args.out:
        out.to_csv(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
