"""Early in training: validation MSE after each epoch, continuous against softmax attention, several seeds.

    python benchmarks/early_training.py                        # train what is missing, then the table and plot
    python benchmarks/early_training.py --datasets physionet2012 --seeds 1 2 3
    python benchmarks/early_training.py --report               # only the table and plot of what is recorded

Each (dataset, attention, seed) is the protocol's config trained for a short schedule (ETTh1: PatchTST/42,
H = 96, 10 epochs; PhysioNet 2012: the irregular model, 5 epochs) by ``run_protocol.py --resume --no-test``
(the test split is not read), one thread. The curve is the run's validation MSE after each epoch
(``val_mse_curve`` of its record, or its CSV logs). The report gives, per epoch, the mean and standard
deviation over seeds of each attention's validation MSE and of the paired difference (continuous minus
softmax, same seed), writes one JSON line per run to ``--out`` and the plot (mean +- std against epoch)
to ``--plot``. Run one process per dataset to use two cores.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
from typing import Optional, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from run_protocol import validation_curve  # noqa: E402

CONFIGS = {
    "ETTh1": "configs/ETTh1/patchtst_{attention}_96.yaml",
    "physionet2012": "configs/physionet2012/irregular_{attention}.yaml",
}
EPOCHS = {"ETTh1": 10, "physionet2012": 5}
ATTENTIONS = ("continuous", "softmax")


def train(dataset: str, attention: str, seed: int, args: argparse.Namespace) -> None:
    argv = [sys.executable, str(ROOT / "benchmarks" / "run_protocol.py"),
            "--config", str(ROOT / CONFIGS[dataset].format(attention=attention)), "--epochs", str(EPOCHS[dataset]),
            "--seed", str(seed), "--threads", str(args.threads), "--resume", "--no-test",
            "--runs-dir", str(args.runs), "--out", str(args.runs / "runs.jsonl"), "--tag", "early training"]
    with open(args.runs / f"{dataset}_{attention}_s{seed}.log", "a") as fh:
        subprocess.run(argv, check=True, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)


def curves(runs: pathlib.Path, dataset: str) -> dict[tuple[str, int], list[float]]:
    """(attention, seed) -> validation curve of every finished run of ``dataset`` under ``runs``."""
    found = {}
    for record_path in sorted(runs.glob("*/record.json")):
        record = json.loads(record_path.read_text())
        if record.get("dataset") != dataset or record.get("switch_epoch") is not None:
            continue
        curve = record.get("val_mse_curve") or validation_curve(record_path.parent)
        if len(curve) == EPOCHS[dataset]:
            found[(record["attention"], int(record["seed"]))] = curve
    return found


def report(args: argparse.Namespace) -> str:
    lines, panels = [], {}
    with open(args.out, "w") as fh:
        for dataset in args.datasets:
            found = curves(args.runs, dataset)
            seeds = sorted({s for (_, s) in found if all((a, s) in found for a in ATTENTIONS)})
            for (attention, seed), curve in sorted(found.items()):
                fh.write(json.dumps({"dataset": dataset, "attention": attention, "seed": seed, "val_mse": curve}) + "\n")
            if not seeds:
                continue
            panels[dataset] = {a: [found[(a, s)] for s in seeds] for a in ATTENTIONS}
            lines += [f"### {dataset}: validation MSE after each epoch, seeds {', '.join(map(str, seeds))}", "",
                      "| epoch | continuous | softmax | continuous - softmax (paired) | seeds continuous lower |",
                      "|---|---|---|---|---|"]
            for e in range(EPOCHS[dataset]):
                c = [found[("continuous", s)][e] for s in seeds]
                m = [found[("softmax", s)][e] for s in seeds]
                d = [x - y for x, y in zip(c, m)]
                sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0
                lines.append(f"| {e + 1} | {statistics.mean(c):.5g} +- {sd(c):.2g} | {statistics.mean(m):.5g} +- {sd(m):.2g} "
                             f"| {statistics.mean(d):+.2g} +- {sd(d):.2g} | {sum(x < 0 for x in d)} of {len(d)} |")
            lines.append("")
    if panels:
        plot(panels, args.plot)
    return "\n".join(lines)


def plot(panels: dict, path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 3.8), squeeze=False)
    for ax, (dataset, by_attention) in zip(axes[0], panels.items()):
        for attention, colour in zip(ATTENTIONS, ("tab:blue", "tab:red")):
            values = np.asarray(by_attention[attention])                      # [seeds, epochs]
            epochs = np.arange(1, values.shape[1] + 1)
            mean, std = values.mean(0), values.std(0, ddof=1) if len(values) > 1 else np.zeros(values.shape[1])
            ax.plot(epochs, mean, "o-", color=colour, label=f"{attention} ({len(values)} seeds)")
            ax.fill_between(epochs, mean - std, mean + std, color=colour, alpha=0.15)
        ax.set(title=dataset, xlabel="epoch", ylabel="validation MSE (mean +- std over seeds)")
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=pathlib.Path, default=ROOT / "runs" / "early")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "early_training.jsonl")
    parser.add_argument("--plot", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "early_training.png")
    parser.add_argument("--report", action="store_true", help="only the table and plot of the finished runs")
    args = parser.parse_args(argv)
    args.runs.mkdir(parents=True, exist_ok=True)
    if not args.report:
        for dataset in args.datasets:
            for seed in args.seeds:
                for attention in ATTENTIONS:
                    train(dataset, attention, seed, args)
    print(report(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
