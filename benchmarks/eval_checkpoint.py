"""Test a saved checkpoint under the protocol and append the result (e.g. of a run stopped early).

    python benchmarks/eval_checkpoint.py runs/ETTh1_patchtst_softmax_h96_s2021/checkpoints/epoch=41-step=2730.ckpt

Loads the checkpoint (weights, hyperparameters and the data it was fit on), optionally switches
its attention kind (``--attention``: the same weights under the other attention), evaluates the
val and test splits on every window, and appends one JSON line to ``benchmarks/results/runs.jsonl`` with
the checkpoint's epoch, the metrics, the command and the commit.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import sys
import tempfile
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.run_protocol import git_commit  # noqa: E402
from tsattn import Forecaster  # noqa: E402
from tsattn.nn import MultiHeadAttention, set_attention  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", type=pathlib.Path)
    parser.add_argument("--attention", choices=["softmax", "continuous"],
                        help="evaluate with this attention instead of the trained one (same weights)")
    parser.add_argument("--accelerator", default="auto", help="where to evaluate (default: auto, a GPU if there is one)")
    parser.add_argument("--tag", default="", help="free text stored with the result")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "runs.jsonl")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:  # a training run may replace the file while we read it
        path = pathlib.Path(tmp) / "model.ckpt"
        shutil.copy(args.checkpoint, path)
        raw = torch.load(path, map_location="cpu", weights_only=True)
        f = Forecaster.load(path)
        f.module.hparams.compile = False  # evaluation only: no compile time
        trained = next(m.attention for m in f.module.modules() if isinstance(m, MultiHeadAttention))
        if args.attention:
            set_attention(f.module, args.attention)
        val, test = f.evaluate("val", accelerator=args.accelerator), f.evaluate("test", accelerator=args.accelerator)
    hp = f.module.hparams
    record = {
        "name": args.checkpoint.parent.parent.name, "dataset": (f.data_record or {}).get("source"),
        "model": hp.model, "attention": args.attention or trained, "trained_attention": trained, "sink": hp.sink, "rope": hp.rope, "horizon": hp.horizon,
        "lookback": hp.lookback, "seed": hp.seed, "best_epoch": int(raw["epoch"]) + 1,
        "val_mse": val["mse"], **{f"test_{k}": v for k, v in test.items()},
        "checkpoint": str(args.checkpoint), "command": " ".join(sys.argv), "commit": git_commit(),
        "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M"), "tag": args.tag,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as fh:
        fh.write(json.dumps(record) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
