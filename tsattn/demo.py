"""``make demo``: continuous vs softmax attention in PatchTST on ETTh1, on the CPU, in about two minutes.

    python -m tsattn.demo [--epochs 3] [--out demo_out] [--data ETTh1]

Trains the paper's PatchTST/42 (L = 336, H = 96) twice with the same seed and short schedule, once
with softmax and once with continuous attention, prints the test MSE / MAE of both (scaled data,
every test window), and writes a forecast-vs-actual plot of one test window. A short schedule
does not reproduce the paper's numbers (100 epochs); ``benchmarks/run_protocol.py`` does.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import time

from .api import Forecaster

PATCHTST_42 = {"n_layers": 3, "n_heads": 4, "d_model": 16, "d_ff": 128, "dropout": 0.3, "head_dropout": 0.0}


def fit_variant(attention: str, data: str, epochs: int, seed: int, out: pathlib.Path, max_batches):
    forecaster = Forecaster("patchtst", attention=attention, lookback=336, horizon=96, model_kwargs=PATCHTST_42,
                            lr=1e-4, lr_schedule="type3", batch_size=128, seed=seed)
    start = time.perf_counter()
    forecaster.fit(data, max_epochs=epochs, default_root_dir=out / attention, logger=False,
                   limit_train_batches=max_batches, enable_model_summary=False)
    seconds = time.perf_counter() - start
    return forecaster, forecaster.evaluate("test"), seconds


def forecast_figure(forecasters: dict, window: int = 1000, channel: str = "OT"):
    """Figure of one test window: history, actual, and each fitted Forecaster's forecast (original units).

    Args:
        forecasters: name -> fitted ``Forecaster``, all fit on the same data.
        window: test window index.
        channel: the channel to draw (an input and an output channel).
    """
    import matplotlib.pyplot as plt

    first = next(iter(forecasters.values()))
    dm = first.datamodule
    item = dm.test_dataset[window]
    history = dm.inverse_transform_input(item["x"])[:, dm.channel_names.index(channel)]
    out = dm.target_names.index(channel)
    actual = dm.inverse_transform_target(item["y"])[:, out]
    t_hist = dm.timestamps_for("test", window, lookback=True)
    t_future = dm.timestamps_for("test", window)
    fig, ax = plt.subplots(figsize=(11, 4))
    ax.plot(t_hist[-192:], history[-192:].numpy(), color="0.4", lw=1, label="history")
    ax.plot(t_future, actual.numpy(), color="k", lw=1.5, label="actual")
    for name, f in forecasters.items():
        pred = f.module.forecast({"x": item["x"][None], "t_x": item["t_x"][None]})[0]  # [H, C_out], original units
        style = "--" if name == "continuous" else "-"  # the two can overlap closely
        ax.plot(t_future, pred[:, out].numpy(), style, lw=1.5, label=f"{name} attention")
    ax.set_title(f"{channel}: test window {window}, {dm.horizon}-step forecast from {dm.lookback} steps")
    ax.legend(loc="upper left")
    fig.autofmt_xdate()
    return fig


def plot_window(forecasters: dict, out: pathlib.Path, window: int = 1000, channel: str = "OT") -> pathlib.Path:
    """Write ``forecast_figure`` to ``out/forecast_vs_actual.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = forecast_figure(forecasters, window, channel)
    path = out / "forecast_vs_actual.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="ETTh1", help="registered name or CSV path (with an OT column)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--max-batches", type=int, default=None, help="train batches per epoch (default: all)")
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("demo_out"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MPLCONFIGDIR", str(args.out / ".mpl"))

    results, forecasters = {}, {}
    for attention in ("softmax", "continuous"):
        print(f"== PatchTST/42 with {attention} attention: {args.epochs} epochs on {args.data}", flush=True)
        forecasters[attention], results[attention], seconds = fit_variant(
            attention, args.data, args.epochs, args.seed, args.out, args.max_batches)
        results[attention]["seconds"] = seconds
    print(f"\nETTh1, L=336, H=96, {args.epochs} epochs, seed {args.seed}; test metrics on the scaled data")
    print(f"{'attention':<12}{'MSE':>8}{'MAE':>8}{'fit s':>8}")
    for attention, r in results.items():
        print(f"{attention:<12}{r['mse']:>8.4f}{r['mae']:>8.4f}{r['seconds']:>8.0f}")
    print(f"\nplot: {plot_window(forecasters, args.out)}")


if __name__ == "__main__":
    main()
