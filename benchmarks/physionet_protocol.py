"""PhysioNet 2012 under the full protocol: every (attention, seed) run of the table, resumable.

    python benchmarks/physionet_protocol.py                      # seeds 1-5, both attentions, 2 jobs
    python benchmarks/physionet_protocol.py --seeds 1 2 3 --jobs 1 --threads 2
    python benchmarks/physionet_protocol.py --configs irregular_series --seeds 1 -- --epochs 20 \
        --set model.lr_schedule=onecycle --no-test --tag onecycle20      # a variant, on validation only
    python benchmarks/summarize_runs.py --tag "full protocol" --dataset physionet2012

Each run is ``run_protocol.py --config configs/physionet2012/<configs>_<attention>.yaml --seed S
--resume`` (``--configs``: ``irregular``, the default, ``irregular_series`` or ``irregular_vardrop``; early stopping on validation MSE with patience 10, up to 100 epochs, the best validation
checkpoint tested once), in its own process. ``--jobs`` runs go at once, each on ``--threads`` torch
threads (default: 2 jobs of 1 thread, one per attention: on two cores this model trains about 1.7
times faster in all than one run on two threads, whose small operations gain little from the second
thread). Seconds per epoch in the records are then those of a run sharing the machine. Arguments
after ``--`` go to every ``run_protocol.py`` command as they are (``--epochs``, ``--set``, ``--no-test``,
``--tag``; a later ``--tag`` replaces this script's); a variant that changes the run but not its name
needs a ``--runs-dir`` of its own (``--resume`` refuses a folder that holds another variant's run).

Started again, the script skips finished runs (``runs/<name>/record.json``) and continues
interrupted ones from their last epoch, so the table can be built over several sittings. Records are
appended to ``--out`` (default ``benchmarks/results/runs.jsonl``), each run's output to
``<runs-dir>/<name>.log``.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import time
from typing import Optional, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[1]
ATTENTIONS = ("continuous", "softmax")


def commands(seeds: Sequence[int], attentions: Sequence[str], threads: int, runs_dir: pathlib.Path,
             out: pathlib.Path, tag: str, configs: str = "irregular",
             extra: Sequence[str] = ()) -> list[tuple[str, list[str]]]:
    """(name, argv) of every run, seed by seed, the attentions of a seed side by side; ``configs``: the
    config family (``configs/physionet2012/<configs>_<attention>.yaml``); ``extra``: further
    ``run_protocol.py`` arguments, appended as they are."""
    runs = []
    for seed in seeds:
        for attention in attentions:
            config = ROOT / "configs" / "physionet2012" / f"{configs}_{attention}.yaml"
            if not config.is_file():
                raise FileNotFoundError(f"no config {config}: --configs names a family of configs/physionet2012/"
                                        f"<family>_<attention>.yaml, e.g. irregular, irregular_series or irregular_vardrop")
            argv = [sys.executable, str(ROOT / "benchmarks" / "run_protocol.py"), "--config", str(config),
                    "--seed", str(seed), "--threads", str(threads), "--resume", "--runs-dir", str(runs_dir),
                    "--out", str(out), "--tag", tag, *extra]
            runs.append((f"physionet2012_{configs}_{attention}_s{seed}", argv))
    return runs


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--attentions", nargs="+", choices=ATTENTIONS, default=list(ATTENTIONS))
    parser.add_argument("--configs", default="irregular",
                        help="config family: configs/physionet2012/<configs>_<attention>.yaml (default irregular)")
    parser.add_argument("extra", nargs="*", metavar="-- RUN_PROTOCOL_ARGS",
                        help="after --: arguments for every run_protocol.py command")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    parser.add_argument("--runs-dir", type=pathlib.Path, default=ROOT / "runs" / "physionet-full")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "runs.jsonl")
    parser.add_argument("--tag", default=None,
                        help='stored with each record (default: "full protocol; J run(s) at a time, T thread(s) each")')
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.threads < 1:
        parser.error("--jobs and --threads must be >= 1")
    tag = args.tag or f"full protocol; {args.jobs} run(s) at a time, {args.threads} thread(s) each"
    try:
        pending = commands(args.seeds, args.attentions, args.threads, args.runs_dir, args.out, tag, args.configs,
                           args.extra)
    except FileNotFoundError as error:
        parser.error(str(error))
    args.runs_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MPLCONFIGDIR": os.environ.get("MPLCONFIGDIR", "/tmp/tsattn-mpl")}
    running: list[tuple[str, subprocess.Popen]] = []
    failed = []
    while pending or running:
        while pending and len(running) < args.jobs:
            name, cmd = pending.pop(0)
            log = open(args.runs_dir / f"{name}.log", "a")
            print(f"start {name}", flush=True)
            running.append((name, subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)))
            log.close()
        time.sleep(5)
        for name, proc in list(running):
            if proc.poll() is not None:
                running.remove((name, proc))
                print(f"{'done' if proc.returncode == 0 else f'FAILED (exit {proc.returncode})'} {name}", flush=True)
                if proc.returncode:
                    failed.append(name)
    if failed:
        print(f"failed: {failed}; see their logs in {args.runs_dir}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
