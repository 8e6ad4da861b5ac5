"""Interval coverage and the point forecast's cost: quantile models beside their point twins.

    python benchmarks/coverage.py                       # ETTh1 (H = 96) and PhysioNet 2012, both attentions
    python benchmarks/coverage.py --datasets ETTh1 --attentions continuous --epochs-ETTh1 3
    python benchmarks/coverage.py --table               # the table of what is recorded

For each (dataset, attention) it trains the protocol's config twice under the same budget and seed
(``run_protocol.py --resume``): once as it is (a point model, the MSE loss) and once with
``model.quantiles=[0.1, 0.5, 0.9]`` (the centre is the point forecast, trained with the same MSE
loss; the 10% and 90% quantiles, the 80% interval, with the pinball loss). Then, from the quantile
model's best validation checkpoint: the test split's coverage of the 80% interval before
calibration, the conformal calibration on the validation split (``Forecaster.calibrate``), the
coverage after it, and the point forecast's test MSE against the twin's (each reads the test split
once more; nothing is tuned on it).

Each finished comparison is one JSON line in ``--out`` (default
``benchmarks/results/coverage.jsonl``) with the commands and commit; started again, the script
skips what is recorded and resumes interrupted trainings.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any, Optional, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.run_protocol import best_checkpoint, git_commit  # noqa: E402

CONFIGS = {
    "ETTh1": "configs/ETTh1/patchtst_{attention}_96.yaml",
    "physionet2012": "configs/physionet2012/irregular_{attention}.yaml",
}
QUANTILES = "[0.1,0.5,0.9]"


def train(dataset: str, attention: str, kind: str, epochs: int, seed: int, threads: int, runs: pathlib.Path,
          log: pathlib.Path) -> dict[str, Any]:
    """Train (or resume, or read back) one run; its record."""
    argv = [sys.executable, str(ROOT / "benchmarks" / "run_protocol.py"),
            "--config", str(ROOT / CONFIGS[dataset].format(attention=attention)), "--epochs", str(epochs),
            "--seed", str(seed), "--threads", str(threads), "--resume", "--runs-dir", str(runs / kind),
            "--out", str(runs / "runs.jsonl"), "--tag", f"coverage {kind}, {epochs} epochs"]
    if kind == "quantile":
        argv += ["--set", f"model.quantiles={QUANTILES}"]
    with open(log, "a") as fh:
        fh.write(f"\n$ {' '.join(argv)}\n")
        fh.flush()
        subprocess.run(argv, check=True, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)
    names = [p for p in (runs / kind).iterdir() if p.name.startswith(f"{dataset}_") and f"_{attention}_" in p.name
             and p.name.endswith(f"_s{seed}")]
    record = json.loads((names[0] / "record.json").read_text())
    record["run_dir"], record["argv"] = str(names[0]), " ".join(argv[1:])
    return record


def compare(dataset: str, attention: str, args: argparse.Namespace) -> dict[str, Any]:
    from tsattn import Forecaster

    epochs = args.epochs_ETTh1 if dataset == "ETTh1" else args.epochs_physionet
    log = args.runs / f"{dataset}_{attention}.log"
    point = train(dataset, attention, "point", epochs, args.seed, args.threads, args.runs, log)
    quantile = train(dataset, attention, "quantile", epochs, args.seed, args.threads, args.runs, log)
    start = time.perf_counter()
    f = Forecaster.load(best_checkpoint(pathlib.Path(quantile["run_dir"])))
    before = f.evaluate("test")
    f.calibrate()                                   # on the validation split of the fit's data
    after = f.evaluate("test")
    return {
        "dataset": dataset, "attention": attention, "seed": args.seed, "epochs": epochs,
        "quantiles": json.loads(QUANTILES), "twin_test_mse": point["test_mse"], "median_test_mse": quantile["test_mse"],
        "mse_ratio": quantile["test_mse"] / point["test_mse"], "twin_test_mae": point["test_mae"],
        "median_test_mae": quantile["test_mae"],
        "coverage_80_before": before["coverage_80"], "coverage_80_after": after["coverage_80"],
        "quantile_loss_before": before["quantile_loss"], "quantile_loss_after": after["quantile_loss"],
        "median_mse_after": after["mse"], "twin_best_epoch": point["best_epoch"], "best_epoch": quantile["best_epoch"],
        "seconds_per_epoch": [point["seconds_per_epoch_median"], quantile["seconds_per_epoch_median"]],
        "calibrate_evaluate_seconds": time.perf_counter() - start, "twin_command": point["argv"],
        "quantile_command": quantile["argv"], "commit": git_commit(), "threads": args.threads,
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def interval_summary(frame: Any) -> dict[str, float]:
    """The 80% interval's coverage, mean width and mean interval score over a backtest frame (units)."""
    y, lo, hi = frame["observed"], frame["forecast-lo-80"], frame["forecast-hi-80"]
    score = (hi - lo) + 2 / 0.2 * ((lo - y).clip(lower=0) + (y - hi).clip(lower=0))
    return {"coverage_80": float(((y >= lo) & (y <= hi)).mean()), "width_80": float((hi - lo).mean()),
            "interval_score_80": float(score.mean())}


def rolling(dataset: str, attention: str, args: argparse.Namespace) -> dict[str, Any]:
    """Rolling recalibration (``backtest(recalibrate=N)``) of the quantile model calibrated on validation:
    N chosen on the validation split alone (the last windows of the validation segment, each N's
    calibration windows inside the train + validation rows; among the N whose coverage is within 1
    point of 80%, the lowest interval score; else the closest coverage), then the test windows once."""
    import pandas as pd
    from tsattn import Forecaster
    from tsattn.data.registry import resolve

    f = Forecaster.load(best_checkpoint(args.runs / "quantile" / f"{dataset}_patchtst_{attention}_h96_s{args.seed}"))
    f.calibrate()
    dm = f._datamodule(None)
    dm.setup("test")
    table = pd.read_csv(resolve(dataset)[0])
    val, test = dm.borders.segment("val"), dm.borders.segment("test")
    n_test = len(dm.evaluation_loader("test").dataset)
    n_val = len(dm.evaluation_loader("val").dataset) - max(args.rolling) - 96 - 1     # every N's calibration in val
    seen = table.iloc[:val.stop]                                                       # the test rows never read
    trials = {n: interval_summary(f.backtest(seen, n_windows=n_val, recalibrate=n)) for n in args.rolling}
    near = [n for n in args.rolling if abs(trials[n]["coverage_80"] - 0.8) <= 0.01]
    chosen = (min(near, key=lambda n: trials[n]["interval_score_80"]) if near
              else min(args.rolling, key=lambda n: abs(trials[n]["coverage_80"] - 0.8)))
    rows = table.iloc[:test.stop]
    return {"dataset": dataset, "attention": attention, "seed": args.seed, "val_windows": n_val,
            "val_trials": {str(n): trials[n] for n in args.rolling},
            "val_static": interval_summary(f.backtest(seen, n_windows=n_val)), "chosen_windows": chosen,
            "test_windows": n_test, "test_static": interval_summary(f.backtest(rows, n_windows=n_test)),
            "test_rolling": interval_summary(f.backtest(rows, n_windows=n_test, recalibrate=chosen)),
            "command": " ".join(sys.argv), "commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M")}


def table(path: pathlib.Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    lines = ["| dataset | attention | epochs | twin test MSE | median test MSE | ratio | 80% coverage before | after |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['attention']} | {r['epochs']} | {r['twin_test_mse']:.4g} | "
                     f"{r['median_test_mse']:.4g} | {r['mse_ratio']:.3f} | {100 * r['coverage_80_before']:.1f}% | "
                     f"{100 * r['coverage_80_after']:.1f}% |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--attentions", nargs="+", choices=["continuous", "softmax"], default=["continuous", "softmax"])
    parser.add_argument("--epochs-ETTh1", dest="epochs_ETTh1", type=int, default=10)
    parser.add_argument("--epochs-physionet", dest="epochs_physionet", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=pathlib.Path, default=ROOT / "runs" / "coverage")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "coverage.jsonl")
    parser.add_argument("--table", action="store_true", help="print the recorded table and stop")
    parser.add_argument("--rolling", type=int, nargs="+", metavar="N",
                        help="window datasets: rolling recalibration over N earlier windows, N chosen on validation "
                             "among these (of the recorded quantile runs); rows to --rolling-out")
    parser.add_argument("--rolling-out", type=pathlib.Path,
                        default=ROOT / "benchmarks" / "results" / "coverage_rolling.jsonl")
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.out))
        return 0
    import torch

    torch.set_num_threads(args.threads)
    args.runs.mkdir(parents=True, exist_ok=True)
    if args.rolling:
        for dataset in [d for d in args.datasets if d != "physionet2012"]:     # one cutoff per stay: no rolling
            for attention in args.attentions:
                row = rolling(dataset, attention, args)
                with open(args.rolling_out, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
                print(json.dumps(row))
        return 0
    done = set()
    if args.out.exists():
        done = {(r["dataset"], r["attention"], r["seed"], r["epochs"])
                for r in map(json.loads, filter(str.strip, args.out.read_text().splitlines()))}
    for dataset in args.datasets:
        for attention in args.attentions:
            epochs = args.epochs_ETTh1 if dataset == "ETTh1" else args.epochs_physionet
            if (dataset, attention, args.seed, epochs) in done:
                print(f"{dataset} {attention}: recorded before")
                continue
            row = compare(dataset, attention, args)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with open(args.out, "a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(json.dumps(row))
    print(table(args.out))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/tsattn-mpl")
    raise SystemExit(main())
