"""Train and test one model under the standard long-horizon protocol; append the result.

    python benchmarks/run_protocol.py --dataset ETTh1 --attention softmax --epochs 100 --seed 2021
    python benchmarks/run_protocol.py --config configs/ETTh1/patchtst_continuous_96.yaml --epochs 30

A run reads a config of ``configs/`` (default: ``configs/<dataset>/patchtst_<attention>_<horizon>.yaml``)
for the model, schedule and data, overrides epochs / seed / attention when given, trains with
Lightning (checkpoint on the best validation MSE, early stopping as the config says), tests the
best checkpoint on every test window, and appends one JSON line to ``benchmarks/results/runs.jsonl``
with the metrics, epochs, seconds per epoch, command, and git commit.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

import torch
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lightning.pytorch as pl  # noqa: E402
from lightning.pytorch.callbacks import Callback, EarlyStopping, ModelCheckpoint  # noqa: E402
from lightning.pytorch.loggers import CSVLogger  # noqa: E402

from tsattn.data import CSVDataModule  # noqa: E402
from tsattn.lightning import AttentionSwitch, ForecastModule  # noqa: E402


class EpochTimer(Callback):
    def __init__(self) -> None:
        self.seconds: list[float] = []

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self.seconds.append(time.perf_counter() - self._start)


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)benchmarks/results"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=pathlib.Path)
    parser.add_argument("--dataset", default="ETTh1")
    parser.add_argument("--attention", choices=["softmax", "continuous"])
    parser.add_argument("--horizon", type=int, default=96)
    parser.add_argument("--epochs", type=int, help="override trainer.max_epochs")
    parser.add_argument("--patience", type=int, help="override the early-stopping patience")
    parser.add_argument("--seed", type=int, help="override every seed of the config")
    parser.add_argument("--sink", choices=["zeros", "first", "learned"])
    parser.add_argument("--rope", action="store_true", help="turn RoPE on")
    parser.add_argument("--switch-epoch", type=int, help="train softmax, switch to continuous at this epoch")
    parser.add_argument("--model-kwargs", type=json.loads, default={}, help='JSON, e.g. \'{"head_dropout": 0}\'')
    parser.add_argument("--threads", type=int, help="torch.set_num_threads")
    parser.add_argument("--tag", default="", help="free text stored with the result")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "runs.jsonl")
    args = parser.parse_args()
    commit = git_commit()  # the code this run imports; HEAD may move while it trains
    if args.threads:
        torch.set_num_threads(args.threads)

    attention = args.attention or "softmax"
    path = args.config or ROOT / "configs" / args.dataset / f"patchtst_{attention}_{args.horizon}.yaml"
    cfg = yaml.safe_load(path.read_text())
    model_cfg, data_cfg, trainer_cfg = dict(cfg["model"]), dict(cfg["data"]), dict(cfg["trainer"])
    if args.attention:
        model_cfg["attention"] = args.attention
    if args.sink:
        model_cfg["sink"] = args.sink
    if args.rope:
        model_cfg["rope"] = True
    model_cfg["model_kwargs"] = {**(model_cfg.get("model_kwargs") or {}), **args.model_kwargs}
    seed = args.seed if args.seed is not None else cfg.get("seed_everything", 2021)
    model_cfg["seed"] = data_cfg["seed"] = seed
    if args.switch_epoch is not None:
        model_cfg["attention"] = "softmax"
    max_epochs = args.epochs or trainer_cfg.get("max_epochs", 100)
    patience = args.patience
    if patience is None:
        patience = next((c["init_args"]["patience"] for c in trainer_cfg.get("callbacks", [])
                         if c["class_path"].endswith("EarlyStopping")), max_epochs)

    pl.seed_everything(seed, workers=True)
    dm = CSVDataModule(**data_cfg)
    dm.setup("fit")
    module = ForecastModule(n_channels=dm.n_channels_in, lookback=dm.lookback, horizon=dm.horizon,
                            target_index=dm.target_index, **model_cfg)
    name = f"{dm.hparams['data']}_{model_cfg['model']}_{model_cfg['attention']}_h{dm.horizon}_s{seed}"
    if args.switch_epoch is not None:
        name += f"_switch{args.switch_epoch}"
    root = ROOT / "runs" / name
    timer = EpochTimer()
    checkpoint = ModelCheckpoint(dirpath=root / "checkpoints", monitor="val_mse", mode="min", save_top_k=1)
    callbacks = [checkpoint, EarlyStopping(monitor="val_mse", mode="min", patience=patience), timer]
    if args.switch_epoch is not None:
        callbacks.append(AttentionSwitch(args.switch_epoch, "continuous"))
    trainer = pl.Trainer(max_epochs=max_epochs, deterministic=True, callbacks=callbacks,
                         logger=CSVLogger(root, name="logs"), enable_progress_bar=False, accelerator="cpu")
    start = time.perf_counter()
    trainer.fit(module, datamodule=dm)
    fit_seconds = time.perf_counter() - start
    test = trainer.test(module, datamodule=dm, ckpt_path=checkpoint.best_model_path, verbose=False)[0]
    best_epoch = int(torch.load(checkpoint.best_model_path, weights_only=True, map_location="cpu")["epoch"])
    record = {
        "name": name, "dataset": dm.hparams["data"], "model": model_cfg["model"],
        "attention": model_cfg["attention"], "sink": model_cfg["sink"], "rope": model_cfg["rope"],
        "switch_epoch": args.switch_epoch, "horizon": dm.horizon, "lookback": dm.lookback, "seed": seed,
        "epochs_run": trainer.current_epoch, "best_epoch": best_epoch + 1, "max_epochs": max_epochs,
        "patience": patience, "best_val_mse": float(checkpoint.best_model_score),
        **{k: float(v) for k, v in test.items()},
        "seconds_per_epoch_median": sorted(timer.seconds)[len(timer.seconds) // 2] if timer.seconds else None,
        "fit_seconds": fit_seconds, "config": str(path.relative_to(ROOT)) if path.is_absolute() else str(path),
        "model_kwargs": model_cfg["model_kwargs"], "command": " ".join(sys.argv), "commit": commit,
        "torch": torch.__version__, "threads": torch.get_num_threads(), "machine": platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M"), "tag": args.tag,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as fh:
        fh.write(json.dumps(record) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/tsattn-mpl")
    main()
