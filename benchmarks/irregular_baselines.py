"""Reference forecasts under an irregular protocol: the last observed value, and the variable's mean.

    python benchmarks/irregular_baselines.py --config configs/physionet2012/irregular_continuous.yaml

Builds the data module of the config exactly as the CLI does (same split, scaling, history and
targets), sets the per-variable means from the train split's observations (scaled units), and
scores both baselines on val and test with the protocol's metric (per variable over all target
points, then the mean over variables; scaled and in units). Appends one JSON line per baseline to
``benchmarks/results/runs.jsonl``.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import torch
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.run_protocol import git_commit, set_option  # noqa: E402
from tsattn.cli import build_cli  # noqa: E402
from tsattn.lightning.metrics import PerVariableError  # noqa: E402
from tsattn.models.baselines import LastObservation, VariableMean, variable_means  # noqa: E402

_INPUTS = ("x_time", "x_var", "x_value", "x_mask", "y_time", "y_var", "y_mask")


def score(model: torch.nn.Module, loader, scale: torch.Tensor, n_variables: int) -> dict[str, float]:
    """The protocol's MSE / MAE of ``model`` over every batch of ``loader`` (scaled and in units)."""
    scaled, units = PerVariableError(n_variables), PerVariableError(n_variables, scale=scale)
    with torch.no_grad():
        for batch in loader:
            pred = model(*(batch[k] for k in _INPUTS))
            for metric in (scaled, units):
                metric.update(pred, batch["y_value"], batch["y_var"], batch["y_mask"])
    out = {k: float(v) for k, v in scaled.compute().items()}
    out.update({f"{k}_orig": float(v) for k, v in units.compute().items()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=pathlib.Path, required=True)
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--tag", default="")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "runs.jsonl")
    args = parser.parse_args()
    config = yaml.safe_load(args.config.read_text())
    config["trainer"] = {"logger": False, "enable_checkpointing": False}
    for assignment in args.set:
        set_option(config, assignment)
    dm = build_cli(config, run=False).datamodule
    dm.setup()
    V = dm.n_variables
    means = variable_means(dm.train_dataloader(), V)
    scale = torch.as_tensor(dm.scaler.scale, dtype=torch.float64)
    commit = git_commit()
    for name, cls in (("last_observation", LastObservation), ("variable_mean", VariableMean)):
        model = cls(V)
        model.fit_means(means)
        start = time.perf_counter()
        val = score(model, dm.val_dataloader(), scale, V)
        test = score(model, dm.test_dataloader(), scale, V)
        record = {
            "name": f"{config['data']['init_args']['data']}_{name}", "dataset": config["data"]["init_args"]["data"],
            "model": name, **{f"val_{k}": v for k, v in val.items()}, **{f"test_{k}": v for k, v in test.items()},
            "seconds": time.perf_counter() - start, "config": str(args.config), "overrides": args.set,
            "command": " ".join(sys.argv), "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M"), "tag": args.tag,
        }
        with open(args.out, "a") as fh:
            fh.write(json.dumps(record) + "\n")
        print(json.dumps(record))


if __name__ == "__main__":
    main()
