"""A Markdown table of ``run_protocol.py`` records: one row per run, then mean +- std per attention.

    python benchmarks/summarize_runs.py --tag "full protocol" --dataset physionet2012
    python benchmarks/summarize_runs.py --runs benchmarks/results/runs.jsonl --tag "gap p=0.5" --mse-unit 1

Reads the JSON lines that ``run_protocol.py`` appends (``--runs``, default
``benchmarks/results/runs.jsonl``), keeps the records whose tag contains ``--tag`` (and whose dataset
is ``--dataset``, when given) and that were tested, and prints for each: attention, seed, epochs run
(best validation epoch), best validation MSE, test MSE and MAE (in units of ``--mse-unit`` /
``--mae-unit``: 1e-3 and 1e-2 by default, the PhysioNet table's), median seconds per epoch and the
commit. Then, per attention, the mean +- standard deviation over its seeds (the sample standard
deviation, n - 1 in the denominator). When a seed was run more than once with the same tag, the
latest record counts.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
from typing import Any, Optional, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_records(paths: Sequence[pathlib.Path], tag: str, dataset: Optional[str]) -> list[dict[str, Any]]:
    """The tested records of ``paths`` whose tag contains ``tag``, the latest per (attention, seed)."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if tag not in (record.get("tag") or "") or "test_mse" not in record:
                continue
            if dataset is not None and record.get("dataset") != dataset:
                continue
            latest[(record["attention"], record["seed"])] = record
    return [latest[key] for key in sorted(latest)]


def mean_std(values: Sequence[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.2f} (one seed)"
    return f"{statistics.fmean(values):.2f} +- {statistics.stdev(values):.2f}"


def table(records: Sequence[dict[str, Any]], mse_unit: float, mae_unit: float) -> str:
    """The Markdown table of ``records`` (see the module docstring)."""
    units = f"(x{mse_unit:g})", f"(x{mae_unit:g})"
    lines = [f"| attention | seed | epochs (best) | best val MSE {units[0]} | test MSE {units[0]} | "
             f"test MAE {units[1]} | s / epoch | commit |", "|---|---|---|---|---|---|---|---|"]
    for r in records:
        seconds = r.get("seconds_per_epoch_median")
        lines.append(
            f"| {r['attention']} | {r['seed']} | {r['epochs_run']} ({r['best_epoch']}) | "
            f"{r['best_val_mse'] / mse_unit:.2f} | {r['test_mse'] / mse_unit:.2f} | {r['test_mae'] / mae_unit:.2f} | "
            f"{'-' if seconds is None else f'{seconds:.0f}'} | {r['commit']} |"
        )
    for attention in sorted({r["attention"] for r in records}):
        own = [r for r in records if r["attention"] == attention]
        seeds = ",".join(str(r["seed"]) for r in own)
        lines.append(
            f"| **{attention}: mean +- std** | {seeds} | | {mean_std([r['best_val_mse'] / mse_unit for r in own])} | "
            f"**{mean_std([r['test_mse'] / mse_unit for r in own])}** | "
            f"**{mean_std([r['test_mae'] / mae_unit for r in own])}** | | |"
        )
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=pathlib.Path, nargs="+", default=[ROOT / "benchmarks" / "results" / "runs.jsonl"])
    parser.add_argument("--tag", required=True, help="keep the records whose tag contains this text")
    parser.add_argument("--dataset", help="keep only this dataset's records")
    parser.add_argument("--mse-unit", type=float, default=1e-3)
    parser.add_argument("--mae-unit", type=float, default=1e-2)
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.runs if not p.is_file()]
    if missing:
        parser.error(f"no such file: {missing}; pass the JSON lines run_protocol.py wrote (--out)")
    records = load_records(args.runs, args.tag, args.dataset)
    if not records:
        parser.error(f"no tested record with a tag containing {args.tag!r}"
                     + (f" on {args.dataset!r}" if args.dataset else "") + f" in {[str(p) for p in args.runs]}")
    text = table(records, args.mse_unit, args.mae_unit)
    print(text)
    return text


if __name__ == "__main__":
    main()
