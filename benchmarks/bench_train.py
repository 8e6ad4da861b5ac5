"""Training speed side by side: seconds per epoch of tsattn models and of a peer, ratios from one run.

    python benchmarks/bench_train.py [--epochs 3] [--configs peer,softmax,continuous] [--threads 2]
        [--peer-dir ../peers/Time-Series-Library --peer-python ../peers/tslib-venv/bin/python]
    python benchmarks/bench_train.py --max-batches 3 --configs softmax,continuous,decoder-softmax  # smoke

Every configuration trains in its own subprocess, one after the other (never two at once), with the
same torch thread count. ``peer`` is Time-Series-Library's PatchTST (run.py with the PatchTST/42
hyperparameters of ``benchmarks/RESULTS.md``: L = 336, H = 96, batch 128), timed by its own
"Epoch: N cost time: S" lines (the training loop of an epoch, validation excluded). The tsattn
configurations train the same model through the public API, ``tsattn.Forecaster(...).fit("ETTh1")``,
without validation, and a Lightning callback times each training epoch from start to end.

Per configuration: the first epoch, the median of epochs 2..E (the steady state; with E = 1 the one
epoch), and warm-up = first - median (``torch.compile`` time lands there). Ratios of the medians are
measured in the same invocation. ``--max-batches`` cuts the tsattn epochs short; TSLib cannot cut an
epoch, so the peer is then skipped (``--peer-whole`` runs it whole, without ratios against it). Each
invocation appends one JSON line to ``benchmarks/results/bench_train.jsonl``.

To add a configuration (e.g. an irregular-time model), add an entry to ``CONFIGS``.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from run_protocol import EpochTimer, git_commit  # noqa: E402  (benchmarks/ is the script's folder)

PATCHTST_42 = {"n_layers": 3, "n_heads": 4, "d_model": 16, "d_ff": 128, "dropout": 0.3, "head_dropout": 0.0}
IRREGULAR = {"model": "irregular", "sink": "learned", "rope": True, "lookback": None, "horizon": None, "lr": 1e-3,
             "lr_schedule": "constant", "batch_size": 32,
             "model_kwargs": {"d_model": 64, "n_heads": 4, "n_layers": 2, "n_decoder_layers": 1, "d_ff": 128,
                              "dropout": 0.0}}
# TSLib's run.py with the same model, data and schedule (the PatchTST paper's ETTh1 settings)
PEER_ARGS = ("--task_name long_term_forecast --is_training 1 --root_path ./dataset/ETT-small/ --data_path ETTh1.csv "
             "--model_id ETTh1_336_96 --model PatchTST --data ETTh1 --features M --seq_len 336 --label_len 48 "
             "--pred_len 96 --e_layers 3 --n_heads 4 --d_model 16 --d_ff 128 --dropout 0.3 --enc_in 7 --dec_in 7 "
             "--c_out 7 --des Exp --batch_size 128 --learning_rate 0.0001 --itr 1 --no_use_gpu --num_workers 0 "
             "--lradj type3").split()
PEER_EPOCH = re.compile(r"^Epoch: \d+ cost time: ([0-9.eE+-]+)\s*$", re.MULTILINE)
WORKER_RESULT = "bench_train result: "


@dataclass
class Config:
    """One benchmarked configuration: ``command(args)`` gives (argv, cwd) or the reason it is skipped;
    ``parse(stdout)`` gives the seconds of each training epoch."""
    command: Callable[[argparse.Namespace], Union[tuple[list[str], pathlib.Path], str]]
    parse: Callable[[str], list[float]]
    cut_by_max_batches: bool = True


def peer_command(args: argparse.Namespace) -> Union[tuple[list[str], pathlib.Path], str]:
    if args.max_batches is not None and not args.peer_whole:
        return "TSLib cannot cut an epoch short; run without --max-batches (or add --peer-whole) to include it"
    if not (args.peer_dir / "run.py").is_file() or not (args.peer_dir / "dataset/ETT-small/ETTh1.csv").exists():
        return f"no run.py or dataset/ETT-small/ETTh1.csv under --peer-dir {args.peer_dir} (setup: benchmarks/RESULTS.md)"
    if not args.peer_python.is_file():
        return f"no interpreter at --peer-python {args.peer_python} (setup: benchmarks/RESULTS.md)"
    # patience above E: early stopping never shortens the timed run
    argv = [str(args.peer_python), "-u", "run.py", *PEER_ARGS, "--train_epochs", str(args.epochs),
            "--patience", str(args.epochs + 1)]
    return argv, args.peer_dir


def parse_peer(stdout: str) -> list[float]:
    return [float(s) for s in PEER_EPOCH.findall(stdout)]


def tsattn_config(data: str = "ETTh1", **forecaster: Any) -> Config:
    """A configuration trained by ``Forecaster(**forecaster).fit(data)`` in a worker subprocess."""
    spec = json.dumps({"data": data, "forecaster": forecaster})

    def command(args: argparse.Namespace) -> tuple[list[str], pathlib.Path]:
        argv = [sys.executable, str(pathlib.Path(__file__).resolve()), "--worker", spec, "--epochs", str(args.epochs)]
        if args.max_batches is not None:
            argv += ["--max-batches", str(args.max_batches)]
        return argv, ROOT

    def parse(stdout: str) -> list[float]:
        lines = [line for line in stdout.splitlines() if line.startswith(WORKER_RESULT)]
        return json.loads(lines[-1][len(WORKER_RESULT):])["epoch_seconds"] if lines else []

    return Config(command, parse)


# name -> configuration; the plain variants leave `compile` (and everything not named) at the Forecaster's default
CONFIGS: dict[str, Config] = {
    "peer": Config(peer_command, parse_peer, cut_by_max_batches=False),
    "softmax": tsattn_config(model="patchtst", attention="softmax", model_kwargs=PATCHTST_42),
    "softmax-compiled": tsattn_config(model="patchtst", attention="softmax", model_kwargs=PATCHTST_42, compile=True),
    "continuous": tsattn_config(model="patchtst", attention="continuous", model_kwargs=PATCHTST_42),
    "continuous-compiled": tsattn_config(model="patchtst", attention="continuous", model_kwargs=PATCHTST_42,
                                         compile=True),
    "decoder-softmax": tsattn_config(model="decoder", attention="softmax"),
    "decoder-continuous": tsattn_config(model="decoder", attention="continuous"),
    # the irregular model on PhysioNet 2012 (its registered protocol; the sizes of configs/physionet2012)
    "irregular-softmax": tsattn_config(data="physionet2012", **IRREGULAR, attention="softmax"),
    "irregular-continuous": tsattn_config(data="physionet2012", **IRREGULAR, attention="continuous"),
    # the same with patch tokens (one token per variable and 8 h history patch instead of one per observation)
    "irregular-continuous-tokens8": tsattn_config(
        data="physionet2012", **dict(IRREGULAR, model_kwargs={**IRREGULAR["model_kwargs"], "token_length": 8.0}),
        attention="continuous"),
}
RATIOS = [("softmax", "peer"), ("continuous", "softmax"), ("continuous", "peer"),
          ("softmax-compiled", "peer"), ("continuous-compiled", "softmax-compiled"),
          ("continuous-compiled", "peer"), ("decoder-continuous", "decoder-softmax"),
          ("irregular-continuous", "irregular-softmax"), ("irregular-continuous-tokens8", "irregular-continuous")]


def run_worker(spec: dict[str, Any], epochs: int, max_batches: Optional[int]) -> None:
    """Train one tsattn configuration as a user would; print the seconds of each training epoch."""
    from tsattn import Forecaster

    timer = EpochTimer()
    with tempfile.TemporaryDirectory(prefix="bench_train_") as tmp:
        settings = {"lr": 1e-4, "lr_schedule": "type3", "batch_size": 128, "lookback": 336, "horizon": 96,
                    **spec["forecaster"]}
        Forecaster(**settings).fit(
            spec["data"], max_epochs=epochs, callbacks=[timer], limit_train_batches=max_batches,
            limit_val_batches=0, num_sanity_val_steps=0, logger=False, enable_progress_bar=False,
            enable_model_summary=False, default_root_dir=tmp)
    print(WORKER_RESULT + json.dumps({"epoch_seconds": timer.seconds, "threads": torch.get_num_threads()}), flush=True)


def summarize(seconds: list[float]) -> dict[str, Any]:
    """First epoch, median of epochs 2..E (the one epoch when E = 1), warm-up = first - median."""
    median = statistics.median(seconds[1:] or seconds)
    return {"epoch_seconds": seconds, "first": seconds[0], "median": median,
            "warmup": seconds[0] - median if len(seconds) > 1 else None}


def run_config(name: str, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    config = CONFIGS[name]
    command = config.command(args)
    if isinstance(command, str):
        print(f"[{name}] skipped: {command}", flush=True)
        return {"skipped": command}
    argv, cwd = command
    print(f"[{name}] running: {shlex.join(argv)}  (in {cwd})", flush=True)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = config.parse(proc.stdout)
    if proc.returncode != 0 or len(seconds) != args.epochs:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        print(f"[{name}] FAILED (exit {proc.returncode}, {len(seconds)} of {args.epochs} epochs timed):\n{tail}")
        return {"failed": f"exit {proc.returncode}, {len(seconds)} of {args.epochs} epochs timed"}
    result = summarize(seconds)
    result["cut"] = args.max_batches is not None and config.cut_by_max_batches
    print(f"[{name}] epochs (s): {', '.join(f'{s:.2f}' for s in seconds)}  "
          f"({time.perf_counter() - start:.0f} s wall for the whole subprocess)", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=3, help="training epochs per configuration (E)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated subset of {list(CONFIGS)}")
    parser.add_argument("--threads", type=int, help="torch threads in every configuration (default: torch's)")
    parser.add_argument("--max-batches", type=int, help="cut tsattn epochs to this many batches (smoke runs)")
    parser.add_argument("--peer-whole", action="store_true", help="with --max-batches, run the peer's epochs whole")
    parser.add_argument("--peer-dir", type=pathlib.Path, default=ROOT.parent / "peers" / "Time-Series-Library")
    parser.add_argument("--peer-python", type=pathlib.Path, default=ROOT.parent / "peers" / "tslib-venv/bin/python")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "bench_train.jsonl")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one tsattn configuration, as JSON
    args = parser.parse_args()
    if args.epochs < 1 or (args.max_batches is not None and args.max_batches < 1):
        parser.error("--epochs and --max-batches must be >= 1")
    if args.threads is not None:
        if args.threads < 1:
            parser.error("--threads must be >= 1")
        torch.set_num_threads(args.threads)
    if args.worker:
        return run_worker(json.loads(args.worker), args.epochs, args.max_batches)
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown or not names:
        parser.error(f"unknown --configs {unknown}; choose from {list(CONFIGS)}")
    args.peer_dir, args.peer_python = args.peer_dir.absolute(), args.peer_python.absolute()

    commit = git_commit()
    env = dict(os.environ)
    env.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="bench_train_mpl_"))
    if args.threads is not None:  # the peer's torch reads these at start; the workers also set it directly
        env.update(OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    threads = torch.get_num_threads()
    print(f"# torch {torch.__version__}, {threads} threads, {args.epochs} epochs, commit {commit}", flush=True)
    results = {name: run_config(name, args, env) for name in names}

    ratios = {}
    for num, den in RATIOS:
        a, b = results.get(num, {}), results.get(den, {})
        if "median" in a and "median" in b and a["cut"] == b["cut"]:
            ratios[f"{num} / {den}"] = a["median"] / b["median"]

    record = {"configs": results, "ratios": ratios, "epochs": args.epochs, "max_batches": args.max_batches,
              "threads": threads, "torch": torch.__version__, "commit": commit, "machine": platform.machine(),
              "date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as fh:
        fh.write(json.dumps(record) + "\n")

    print(f"\n{'config':<22}{'s/epoch (median 2..E)':>23}{'first epoch':>13}{'warm-up':>10}")
    for name, r in results.items():
        if "median" in r:
            warmup = "-" if r["warmup"] is None else f"{r['warmup']:.2f}"
            cut = f"  ({args.max_batches} batches/epoch)" if r["cut"] else ""
            print(f"{name:<22}{r['median']:>23.2f}{r['first']:>13.2f}{warmup:>10}{cut}")
        else:
            print(f"{name:<22}  {r.get('skipped') or 'FAILED: ' + r['failed']}")
    if ratios:
        print("\nratios of the medians (same run):")
        for key, value in ratios.items():
            print(f"  {key:<44}{value:>7.3f}")
    print(f"\nappended to {args.out}")


if __name__ == "__main__":
    main()
