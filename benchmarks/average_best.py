"""A user's fit, twice read: the best validation epoch against the mean of the k best epochs' weights.

    TSATTN_DATA_DIR=../shared/data python benchmarks/average_best.py --data ETTh1 --seeds 1 2 3 --max-epochs 10 \
        --test --out benchmarks/results/average_best.jsonl
    python benchmarks/average_best.py --data my.csv --model patchtst --lookback 96 --horizon 24 --fit-option target=OT

``Forecaster(model, lookback=, horizon=, seed=)`` with the model's defaults otherwise (what ``Forecaster(model)``
trains with: for PatchTST the paper's ETTh1 settings), then ``fit(data, max_epochs=, patience=,
average_best=k)``: one run gives both models, the mean of the k best epochs' weights (what ``fit`` keeps
with ``average_best``) and the best epoch's (the first weights ``BestEpochsAverage`` kept). Each is evaluated
on the validation split and, with ``--test``, on the test split (``Forecaster.evaluate``: MSE / MAE on the
scaled data and in original units). One JSON line per seed with both, the epochs averaged, the validation
curve, the settings, the command and the commit. The question it answers: should ``fit`` average by default
(``average_best``), on this data and model?
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time
from typing import Any, Optional, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.run_protocol import git_commit  # noqa: E402


def _value(text: str) -> Any:
    """A ``--fit-option`` value: JSON where it parses (numbers, lists, true/false), else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def run_seed(args: argparse.Namespace, seed: int, fit_options: dict[str, Any]) -> dict[str, Any]:
    import torch

    from tsattn import Forecaster
    from tsattn.lightning import BestEpochsAverage

    settings = {"lookback": args.lookback, "horizon": args.horizon, "seed": seed}
    if args.model_kwargs:
        settings["model_kwargs"] = json.loads(args.model_kwargs)
    model = Forecaster(args.model, **settings)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tsattn-average-best-") as root:
        model.fit(args.data, max_epochs=args.max_epochs, patience=args.patience, average_best=args.k,
                  default_root_dir=root, logger=False, enable_progress_bar=False, enable_model_summary=False,
                  **fit_options)
    fit_seconds = time.perf_counter() - start
    average = next(c for c in model.trainer.callbacks if isinstance(c, BestEpochsAverage))
    splits = ["val", "test"] if args.test else ["val"]
    record: dict[str, Any] = {"averaged": {s: model.evaluate(s) for s in splits}}
    model.module.load_state_dict(average.kept[0][2])                     # then the best epoch's weights
    record["best_epoch"] = {s: model.evaluate(s) for s in splits}
    return {"data": str(args.data), "model": args.model, "seed": seed, "k": args.k,
            "lookback": model.lookback, "horizon": model.horizon, "max_epochs": args.max_epochs,
            "patience": args.patience, "epochs_run": len(average.scores),
            "best": average.kept[0][1] + 1, "averaged_epochs": [e + 1 for e in average.averaged_epochs],
            "val_mse_curve": [score for _, score in average.scores], **record,
            "config": {k: v for k, v in model.config.items() if k != "model"}, "batch_size": model.batch_size,
            "fit_options": fit_options, "fit_seconds": fit_seconds, "threads": torch.get_num_threads()}


def main(argv: Optional[Sequence[str]] = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a registered dataset name or a CSV path")
    parser.add_argument("--model", default="patchtst")
    parser.add_argument("--lookback", type=_value, default=None, help="default: the model's")
    parser.add_argument("--horizon", type=_value, default=None, help="default: the model's")
    parser.add_argument("--model-kwargs", help="JSON, e.g. '{\"d_model\": 8}' (default: the model's)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--max-epochs", type=int, default=10, help="fit's default: 10")
    parser.add_argument("--patience", type=int, default=None, help="early stopping (default: none, as fit)")
    parser.add_argument("--k", type=int, default=3, help="the k best epochs averaged (default 3)")
    parser.add_argument("--fit-option", action="append", default=[], metavar="KEY=VALUE",
                        help="another fit option (data reading or Trainer), e.g. target=OT, limit_train_batches=4")
    parser.add_argument("--test", action="store_true", help="evaluate the test split too (fix k beforehand)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--tag", default="")
    parser.add_argument("--out", type=pathlib.Path, help="append one JSON line per seed here")
    args = parser.parse_args(argv)
    for option in args.fit_option:
        if "=" not in option:
            raise SystemExit(f"--fit-option wants KEY=VALUE, got {option!r}")
    fit_options = {key: _value(value) for key, value in (o.split("=", 1) for o in args.fit_option)}
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    stamp = {"commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M"), "tag": args.tag,
             "command": " ".join(["average_best.py", *(sys.argv[1:] if argv is None else argv)])}
    records = []
    for seed in args.seeds:
        record = {**run_seed(args, seed, fit_options), **stamp}
        print(json.dumps(record), flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with open(args.out, "a") as fh:
                fh.write(json.dumps(record) + "\n")
        records.append(record)
    return records


if __name__ == "__main__":
    main()
