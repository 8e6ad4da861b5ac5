"""``make demo``: continuous vs softmax attention in PatchTST on ETTh1, on the CPU, in about two minutes.

    python -m tsattn.demo [--epochs 3] [--out demo_out] [--data ETTh1]

Trains the paper's PatchTST/42 (L = 336, H = 96) twice with the same seed and short schedule, once
with softmax and once with continuous attention, each forecasting a point and an 80% interval (the
10% and 90% quantiles, trained with the pinball loss on the point forecast's features, which they
leave as a point model trains them, and calibrated on the validation split). Prints the test MSE /
MAE (scaled data, every test window) and the share of test values inside the 80% interval, and
writes a plot of the last test window: the history, what was observed, both forecasts and the
continuous model's interval. A short schedule does not reproduce the paper's numbers (100 epochs);
``benchmarks/run_protocol.py`` does.
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
                            lr=1e-4, lr_schedule="type3", batch_size=128, seed=seed, levels=[80], calibrate=True)
    start = time.perf_counter()
    forecaster.fit(data, max_epochs=epochs, default_root_dir=out / attention, logger=False,
                   limit_train_batches=max_batches, enable_model_summary=False)
    seconds = time.perf_counter() - start
    return forecaster, forecaster.evaluate("test"), seconds


def forecast_figure(forecasters: dict, channel: str = "OT", history_rows: int = 192):
    """Figure of the last test window (a backtest of one window): history, observed, each fitted
    Forecaster's forecast and the first one's 80% interval (original units).

    Args:
        forecasters: name -> fitted quantile ``Forecaster``, all fit on the same data.
        channel: the output channel to draw.
        history_rows: rows of history to draw before the window.
    """
    import matplotlib.pyplot as plt

    from .plotting import plot_forecast

    (name, first), *others = forecasters.items()
    dm = first._datamodule(None)  # the fit's data module, or for a loaded model its data read again
    frame = first.backtest(n_windows=1)
    frame = frame[frame["variable"] == channel]
    table = dm.table
    end = int(table.timestamps.get_loc(frame["cutoff"].iloc[0])) + 1
    rows = slice(max(0, end - history_rows), end)
    cols = dict(time_column=dm.time_column_name, variable_column="variable", forecast_column="forecast",
                observed_column="observed")
    fig, ax = plt.subplots(figsize=(11, 4))
    plot_forecast(frame, channel, observed=frame, ax=ax, irregular=False, **cols)
    ax.lines[-1].set_label(f"{name} attention")
    ax.plot(table.timestamps[rows], table.values[rows, table.columns.index(channel)], color="0.45", lw=1,
            label="history")
    for other, f in others:
        theirs = f.backtest(n_windows=1)
        theirs = theirs[theirs["variable"] == channel]
        ax.plot(theirs[dm.time_column_name], theirs["forecast"], "--", color="C3", lw=1.5, label=f"{other} attention")
    ax.set_title(f"{channel}: the last test window, {dm.horizon}-step forecast from {dm.lookback} steps")
    ax.legend(loc="upper left", fontsize="small")
    fig.autofmt_xdate()
    return fig


def plot_window(forecasters: dict, out: pathlib.Path, channel: str = "OT") -> pathlib.Path:
    """Write ``forecast_figure`` to ``out/forecast_vs_actual.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = forecast_figure(forecasters, channel)
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
    for attention in ("continuous", "softmax"):
        print(f"== PatchTST/42 with {attention} attention: {args.epochs} epochs on {args.data}", flush=True)
        forecasters[attention], results[attention], seconds = fit_variant(
            attention, args.data, args.epochs, args.seed, args.out, args.max_batches)
        results[attention]["seconds"] = seconds
    print(f"\nETTh1, L=336, H=96, {args.epochs} epochs, seed {args.seed}; test metrics on the scaled data")
    print(f"{'attention':<12}{'MSE':>8}{'MAE':>8}{'in 80%':>8}{'fit s':>8}")
    for attention, r in results.items():
        print(f"{attention:<12}{r['mse']:>8.4f}{r['mae']:>8.4f}{100 * r['coverage_80']:>7.1f}%{r['seconds']:>8.0f}")
    print(f"\nplot: {plot_window(forecasters, args.out)}")


if __name__ == "__main__":
    main()
