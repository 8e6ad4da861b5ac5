"""The hyperparameter search on PhysioNet 2012's validation split, the same for both attentions.

    python benchmarks/physionet_search.py --epochs 5            # run every trial for both attentions
    python benchmarks/physionet_search.py --report              # the table of validation MSE per trial

One factor at a time from the base configuration (``configs/physionet2012/irregular_<attention>.yaml``:
2 layers, width 64, learning rate 1e-3, learned sink): learning rate 3e-4 / 3e-3, 1 / 3 layers,
width 32 / 128, zero sink. Every trial trains ``--epochs`` epochs with seed 1 (no early stopping)
and keeps its best validation MSE; the test split is never read (``run_protocol.py --no-test``).
Both attentions get the same trials and the same budget. One JSON line per trial in
``benchmarks/results/physionet_search.jsonl``.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import run_protocol  # noqa: E402

TRIALS: dict[str, list[str]] = {
    "base": [],
    "lr 3e-4": ["model.lr=0.0003"],
    "lr 3e-3": ["model.lr=0.003"],
    "1 layer": ["model.model_kwargs.n_layers=1"],
    "3 layers": ["model.model_kwargs.n_layers=3"],
    "width 32": ["model.model_kwargs.d_model=32", "model.model_kwargs.d_ff=64"],
    "width 128": ["model.model_kwargs.d_model=128", "model.model_kwargs.d_ff=256"],
    "zero sink": ["model.sink=zeros"],
}
ATTENTIONS = ("continuous", "softmax")
OUT = ROOT / "benchmarks" / "results" / "physionet_search.jsonl"


def report(path: pathlib.Path) -> str:
    """The markdown table of best validation MSE (its epoch; seconds per epoch) per trial and attention.

    A trial run again replaces its earlier line; the last lines name each attention's best trial.
    """
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    latest = {(r["trial"], r["attention"]): r for r in rows}
    lines = ["| trial | " + " | ".join(f"{a}: best val MSE (epoch; s / epoch)" for a in ATTENTIONS) + " |",
             "|---|" + "---|" * len(ATTENTIONS)]
    for trial in TRIALS:
        cells = []
        for a in ATTENTIONS:
            r = latest.get((trial, a))
            cells.append(f"{r['best_val_mse'] * 1e3:.3f}e-3 ({r['best_epoch']}; {r['seconds_per_epoch_median']:.0f})"
                         if r else "-")
        lines.append(f"| {trial} | " + " | ".join(cells) + " |")
    for a in ATTENTIONS:
        done = sorted((r["best_val_mse"], t) for (t, att), r in latest.items() if att == a)
        if done:
            lines.append(f"best for {a}: {done[0][1]!r} ({done[0][0] * 1e3:.3f}e-3)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--trials", nargs="+", default=list(TRIALS), choices=list(TRIALS))
    parser.add_argument("--attentions", nargs="+", default=list(ATTENTIONS), choices=ATTENTIONS)
    parser.add_argument("--runs-dir", type=pathlib.Path, default=ROOT / "runs" / "physionet_search")
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    parser.add_argument("--report", action="store_true", help="print the table of results, run nothing")
    args = parser.parse_args()
    if args.report:
        print(report(args.out))
        return
    for trial in args.trials:
        for attention in args.attentions:
            config = ROOT / "configs" / "physionet2012" / f"irregular_{attention}.yaml"
            argv = ["--config", str(config), "--seed", "1", "--epochs", str(args.epochs),
                    "--patience", str(args.epochs + 1), "--no-test", "--runs-dir", str(args.runs_dir / trial.replace(" ", "_")),
                    "--out", str(args.out.with_suffix(".runs.jsonl")), "--tag", f"search {trial}"]
            for assignment in TRIALS[trial]:
                argv += ["--set", assignment]
            record = run_protocol.main(argv)
            line = {"trial": trial, "attention": attention, "overrides": TRIALS[trial], "epochs": args.epochs,
                    **{k: record[k] for k in ("best_val_mse", "best_epoch", "seconds_per_epoch_median", "commit",
                                              "date")}}
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with open(args.out, "a") as fh:
                fh.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
