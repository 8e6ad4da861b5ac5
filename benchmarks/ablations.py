"""Where continuous attention matters on PhysioNet 2012: twins under one short budget, validation only.

    python benchmarks/ablations.py               # train what is missing (one thread, --resume), then the tables and plots
    python benchmarks/ablations.py --report      # only the tables and plots of what is recorded

Each variant is the protocol's irregular config (``configs/physionet2012/irregular_<attention>.yaml``)
trained for 5 epochs by ``run_protocol.py --resume --no-test`` (the test split is never read), seeds 1-3,
both attentions, the same budget for each:

- ``base``: the config as it is (RoPE on real times; ``runs/early``, the early-training runs);
- ``rope_off``: ``model.rope=false``: the temporal attentions get no position encoding, so softmax
  knows nothing of time there, while continuous attention still integrates over the real gaps;
- ``static``: PhysioNet's descriptors (Age, Gender, Height, ICUType, Weight at admission) also read as
  static covariates (``static_variables``), the metric over the same 41 variables;
- ``switch``: softmax for epochs 1-2, continuous from epoch 3 (``AttentionSwitch``), seed 1.

The report: per variant and attention the best validation MSE (mean +- std over seeds) and the paired
differences that answer each question, one JSON line per run in ``--out``, and one plot per question
(validation MSE against epoch, mean +- std over seeds).
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

CONFIG = "configs/physionet2012/irregular_{attention}.yaml"
EPOCHS = 5
ATTENTIONS = ("continuous", "softmax")
STATIC = "data.init_args.static_variables=[Age,Gender,Height,ICUType,Weight]"
VARIANTS = {   # name -> (runs folder under runs/, extra run_protocol arguments, attentions, seeds)
    "base": ("early", [], ATTENTIONS, (1, 2, 3)),
    "rope_off": ("ablation/rope_off", ["--set", "model.rope=false"], ATTENTIONS, (1, 2, 3)),
    "static": ("ablation/static", ["--set", STATIC], ATTENTIONS, (1, 2, 3)),
    "switch": ("ablation/switch", ["--switch-epoch", "2"], ("continuous",), (1,)),
}


def train(variant: str, attention: str, seed: int, args: argparse.Namespace) -> None:
    folder, extra, _, _ = VARIANTS[variant]
    runs = args.runs / folder
    runs.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(ROOT / "benchmarks" / "run_protocol.py"),
            "--config", str(ROOT / CONFIG.format(attention=attention)), "--epochs", str(EPOCHS), "--seed", str(seed),
            "--threads", str(args.threads), "--resume", "--no-test", "--runs-dir", str(runs),
            "--out", str(runs / "runs.jsonl"), "--tag", f"ablation {variant}", *extra]
    with open(runs / f"{attention}_s{seed}.log", "a") as fh:
        subprocess.run(argv, check=True, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)


def curves(variant: str, runs: pathlib.Path) -> dict[tuple[str, int], list[float]]:
    """(attention the run ended with, seed) -> validation MSE after each epoch, for the finished runs."""
    folder, _, _, _ = VARIANTS[variant]
    found = {}
    for record_path in sorted((runs / folder).glob("physionet2012_*/record.json")):
        record = json.loads(record_path.read_text())
        if (record.get("switch_epoch") is not None) != (variant == "switch"):
            continue
        curve = record.get("val_mse_curve") or validation_curve(record_path.parent)
        if len(curve) == EPOCHS:
            attention = "continuous" if variant == "switch" else record["attention"]
            found[(attention, int(record["seed"]))] = curve
    return found


def _mean_sd(values: Sequence[float], scale: float = 1e3) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values) * scale:.3f} +- {sd * scale:.3f}"


def report(args: argparse.Namespace) -> str:
    data = {v: curves(v, args.runs) for v in VARIANTS}
    with open(args.out, "w") as fh:
        for variant, found in data.items():
            for (attention, seed), curve in sorted(found.items()):
                fh.write(json.dumps({"variant": variant, "attention": attention, "seed": seed, "val_mse": curve,
                                     "best_val_mse": min(curve)}) + "\n")
    best = {v: {key: min(c) for key, c in found.items()} for v, found in data.items()}
    lines = ["Best validation MSE (e-3) in 5 epochs, mean +- std over seeds:", "",
             "| variant | continuous | softmax | continuous - softmax (paired) |", "|---|---|---|---|"]
    for variant in ("base", "rope_off", "static"):
        seeds = sorted({s for (_, s) in best[variant] if all((a, s) in best[variant] for a in ATTENTIONS)})
        if not seeds:
            continue
        c, m = ([best[variant][(a, s)] for s in seeds] for a in ATTENTIONS)
        lines.append(f"| {variant} ({len(seeds)} seeds) | {_mean_sd(c)} | {_mean_sd(m)} | "
                     f"{_mean_sd([x - y for x, y in zip(c, m)])} |")
    for variant, question in (("rope_off", "RoPE's effect (off - on, paired by seed)"),
                              ("static", "static covariates' effect (with - without, paired by seed)")):
        pairs = {a: [best[variant][(a, s)] - best["base"][(a, s)] for (b, s) in best[variant]
                     if b == a and (a, s) in best["base"]] for a in ATTENTIONS}
        if any(pairs.values()):
            lines += ["", f"{question}: " + "; ".join(f"{a} {_mean_sd(d)} e-3 ({len(d)} seeds)"
                                                      for a, d in pairs.items() if d)]
    if best["switch"]:
        s = best["switch"].get(("continuous", 1))
        base = {a: best["base"].get((a, 1)) for a in ATTENTIONS}
        lines += ["", f"switch (softmax, then continuous from epoch 3; seed 1): best {s * 1e3:.3f} e-3 against "
                  + ", ".join(f"{a} {v * 1e3:.3f}" for a, v in base.items() if v is not None)]
    plot(data, args.plot_prefix)
    return "\n".join(lines)


def plot(data: dict, prefix: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = {"rope": ("base", "rope_off"), "static": ("base", "static"), "switch": ("base", "switch")}
    titles = {"rope": "RoPE on (solid), off (dashed)", "static": "static covariates off (solid), on (dotted)",
              "switch": "switch at epoch 3 (green), seed 1"}
    styles = {"base": "-", "rope_off": "--", "static": ":", "switch": "-."}
    colours = {"continuous": "tab:blue", "softmax": "tab:red"}
    for name, variants in panels.items():
        if not data[variants[1]]:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for variant in variants:
            for attention in ATTENTIONS:
                rows = [c for (a, seed), c in sorted(data[variant].items())
                        if a == attention and (name != "switch" or seed == 1)]       # the switch: seed 1 beside seed 1
                if not rows:
                    continue
                values = np.asarray(rows) * 1e3
                epochs = np.arange(1, values.shape[1] + 1)
                mean = values.mean(0)
                std = values.std(0, ddof=1) if len(values) > 1 else np.zeros_like(mean)
                label = f"{'switch softmax->continuous' if variant == 'switch' else attention}, {variant} ({len(values)})"
                colour = "tab:green" if variant == "switch" else colours[attention]
                ax.plot(epochs, mean, styles[variant], marker="o", color=colour, label=label)
                ax.fill_between(epochs, mean - std, mean + std, color=colour, alpha=0.1)
        ax.set(title=f"PhysioNet 2012: {titles[name]}", xlabel="epoch", ylabel="validation MSE (e-3), mean +- std",
               xticks=range(1, EPOCHS + 1))
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = prefix.parent / f"{prefix.name}_{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=pathlib.Path, default=ROOT / "runs")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "ablations.jsonl")
    parser.add_argument("--plot-prefix", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "ablation")
    parser.add_argument("--report", action="store_true", help="only the tables and plots of the finished runs")
    args = parser.parse_args(argv)
    if not args.report:
        for variant in args.variants:
            _, _, attentions, seeds = VARIANTS[variant]
            for seed in seeds:
                for attention in attentions:
                    train(variant, attention, seed, args)
    print(report(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
