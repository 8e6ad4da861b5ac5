"""Plot the validation curves that ``run_protocol.py`` stores in its run records (``val_mse_curve``).

    python benchmarks/plot_curves.py --out benchmarks/results/switch_vardrop.png --title "..." \\
        "continuous=benchmarks/results/ensemble_members.jsonl:physionet2012_irregular_continuous_s[12]" \\
        "switch=benchmarks/results/switch_vardrop.jsonl:physionet2012_irregular_softmax_s[12]_switch8"

Each positional argument is ``LABEL=FILE:NAME[,NAME...]``: the runs named NAME (a shell-style pattern:
``*``, ``?``, ``[12]``) in the JSON lines of FILE (a resumed run appends a later record under its name: the
last one is read) make one line, their mean over runs per epoch, with a band of +- one standard deviation
where there are two or more (runs that stopped early count for the epochs they ran). ``--vline E`` marks
an epoch (a switch, say). Prints each line's best mean over the epochs that all its runs reached.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import pathlib
from typing import Optional, Sequence

import numpy as np


def read_curves(spec: str) -> tuple[str, list[list[float]]]:
    """``LABEL=FILE:NAME[,NAME...]`` -> (label, the runs' validation curves)."""
    label, sep, rest = spec.partition("=")
    path, sep2, names = rest.rpartition(":")
    if not (sep and sep2 and label and path and names):
        raise SystemExit(f"{spec!r}: give LABEL=FILE:NAME[,NAME...], e.g. continuous=runs.jsonl:physionet2012_s1")
    last: dict[str, dict] = {}
    with open(path) as fh:
        for line in fh:
            if line.strip():
                record = json.loads(line)
                last[record.get("name")] = record
    known = sorted(k for k in last if k)
    curves = []
    for pattern in names.split(","):
        matched = fnmatch.filter(known, pattern)
        if not matched:
            raise SystemExit(f"{path}: no record named {pattern!r} (names there: {known})")
        curves += [_curve(path, last[name], name) for name in matched]
    return label, curves


def _curve(path: str, record: dict, name: str) -> list[float]:
    curve = record.get("val_mse_curve")
    if not curve:
        raise SystemExit(f"{path}: the record {name!r} has no val_mse_curve")
    return [float(v) for v in curve]


def band(curves: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(epochs from 1, mean, std with ddof 1, 0 where one run) over the runs that reached each epoch."""
    width = max(len(c) for c in curves)
    values = np.full((len(curves), width), np.nan)
    for i, curve in enumerate(curves):
        values[i, :len(curve)] = curve
    counts = np.sum(~np.isnan(values), axis=0)
    mean = np.nanmean(values, axis=0)
    centred = np.where(np.isnan(values), 0.0, values - mean)
    std = np.sqrt(np.sum(centred ** 2, axis=0) / np.maximum(counts - 1, 1))
    return np.arange(1, width + 1), mean, np.where(counts > 1, std, 0.0)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lines", nargs="+", help="LABEL=FILE:NAME[,NAME...]")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="the PNG to write")
    parser.add_argument("--title", default="validation MSE per epoch")
    parser.add_argument("--vline", type=float, action="append", default=[], help="mark this epoch")
    args = parser.parse_args(argv)
    lines = [read_curves(spec) for spec in args.lines]

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label, curves in lines:
        epochs, mean, std = band(curves)
        ax.plot(epochs, mean * 1e3, marker="o", markersize=3, label=f"{label} ({len(curves)})")
        ax.fill_between(epochs, (mean - std) * 1e3, (mean + std) * 1e3, alpha=0.12)
        reached = min(len(c) for c in curves)        # the best mean over the epochs every run reached
        best = int(np.argmin(mean[:reached]))
        print(f"{label}: {len(curves)} runs, best mean {mean[best] * 1e3:.3f} e-3 at epoch {best + 1} "
              f"(of the {reached} epochs every run reached)")
    for epoch in args.vline:
        ax.axvline(epoch, color="grey", linestyle=":", linewidth=1)
    ax.set_title(args.title, fontsize=9)
    ax.set(xlabel="epoch", ylabel="validation MSE (e-3), mean +- std over runs")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.legend(fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    plt.close(fig)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
