"""Backtest speed: ``Forecaster.backtest`` (windows forecast in batches) against one ``predict`` per
cutoff, the way a loop over origins would do it, on both tasks; ratios from one run.

    python benchmarks/bench_backtest.py                  # 500 ETTh1 windows, 2,400 PhysioNet stays
    python benchmarks/bench_backtest.py --windows 100 --stays 600 --repeats 3 --threads 1

Window task: PatchTST/42 (L = 336, H = 96) on ETTh1, the last ``--windows`` windows one row apart.
Observation task: the irregular model's defaults on PhysioNet 2012, ``--stays`` stays (the first of
the protocol's test split), each forecast from its first 24 hours (``cutoffs=[24.0]``), beside
``evaluate("test")`` over the same 2,400 stays (the model's pass over the same windows). The models
are fit for one batch only: the weights do not change the time of a forward pass. The loop of
``predict`` calls runs ``--loop`` cutoffs (a sample of the backtest's), and its time is scaled to the
backtest's number of windows. Reported: medians over ``--repeats`` of each, seconds and the ratio.
Appends one JSON line to ``benchmarks/results/bench_backtest.jsonl``.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.run_protocol import git_commit  # noqa: E402

PATCHTST_42 = {"n_layers": 3, "n_heads": 4, "d_model": 16, "d_ff": 128, "dropout": 0.3, "head_dropout": 0.0}
QUIET = dict(logger=False, enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
             max_epochs=1, limit_train_batches=1, limit_val_batches=1)


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def window_task(args) -> dict:
    import pandas as pd

    from tsattn import Forecaster
    from tsattn.data import registry

    f = Forecaster("patchtst", lookback=336, horizon=96, model_kwargs=PATCHTST_42, seed=1)
    f.fit("ETTh1", **QUIET)
    frame = pd.read_csv(registry.resolve("ETTh1")[0], parse_dates=["date"])
    n = len(frame)
    backtest = median_seconds(lambda: f.backtest(n_windows=args.windows, step=1), args.repeats)
    # the loop: predict from the data cut at each of --loop of the backtest's cutoffs
    ends = [n - 96 - k * (args.windows // args.loop) for k in range(args.loop)]
    loop = median_seconds(lambda: [f.predict(frame.iloc[:end]) for end in ends], args.repeats)
    return {"task": "window", "windows": args.windows, "backtest_seconds": backtest,
            "loop_seconds_scaled": loop * args.windows / args.loop, "loop_cutoffs_run": args.loop}


def observation_task(args) -> dict:
    from tsattn import Forecaster

    f = Forecaster("irregular", horizon=24.0, seed=1)
    f.fit("physionet2012", **QUIET)
    dm = f.datamodule
    stays = dm.split_series("test")[: args.stays]
    data = dm.observations.subset(stays)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backtest = median_seconds(lambda: f.backtest(data, cutoffs=[24.0]), args.repeats)
        evaluate = median_seconds(lambda: f.evaluate("test"), args.repeats) if args.stays == len(dm.split_series("test")) else None
        one = [dm.observations.subset([s]) for s in stays[: args.loop]]
        loop = median_seconds(lambda: [f.predict(stay, origin=24.0) for stay in one], args.repeats)
    return {"task": "observations", "stays": int(len(stays)), "backtest_seconds": backtest,
            "evaluate_test_split_seconds": evaluate,
            "loop_seconds_scaled": loop * len(stays) / args.loop, "loop_cutoffs_run": args.loop}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, default=500)
    parser.add_argument("--stays", type=int, default=2400)
    parser.add_argument("--loop", type=int, default=20, help="predict() calls timed for the loop")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tasks", nargs="+", choices=["window", "observations"], default=["window", "observations"])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "bench_backtest.jsonl")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    rows = []
    for task in args.tasks:
        row = window_task(args) if task == "window" else observation_task(args)
        row["ratio_loop_over_backtest"] = row["loop_seconds_scaled"] / row["backtest_seconds"]
        rows.append(row)
        print(json.dumps(row))
    record = {"rows": rows, "threads": args.threads, "repeats": args.repeats, "commit": git_commit(),
              "command": " ".join(["bench_backtest.py", *(argv if argv is not None else sys.argv[1:])]),
              "date": time.strftime("%Y-%m-%d %H:%M")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as fh:
        fh.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/tsattn-mpl")
    raise SystemExit(main())
