"""The same series, more and more irregular: ETTh1 with each hourly row kept with probability p.

    python benchmarks/gap_experiment.py --p 1.0 0.5 0.2 --seeds 1
    python benchmarks/gap_experiment.py --report            # the table and the plot from the results

Every model forecasts the same targets: every surviving observation of the next 24 hours (in time)
after an origin, from the observations of the previous 96 hours (in time), at origins every 4 hours,
split by time 70/10/20, on z-scores fit on the train part (``configs/ETTh1-gaps/*.yaml``; rows are
dropped with ``subsample_seed=0``, so every model and seed sees the same surviving rows at a given
p). Models, everything else equal:

- ``continuous``: the irregular model, continuous attention with the real spacings ``dt``;
- ``softmax``: the same model with softmax attention and the same time information (RoPE on the
  real times, the queries' time features);
- ``softmax_rows``: the same softmax model reading every sample's rows as evenly spaced (row ranks
  instead of times: what a regular-grid model sees);
- ``patchtst``: the regular PatchTST (the paper's ETTh1 sizes, channel-independent, RevIN) on the
  surviving rows as if they were evenly spaced, what users do today: it reads the last
  ``L = round(96 p)`` rows before the origin (patch length ``max(4, round(16 p))``, stride half of
  it), forecasts the next 24 rows, and is scored on the rows that fall in the 24 hours after the
  origin (the k-th row after the origin against its k-th forecast row). It is trained on every
  window of the train part (targets before the train border), early-stopped on the val samples.

The first three run through ``benchmarks/run_protocol.py`` (the CLI's config path); ``patchtst``
here. Metrics: MSE / MAE per variable over all target points of the test split, then the mean over
variables. One JSON line per run in ``benchmarks/results/gap.jsonl``; ``--report`` prints the table
(mean +- std over seeds) and writes ``benchmarks/results/gap_mse.png``.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from typing import Any

import numpy as np
import torch
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import lightning.pytorch as pl  # noqa: E402
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint  # noqa: E402

from benchmarks import run_protocol  # noqa: E402
from tsattn.cli import build_cli  # noqa: E402
from tsattn.lightning import ForecastModule  # noqa: E402
from tsattn.lightning.metrics import PerVariableError  # noqa: E402

CONFIGS = {
    "continuous": ROOT / "configs" / "ETTh1-gaps" / "irregular_continuous.yaml",
    "softmax": ROOT / "configs" / "ETTh1-gaps" / "irregular_softmax.yaml",
    "softmax_rows": ROOT / "configs" / "ETTh1-gaps" / "irregular_softmax_rows.yaml",
}
MODELS = (*CONFIGS, "patchtst")
OUT = ROOT / "benchmarks" / "results" / "gap.jsonl"
PATCHTST = dict(n_layers=3, n_heads=4, d_model=16, d_ff=128, dropout=0.3, head_dropout=0.0)
HORIZON_ROWS = 24  # the most rows 24 hours can hold


# -- PatchTST on the surviving rows, read as evenly spaced -----------------------------------------
class RowWindows(torch.utils.data.Dataset):
    """Windows of ``lookback`` rows followed by ``HORIZON_ROWS`` rows, starting at ``starts``."""

    def __init__(self, rows: torch.Tensor, starts: np.ndarray, lookback: int) -> None:
        self.rows, self.starts, self.lookback = rows, starts, lookback

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        s = int(self.starts[i])
        return {"x": self.rows[s:s + self.lookback], "y": self.rows[s + self.lookback:s + self.lookback + HORIZON_ROWS]}


def surviving_rows(dm) -> tuple[np.ndarray, torch.Tensor]:
    """The data module's single series as rows: times [R] and scaled values [R, V] (rows are whole)."""
    obs = dm.observations
    times, first = np.unique(obs.time, return_index=True)
    row = np.searchsorted(times, obs.time)
    values = np.zeros((len(times), obs.n_variables))
    values[row, obs.variable] = dm.scaler.transform(obs.value, obs.variable)
    assert np.bincount(row, minlength=len(times)).min() == obs.n_variables, "rows must be whole"
    return times, torch.as_tensor(values, dtype=torch.float32)


def window_starts(times: np.ndarray, lookback: int, lo: float, hi: float) -> np.ndarray:
    """Starts of the windows whose target rows all lie in [lo, hi)."""
    starts = np.arange(len(times) - lookback - HORIZON_ROWS + 1)
    first, last = times[starts + lookback], times[starts + lookback + HORIZON_ROWS - 1]
    return starts[(first >= lo) & (last < hi)]


def score_patchtst(module: ForecastModule, dm, split: str, times: np.ndarray, rows: torch.Tensor,
                   lookback: int) -> dict[str, float]:
    """Protocol metrics of PatchTST on the data module's samples of ``split``: for each sample the
    last ``lookback`` rows before its origin in, the sample's target rows (in order) scored."""
    samples = dm.samples(split)
    metric = PerVariableError(rows.shape[1])
    module.eval()
    with torch.no_grad():
        for chunk in np.array_split(np.arange(len(samples)), max(1, len(samples) // 256)):
            origin = samples.origin[chunk]
            end = np.searchsorted(times, origin, side="left")          # first row at or after the origin
            keep = end >= lookback
            x = torch.stack([rows[e - lookback:e] for e in end[keep]])
            pred = module({"x": x})                                     # [n, 24, V]
            count = np.searchsorted(times, origin[keep] + dm.horizon, side="left") - end[keep]
            for p, e, c in zip(pred, end[keep], count):
                target = rows[e:e + c]                                  # [c, V], c <= 24
                var = torch.arange(rows.shape[1]).expand(c, -1)
                metric.update(p[:c], target, var, torch.ones_like(var, dtype=torch.bool))
            if not keep.all():
                raise RuntimeError(f"{int((~keep).sum())} {split} samples have fewer than {lookback} rows before them")
    return {k: float(v) for k, v in metric.compute().items()}


def run_patchtst(p: float, seed: int, epochs: int, patience: int, runs_dir: pathlib.Path) -> dict[str, Any]:
    config = yaml.safe_load(CONFIGS["continuous"].read_text())
    config["data"]["init_args"].update(subsample=p, seed=seed)
    config["trainer"] = {"logger": False, "enable_checkpointing": False}
    dm = build_cli(config, run=False).datamodule
    dm.setup()
    times, rows = surviving_rows(dm)
    lookback = max(8, round(96 * p))
    patch = max(4, round(16 * p))
    b1, b2 = (float(b) for b in np.ravel(dm.time_borders)[:2])
    pl.seed_everything(seed, workers=True, verbose=False)
    module = ForecastModule("patchtst", n_channels=rows.shape[1], lookback=lookback, horizon=HORIZON_ROWS,
                            attention="softmax", lr=1e-4, lr_schedule="type3", seed=seed,
                            model_kwargs=dict(PATCHTST, patch_len=patch, stride=max(1, patch // 2)))
    train = torch.utils.data.DataLoader(RowWindows(rows, window_starts(times, lookback, -np.inf, b1), lookback),
                                        batch_size=128, shuffle=True, generator=torch.Generator().manual_seed(seed))
    val = torch.utils.data.DataLoader(RowWindows(rows, window_starts(times, lookback, b1, b2), lookback), batch_size=256)
    root = runs_dir / f"ETTh1-gaps_patchtst_p{p}_s{seed}"
    checkpoint = ModelCheckpoint(dirpath=root, monitor="val_mse", mode="min")
    trainer = pl.Trainer(max_epochs=epochs, deterministic=True, logger=False, enable_progress_bar=False,
                         callbacks=[checkpoint, EarlyStopping(monitor="val_mse", mode="min", patience=patience)],
                         enable_model_summary=False, default_root_dir=root)
    start = time.perf_counter()
    trainer.fit(module, train_dataloaders=train, val_dataloaders=val)
    fit_seconds = time.perf_counter() - start
    module.load_state_dict(torch.load(checkpoint.best_model_path, weights_only=True)["state_dict"])
    val_scores = score_patchtst(module, dm, "val", times, rows, lookback)
    test = score_patchtst(module, dm, "test", times, rows, lookback)
    return {"val_mse": val_scores["mse"], "test_mse": test["mse"], "test_mae": test["mae"],
            "epochs_run": trainer.current_epoch, "fit_seconds": fit_seconds, "lookback_rows": lookback,
            "patch_len": patch}


# -- runs and report ----------------------------------------------------------------------------------
def run(model: str, p: float, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    if model == "patchtst":
        result = run_patchtst(p, seed, args.epochs, args.patience, args.runs_dir)
    else:
        record = run_protocol.main([
            "--config", str(CONFIGS[model]), "--seed", str(seed), "--epochs", str(args.epochs),
            "--patience", str(args.patience), "--set", f"data.init_args.subsample={p}",
            "--runs-dir", str(args.runs_dir), "--out", str(args.runs_out), "--tag", f"gap p={p}",
        ])
        result = {k: record[k] for k in ("best_val_mse", "test_mse", "test_mae", "epochs_run", "fit_seconds")}
        result["val_mse"] = result.pop("best_val_mse")
    return {"model": model, "p": p, "seed": seed, **result, "commit": run_protocol.git_commit(),
            "command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M")}


def report(path: pathlib.Path, plot: pathlib.Path) -> None:
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    table: dict[tuple[str, float], list[float]] = {}
    for r in records:
        table.setdefault((r["model"], r["p"]), []).append(r["test_mse"])
    ps = sorted({p for _, p in table}, reverse=True)
    print("| model | " + " | ".join(f"p = {p}" for p in ps) + " |")
    print("|---|" + "---|" * len(ps))
    for model in MODELS:
        cells = []
        for p in ps:
            v = np.array(table.get((model, p), []))
            cells.append("-" if v.size == 0 else f"{v.mean():.4f}" + (f" +- {v.std(ddof=1):.4f}" if v.size > 1 else "")
                         + f" ({v.size})")
        print(f"| {model} | " + " | ".join(cells) + " |")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for model in MODELS:
        pts = [(p, np.mean(table[(model, p)]), np.std(table[(model, p)])) for p in ps if (model, p) in table]
        if pts:
            x, y, e = zip(*pts)
            ax.errorbar(x, y, yerr=e, marker="o", capsize=3, label=model)
    ax.set_xlabel("p (fraction of hourly rows kept)")
    ax.set_ylabel("test MSE (z-scores)")
    ax.set_title("ETTh1, next 24 h from the previous 96 h")
    ax.invert_xaxis()
    ax.legend()
    fig.savefig(plot, dpi=120, bbox_inches="tight")
    print(f"plot: {plot}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--p", type=float, nargs="+", default=[1.0, 0.5, 0.2])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--runs-dir", type=pathlib.Path, default=ROOT / "runs" / "gaps")
    parser.add_argument("--runs-out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "runs.jsonl",
                        help="where run_protocol records the irregular models' runs")
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    parser.add_argument("--report", action="store_true", help="print the table and write the plot, run nothing")
    parser.add_argument("--plot", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "gap_mse.png")
    args = parser.parse_args()
    if args.report:
        report(args.out, args.plot)
        return
    for seed in args.seeds:
        for p in args.p:
            for model in args.models:
                record = run(model, p, seed, args)
                args.out.parent.mkdir(parents=True, exist_ok=True)
                with open(args.out, "a") as fh:
                    fh.write(json.dumps(record) + "\n")
                print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
