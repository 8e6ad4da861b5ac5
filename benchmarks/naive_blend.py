"""Does a fitted irregular model gain from being mixed with the last-observation forecast, per variable?

    python benchmarks/naive_blend.py --ckpt A.ckpt B.ckpt C.ckpt [--halvings 20] [--out X.jsonl] [--table X.csv]

Per variable ``v`` the mixed forecast is ``last + alpha_v * (model - last)`` (``alpha_v`` in [0, 1]: 1 is the
model, 0 the last observation, or the variable's mean where the history did not show it; the least-squares
weight on the protocol's scale, clipped). The weights are fit on one half of the split's series (stays) and
the mixed forecast is scored on the other half, then the halves swap, so that no target is scored by weights
fit on it; this is repeated for ``--halvings`` random halvings. The score is the protocol's metric (per
variable the MSE on the fit's scale, then the mean over the variables) over the whole split. The validation
split by default: the analysis reads no test data. Printed: the model's and the last observation's metric,
the mixed forecast's (mean +- std over the halvings), and per variable its share of the gain (``--table``
writes that table as CSV). Frames as ``per_variable.py`` makes them (``--ckpt``: a checkpoint, or several of
one run: the mean of their weights). ``--product-rule`` scores what ``Forecaster.blend_naive`` does instead: a
target whose variable the history did not show keeps the model's forecast, and a variable with fewer than 30
targets in the fitting half keeps the model's.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Optional, Sequence

import numpy as np
import pandas as pd
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.per_variable import load_frames  # noqa: E402
from tsattn.lightning.module import naive_weights  # noqa: E402


def blend_weights(var: np.ndarray, model: np.ndarray, last: np.ndarray, observed: np.ndarray,
                  n_variables: int, min_points: int = 1) -> np.ndarray:
    """Per variable (``var``: codes 0..V-1 per target) the least-squares ``alpha`` of ``last + alpha * (model -
    last)`` against ``observed``, clipped to [0, 1]; 1 (the model) for a variable without targets or where the
    two forecasts agree on every target, or with fewer than ``min_points`` targets (``tsattn``'s ``naive_weights``)."""
    return naive_weights(torch.from_numpy(np.asarray(model - last, dtype=np.float64)),
                         torch.from_numpy(np.asarray(observed - last, dtype=np.float64)),
                         torch.from_numpy(np.asarray(var, dtype=np.int64)), n_variables, min_points).numpy()


def per_variable_mse(var: np.ndarray, forecast: np.ndarray, observed: np.ndarray, n_variables: int) -> np.ndarray:
    """[V] each variable's MSE over its targets (NaN for a variable without targets)."""
    count = np.bincount(var, minlength=n_variables)
    total = np.bincount(var, weights=(forecast - observed) ** 2, minlength=n_variables)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def cross_fitted(var: np.ndarray, series: np.ndarray, model: np.ndarray, last: np.ndarray, observed: np.ndarray,
                 n_variables: int, halvings: int = 20, seed: int = 0, min_points: int = 1) -> dict[str, np.ndarray]:
    """The mixed forecast's per-variable MSE [halvings, V] (each half scored with the weights of the other) and
    the weights [halvings, 2, V]; ``series`` names each target's series (the unit of a half)."""
    rng = np.random.default_rng(seed)
    names = np.unique(series)
    mse, weights = np.zeros((halvings, n_variables)), np.zeros((halvings, 2, n_variables))
    for h in range(halvings):
        first = np.isin(series, rng.permutation(names)[: len(names) // 2])
        mixed = model.copy()
        for j, (fit, score) in enumerate(((first, ~first), (~first, first))):
            weights[h, j] = blend_weights(var[fit], model[fit], last[fit], observed[fit], n_variables, min_points)
            mixed[score] = last[score] + weights[h, j][var[score]] * (model[score] - last[score])
        mse[h] = per_variable_mse(var, mixed, observed, n_variables)
    return {"mse": mse, "weights": weights}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", type=pathlib.Path, nargs="+", required=True)
    parser.add_argument("--split", choices=["train", "val", "test"], default="val")
    parser.add_argument("--halvings", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="of the random halvings")
    parser.add_argument("--tag", default="")
    parser.add_argument("--out", type=pathlib.Path, help="append a JSON line with the figures here")
    parser.add_argument("--table", type=pathlib.Path, help="write the per-variable table as CSV here")
    parser.add_argument("--product-rule", action="store_true",
                        help="ForecastModule.blend_naive's rule: a target whose variable the history did not show "
                             "keeps the model's forecast, a variable with fewer than 30 targets in the fitting half "
                             "keeps weight 1")
    args = parser.parse_args(argv)
    model, data, frames = load_frames(args.ckpt, args.split)
    names = frames["model"][data.variable_column]
    codes, var = np.unique(names.to_numpy(), return_inverse=True)
    scale = names.map(data.scale).to_numpy(dtype=np.float64)
    observed, fm, fl = (frame[column].to_numpy(dtype=np.float64) / scale for frame, column in
                        ((frames["model"], "observed"), (frames["model"], "forecast"), (frames["last_observation"], "forecast")))
    V = len(codes)
    base, last = per_variable_mse(var, fm, observed, V), per_variable_mse(var, fl, observed, V)
    naive, min_points = fl, 1
    if args.product_rule:      # unseen targets: the naive forecast is the model's own, so nothing moves them
        seen = data.observed_in_history(frames["model"], model.lookback).to_numpy(dtype=bool)
        naive, min_points = np.where(seen, fl, fm), 30
    result = cross_fitted(var, frames["model"][data.id_column].to_numpy(), fm, naive, observed, V, args.halvings,
                          args.seed, min_points)
    metric = result["mse"].mean(axis=1)
    gain = (base[None] - result["mse"]) / V
    table = pd.DataFrame({"targets": np.bincount(var, minlength=V), "mse_e3": base * 1e3, "last_e3": last * 1e3,
                          "gain_e3": gain.mean(0) * 1e3, "gain_std_e3": gain.std(0) * 1e3,
                          "weight_mean": result["weights"].mean((0, 1)), "weight_std": result["weights"].std((0, 1))},
                         index=pd.Index(codes, name=data.variable_column)).sort_values("gain_e3", ascending=False)
    total_gain = gain.sum(1).mean()
    record = {"tag": args.tag, "ckpt": [str(p) for p in args.ckpt], "split": args.split, "halvings": args.halvings,
              "product_rule": bool(args.product_rule),
              "seed": args.seed, "model_mse": float(base.mean()), "last_observation_mse": float(last.mean()),
              "mixed_mse_mean": float(metric.mean()), "mixed_mse_std": float(metric.std()),
              "largest_share": {"variable": str(table.index[0]),
                                "share": float(table["gain_e3"].iloc[0] / 1e3 / total_gain) if total_gain > 0 else None}}
    print(f"{args.split}: model {base.mean():.4e}, last observation {last.mean():.4e}, mixed per variable "
          f"(cross-fitted over {args.halvings} halvings) {metric.mean():.4e} +- {metric.std():.1e} "
          f"({metric.mean() / base.mean() - 1:+.2%})")
    print(table.to_string(float_format=lambda v: f"{v:.4g}"))
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(json.dumps(record) + "\n")
    if args.table:
        table.to_csv(args.table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
