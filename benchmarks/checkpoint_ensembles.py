"""Checkpoint ensembles of finished irregular runs: the best epoch against the mean of the k best epochs.

    python benchmarks/run_protocol.py --config configs/physionet2012/irregular_continuous.yaml --seed S \
        --keep-checkpoints --no-test --threads 1 --resume --runs-dir runs/keep        # every epoch's checkpoint
    python benchmarks/checkpoint_ensembles.py runs/keep/physionet2012_irregular_continuous_s1 \
        runs/keep/physionet2012_irregular_continuous_s2 --k 3 --out benchmarks/results/checkpoint_ensembles.jsonl
    # the same with --test: the test split too (read once, for variants fixed beforehand on validation)

Each run folder must hold the checkpoints ``run_protocol.py --keep-checkpoints`` writes, one per epoch, named
``epoch=E-val_mse=V.ckpt``; they are ranked by that validation MSE. Per run, three forecasts of every target:
``best epoch`` (what the protocol tests), ``prediction mean`` (the forecasts of the k best epochs averaged)
and ``weight mean`` (one model whose weights are the k best epochs' averaged: what
``tsattn.lightning.BestEpochsAverage`` and ``Forecaster.fit(average_best=k)`` give when training ends). With more than one run (seeds
of one model), also the mean over the runs of each run's best-epoch forecast and of each run's prediction
mean. Every forecast is ``Forecaster.backtest(cutoffs=origins)`` over all series of the fit's data (the
data read and scaled the fit's way, the protocol's origins); metrics per split: the protocol's, per
variable over every target, MSE and MAE on the scaled data, then the mean over variables. The validation
split by default; ``--test`` adds the test split. Nothing is trained.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
import time
import warnings
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.fit_data import FitData  # noqa: E402
from benchmarks.run_protocol import git_commit  # noqa: E402
from tsattn.metrics import backtest_metrics  # noqa: E402

_NAME = re.compile(r"^epoch=(\d+)-val_mse=([0-9.eE+-]+)\.ckpt$")


def ranked_checkpoints(run_dir: pathlib.Path) -> list[tuple[float, int, pathlib.Path]]:
    """(val MSE, epoch from 1, path) of each kept checkpoint under ``run_dir``, best first."""
    rows = []
    for path in pathlib.Path(run_dir).rglob("*.ckpt"):
        match = _NAME.match(path.name)
        if match:
            rows.append((float(match.group(2)), int(match.group(1)) + 1, path))
    if not rows:
        raise SystemExit(f"{run_dir}: no checkpoints named epoch=E-val_mse=V.ckpt; train the run with "
                         f"run_protocol.py --keep-checkpoints, which keeps one per epoch under these names")
    return sorted(rows, key=lambda row: (row[0], row[1]))


def protocol_metrics(forecast: np.ndarray, observed: np.ndarray, scale: np.ndarray,
                     variable: np.ndarray) -> dict[str, float]:
    """MSE and MAE on the scaled data (forecast and observed / each target's variable scale): per variable,
    then the mean over variables (``tsattn.metrics.backtest_metrics(per_variable=True)``)."""
    frame = pd.DataFrame({"variable": variable, "forecast": np.asarray(forecast, dtype=np.float64) / scale,
                          "observed": np.asarray(observed, dtype=np.float64) / scale})
    metrics = backtest_metrics(frame, per_variable=True).iloc[0]
    return {"mse": float(metrics["mse"]), "mae": float(metrics["mae"])}


class _Targets:
    """Every target of the fit's data at the protocol's origins, and which split each belongs to."""

    def __init__(self, checkpoint: pathlib.Path, splits: Sequence[str]) -> None:
        from tsattn import Forecaster

        self.forecaster = Forecaster.load(checkpoint)
        data = FitData.of(self.forecaster, str(checkpoint))      # every backtest reuses the data read once
        self.origins, self.id_column, self.variable_column = data.origins, data.id_column, data.variable_column
        frame = self._backtest()
        self.key = frame[[self.id_column, self.variable_column]].to_numpy()
        self.observed = frame["observed"].to_numpy(np.float64)
        self.variable = frame[self.variable_column].to_numpy()
        self.scale = frame[self.variable_column].map(data.scale).to_numpy()
        self.masks = {split: frame[self.id_column].isin(data.series_ids(split)).to_numpy() for split in splits}

    def _backtest(self) -> pd.DataFrame:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")                       # in-sample warnings: the train series
            return self.forecaster.backtest(cutoffs=self.origins).reset_index(drop=True)

    def forecast(self, state_dict: dict[str, Any]) -> np.ndarray:
        self.forecaster.module.load_state_dict(state_dict)
        frame = self._backtest()
        if len(frame) != len(self.key) or not (frame[[self.id_column, self.variable_column]].to_numpy()
                                                == self.key).all():
            raise SystemExit("a checkpoint's forecasts do not line up with the first's: runs of other data")
        return frame["forecast"].to_numpy(np.float64)

    def metrics(self, forecast: np.ndarray) -> dict[str, float]:
        out = {}
        for split, mask in self.masks.items():
            for name, value in protocol_metrics(forecast[mask], self.observed[mask], self.scale[mask],
                                                self.variable[mask]).items():
                out[f"{split}_{name}"] = value
        return out


def evaluate(runs: Sequence[pathlib.Path], k: int, splits: Sequence[str]) -> list[dict[str, Any]]:
    """The records (see the module docstring) of ``runs``, k best epochs each."""
    import torch

    from tsattn.lightning import mean_state_dicts

    if k < 1:
        raise SystemExit(f"--k wants 1 or more; got {k}")
    ranked = {run: ranked_checkpoints(run)[:k] for run in runs}
    targets = _Targets(ranked[runs[0]][0][2], splits)
    records, best, means = [], [], []
    for run in runs:
        rows = ranked[run]
        states = [torch.load(path, map_location="cpu", weights_only=True)["state_dict"] for _, _, path in rows]
        forecasts = [targets.forecast(state) for state in states]
        variants = {"best epoch": (forecasts[0], rows[:1]), "prediction mean": (np.mean(forecasts, axis=0), rows),
                    "weight mean": (targets.forecast(mean_state_dicts(states)), rows)}
        for variant, (forecast, used) in variants.items():
            records.append({"run": pathlib.Path(run).name, "variant": variant, "k": len(used),
                            "epochs": [epoch for _, epoch, _ in used],
                            "logged_val_mse": [value for value, _, _ in used], **targets.metrics(forecast)})
        best.append(forecasts[0])
        means.append(variants["prediction mean"][0])
    if len(runs) > 1:
        for variant, forecasts in (("runs: best epochs", best), ("runs: prediction means", means)):
            records.append({"run": "+".join(pathlib.Path(run).name for run in runs), "variant": variant,
                            "k": k, "epochs": None, "logged_val_mse": None,
                            **targets.metrics(np.mean(forecasts, axis=0))})
    return records


def main(argv: Optional[Sequence[str]] = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=pathlib.Path, help="run folders of run_protocol.py --keep-checkpoints")
    parser.add_argument("--k", type=int, default=3, help="the k best epochs of each run (default 3)")
    parser.add_argument("--test", action="store_true", help="the test split too (fix the variants on validation first)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--tag", default="", help="free text stored with each record")
    parser.add_argument("--out", type=pathlib.Path, help="append the records here as JSON lines")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    stamp = {"commit": git_commit(),           # the code this evaluation imports: taken before HEAD may move
             "command": " ".join(["checkpoint_ensembles.py", *(sys.argv[1:] if argv is None else argv)]),
             "date": time.strftime("%Y-%m-%d %H:%M"), "tag": args.tag}
    records = evaluate(args.runs, args.k, ["val", "test"] if args.test else ["val"])
    for record in records:
        record.update(stamp)
        print(json.dumps(record))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "a") as fh:
            fh.writelines(json.dumps(record) + "\n" for record in records)
    return records


if __name__ == "__main__":
    main()
