"""A Markdown table of ``run_protocol.py`` records: one row per run, then mean +- std per attention.

    python benchmarks/summarize_runs.py --tag "full protocol" --dataset physionet2012
    python benchmarks/summarize_runs.py --runs benchmarks/results/runs.jsonl --tag "gap p=0.5" --mse-unit 1
    python benchmarks/summarize_runs.py --match config=irregular_series_ --match "tag=series_layers=1"

Reads the JSON lines that ``run_protocol.py`` (and ``eval_checkpoint.py``) append (``--runs``, default
``benchmarks/results/runs.jsonl``), keeps the records that were tested, whose dataset is ``--dataset``
(when given) and that match the selection: the tag contains ``--tag``, or, for any ``--match
FIELD=TEXT`` (repeatable; a record is kept when any one matches), the record's FIELD contains TEXT.
It prints for each: attention, seed, epochs run
(best validation epoch), best validation MSE, test MSE and MAE (in units of ``--mse-unit`` /
``--mae-unit``: 1e-3 and 1e-2 by default, the PhysioNet table's), median seconds per epoch and the
commit (a checkpoint evaluated by ``eval_checkpoint.py`` has no epoch count or timing: "-"). Then,
per attention, the mean +- standard deviation over its seeds (the sample standard deviation, n - 1 in
the denominator). Runs of different models are kept apart: when the selection's records differ in
their model settings (model, sink, RoPE, rate, switch epoch, ``model_kwargs`` and ``--set`` overrides;
the attention and the split aside), a ``model`` column names each record's differing settings and the
mean +- std is per (model, attention); an evaluated checkpoint's record has no ``model_kwargs`` and
shows as "not recorded". Runs on another split of the data (``split_seed``, in the record or among its
``--set`` overrides) are kept apart and get a ``split`` column. When a (model, attention, seed, split)
appears more than once in the selection, the latest record counts. Records without an attention (the
baselines of ``irregular_baselines.py``) are not runs of a model and are left out.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
from typing import Any, Optional, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[1]


def parse_match(text: str) -> tuple[str, str]:
    """``FIELD=TEXT`` -> (FIELD, TEXT); the first ``=`` splits, so TEXT may hold more."""
    field, sep, value = text.partition("=")
    if not sep or not field or not value:
        raise argparse.ArgumentTypeError(f"--match takes FIELD=TEXT (e.g. config=irregular_series_), got {text!r}")
    return field, value


def selected(record: dict[str, Any], tag: Optional[str], matches: Sequence[tuple[str, str]]) -> bool:
    """Whether ``record`` is in the selection: its tag contains ``tag``, or any (FIELD, TEXT) of ``matches``
    has TEXT in the record's FIELD (a missing field matches nothing)."""
    if tag is not None and tag in (record.get("tag") or ""):
        return True
    return any(text in str(record.get(field) or "") for field, text in matches)


def split_of(record: dict[str, Any]) -> Optional[int]:
    """The record's data split seed: ``split_seed`` (recorded since it was added), else a ``--set
    ...split_seed=S`` override; None for the data's own split."""
    if record.get("split_seed") is not None:
        return int(record["split_seed"])
    for override in record.get("overrides") or ():
        key, _, value = str(override).partition("=")
        if key.split(".")[-1] == "split_seed" and value.strip() not in ("", "null", "None"):
            return int(value)
    return None


def split_label(record: dict[str, Any]) -> str:
    """The record's split for the table: its split seed, "-" for the data's own split."""
    split = split_of(record)
    return "-" if split is None else str(split)


SETTINGS = ("model", "sink", "rope", "lr", "switch_epoch")


def settings(record: dict[str, Any]) -> Optional[dict[str, str]]:
    """What makes the record's model (the attention and the split aside): its ``SETTINGS`` fields, its
    ``model_kwargs`` and its ``--set`` overrides other than the split seed (a ``model.model_kwargs.K``
    override is in ``model_kwargs`` already); None when the record has no ``model_kwargs`` (an evaluated
    checkpoint's)."""
    if record.get("model_kwargs") is None:
        return None
    out = {field: json.dumps(record.get(field)) for field in SETTINGS}
    out.update({key: json.dumps(value, sort_keys=True) for key, value in record["model_kwargs"].items()})
    for override in record.get("overrides") or ():
        key, _, value = str(override).partition("=")
        if key.split(".")[-1] != "split_seed" and not key.startswith("model.model_kwargs."):
            out[key] = value
    return out


def model_labels(records: Sequence[dict[str, Any]]) -> list[str]:
    """Per record, the settings in which the records' models differ ("K=V K=V"; "-" for none of them, "not
    recorded" for a record without settings); all "" when they are one model."""
    known = [settings(r) for r in records]
    keys = {key for s in known if s is not None for key in s}
    differ = sorted(key for key in keys if len({s.get(key) for s in known if s is not None}) > 1)
    if not differ:
        return [""] * len(records)
    return ["not recorded" if s is None else " ".join(f"{key}={s[key]}" for key in differ if key in s) or "-"
            for s in known]


def load_records(paths: Sequence[pathlib.Path], tag: Optional[str], dataset: Optional[str],
                 matches: Sequence[tuple[str, str]] = ()) -> list[dict[str, Any]]:
    """The tested model records of ``paths`` in the selection (see ``selected``), the latest per
    (model, attention, seed, split), each with its ``model`` label under the key ``"_model"``."""
    kept: list[dict[str, Any]] = []
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if not selected(record, tag, matches) or "test_mse" not in record:
                continue
            if dataset is not None and record.get("dataset") != dataset:
                continue
            if record.get("attention") is None:                  # a baseline's record, not a model run
                continue
            kept.append(record)
    latest: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for record, label in zip(kept, model_labels(kept)):
        split = split_of(record)
        latest[(label, record["attention"], record["seed"], -1 if split is None else split)] = dict(
            record, _model=label)
    return [latest[key] for key in sorted(latest)]


def best_val(record: dict[str, Any]) -> float:
    """The best validation MSE: ``best_val_mse`` of a protocol run, ``val_mse`` of an evaluated checkpoint."""
    return record["best_val_mse"] if "best_val_mse" in record else record["val_mse"]


def mean_std(values: Sequence[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.2f} (one seed)"
    return f"{statistics.fmean(values):.2f} +- {statistics.stdev(values):.2f}"


def table(records: Sequence[dict[str, Any]], mse_unit: float, mae_unit: float) -> str:
    """The Markdown table of ``records`` (see the module docstring)."""
    units = f"(x{mse_unit:g})", f"(x{mae_unit:g})"
    splits = any(split_of(r) is not None for r in records)
    models = any(r.get("_model") for r in records)
    split_head, split_rule = ("split | ", "---|") if splits else ("", "")
    model_head, model_rule = ("model | ", "---|") if models else ("", "")
    lines = [f"| {model_head}attention | seed | {split_head}epochs (best) | best val MSE {units[0]} | "
             f"test MSE {units[0]} | test MAE {units[1]} | s / epoch | commit |",
             f"|{model_rule}---|---|{split_rule}---|---|---|---|---|---|"]
    for r in records:
        seconds = r.get("seconds_per_epoch_median")
        split = f"{split_label(r)} | " if splits else ""
        model = f"{r['_model']} | " if models else ""
        lines.append(
            f"| {model}{r['attention']} | {r['seed']} | {split}{r.get('epochs_run', '-')} ({r['best_epoch']}) | "
            f"{best_val(r) / mse_unit:.2f} | {r['test_mse'] / mse_unit:.2f} | {r['test_mae'] / mae_unit:.2f} | "
            f"{'-' if seconds is None else f'{seconds:.0f}'} | {r['commit']} |"
        )
    for label, attention in sorted({(r.get("_model", ""), r["attention"]) for r in records}):
        own = [r for r in records if (r.get("_model", ""), r["attention"]) == (label, attention)]
        seeds = ",".join(str(r["seed"]) for r in own)
        split = ",".join(split_label(r) for r in own) + " | " if splits else ""
        model = f"{label} | " if models else ""
        lines.append(
            f"| {model}**{attention}: mean +- std** | {seeds} | {split}| "
            f"{mean_std([best_val(r) / mse_unit for r in own])} | "
            f"**{mean_std([r['test_mse'] / mse_unit for r in own])}** | "
            f"**{mean_std([r['test_mae'] / mae_unit for r in own])}** | | |"
        )
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=pathlib.Path, nargs="+", default=[ROOT / "benchmarks" / "results" / "runs.jsonl"])
    parser.add_argument("--tag", help="keep the records whose tag contains this text")
    parser.add_argument("--match", type=parse_match, action="append", default=[], metavar="FIELD=TEXT",
                        help="keep the records whose FIELD contains TEXT (repeatable: any one suffices)")
    parser.add_argument("--dataset", help="keep only this dataset's records")
    parser.add_argument("--mse-unit", type=float, default=1e-3)
    parser.add_argument("--mae-unit", type=float, default=1e-2)
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.runs if not p.is_file()]
    if missing:
        parser.error(f"no such file: {missing}; pass the JSON lines run_protocol.py wrote (--out)")
    if args.tag is None and not args.match:
        parser.error("say which records: --tag TEXT and/or --match FIELD=TEXT")
    records = load_records(args.runs, args.tag, args.dataset, args.match)
    if not records:
        wanted = ([f"a tag containing {args.tag!r}"] if args.tag is not None else []) + \
            [f"{field} containing {text!r}" for field, text in args.match]
        parser.error(f"no tested record with {' or '.join(wanted)}"
                     + (f" on {args.dataset!r}" if args.dataset else "") + f" in {[str(p) for p in args.runs]}")
    text = table(records, args.mse_unit, args.mae_unit)
    print(text)
    return text


if __name__ == "__main__":
    main()
