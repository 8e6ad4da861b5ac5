"""``tsattn`` console script: LightningCLI over ``ForecastModule`` and a data module, and ``forecast``.

    tsattn fit --config configs/ETTh1/patchtst_continuous_96.yaml
    tsattn fit --data.data my.csv --data.lookback 96 --data.horizon 24 --data.target OT   # no YAML
    tsattn test --config configs/ETTh1/patchtst_continuous_96.yaml --ckpt_path <checkpoint>
    tsattn forecast --ckpt <checkpoint> --data my.csv -o forecast.csv      # (tsattn predict: the same)
    tsattn adjust --ckpt <checkpoint> --blend-naive --calibrate -o adjusted.ckpt
    tsattn adjust --ckpt seed1.ckpt seed2.ckpt seed3.ckpt -o ensemble.ckpt    # Forecaster.combine
    tsattn fit --config ... --print_config

The YAML file is the record of an experiment; this module holds no logic beyond the links of
values that only the data knows (window sizes, channels, output positions) into the model.
``build_cli`` is the one place that turns a configuration into a trainer, a model and a data
module: the console script and ``benchmarks/run_protocol.py`` both go through it, so a config
means the same thing to both.

The data module class is selectable: ``data:`` takes ``class_path`` / ``init_args`` like any
LightningCLI subclass argument, and defaults to ``tsattn.data.CSVDataModule`` (so a ``data:``
section without ``class_path`` holds ``CSVDataModule``'s arguments); ``tsattn.data.ObservationDataModule``
reads irregular observation sets (e.g. ``configs/physionet2012/*.yaml``).

What the console script writes: ``fit`` writes its run (logs, checkpoints, the config) to
``trainer.default_root_dir`` (the config's, ``--trainer.default_root_dir``, else Lightning's
``./lightning_logs``) and prints the best checkpoint's path as its last line of standard output;
``fast_dev_run`` writes no checkpoint. ``test`` and ``validate`` write nothing unless given a
``default_root_dir``. ``forecast`` writes only the ``-o`` file (or standard output). ``adjust`` fits
``Forecaster.blend_naive`` and / or ``Forecaster.calibrate`` to a checkpoint (or to several fits of one model,
combined first: ``Forecaster.combine``) on a split of the data it was fit on (or ``--data``) and writes the
adjusted checkpoint to ``-o`` only (never over its input).
Exit status: 0 on success, 2 on bad usage, 1 on bad data (the ``DataError`` text on standard error).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional, Union

import pandas as pd
from lightning.pytorch import LightningDataModule
from lightning.pytorch.cli import LightningCLI

from .data.errors import DataError
from .data.validation import SPLITS
from .lightning import ForecastModule

DEFAULT_DATA_CLASS = "tsattn.data.CSVDataModule"
FORECAST_COMMANDS = ("forecast", "predict")
ADJUST_COMMAND = "adjust"


class ForecastCLI(LightningCLI):
    """LightningCLI with the data module's window sizes and channels linked into the model, and
    nothing written by a run that was not asked to write (see the module docstring)."""

    def add_arguments_to_parser(self, parser) -> None:
        parser.set_defaults({"data": {"class_path": DEFAULT_DATA_CLASS}})
        for source, target in (("lookback", "lookback"), ("horizon", "horizon"),
                               ("n_channels_in", "n_channels"), ("target_index", "target_index"),
                               ("n_static", "n_static")):
            parser.link_arguments("data", f"model.{target}", compute_fn=_attribute(source), apply_on="instantiate")

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        trainer = config.trainer
        if self.subcommand not in (None, "fit") and trainer.get("default_root_dir") is None:
            if trainer.get("logger") in (None, True):
                trainer.logger = False  # an evaluation writes no logs into the working directory
            self.save_config_callback = None
        if trainer.get("fast_dev_run"):  # Lightning suppresses checkpoints then, but save_last=True still writes
            trainer.enable_checkpointing = False
            trainer.callbacks = [c for c in (trainer.get("callbacks") or [])
                                 if not str(getattr(c, "class_path", "")).endswith("ModelCheckpoint")]


def _attribute(name: str):
    def read(datamodule: Any) -> Any:
        return getattr(datamodule, name)

    read.__name__ = f"data_{name}"
    return read


def build_cli(args: Optional[Union[list[str], dict[str, Any]]] = None, *, run: bool = True,
              **kwargs: Any) -> ForecastCLI:
    """Parse a configuration and build the trainer, model and data module (and run the subcommand).

    Args:
        args: command-line style arguments (``["fit", "--config", "a.yaml"]``), or, with
            ``run=False``, a configuration dict (the YAML file's content: ``trainer``, ``model``,
            ``data``, ``seed_everything``); None reads ``sys.argv``.
        run: run the subcommand (``fit``, ``test``, ...); False only builds ``cli.trainer``,
            ``cli.model`` and ``cli.datamodule``.
        kwargs: further ``LightningCLI`` arguments.
    """
    options = dict(save_config_kwargs={"overwrite": True}, auto_configure_optimizers=False,
                   subclass_mode_data=True)
    options.update(kwargs)
    return ForecastCLI(ForecastModule, LightningDataModule, args=args, run=run, **options)


def _checkpoint_parser(prog: str, description: str, data_help: str, **ckpt: Any) -> argparse.ArgumentParser:
    """The options of a command that reads a checkpoint (``--ckpt``; ``ckpt``: its other argparse settings)
    and data (``--data``)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--ckpt", "--ckpt_path", required=True, **{"help": "the checkpoint", **ckpt})
    parser.add_argument("--data", "--data.data", help=data_help)
    return parser


def _forecast_parser(prog: str) -> argparse.ArgumentParser:
    parser = _checkpoint_parser(
        prog, "Forecast from a checkpoint (written by Forecaster.save or tsattn fit) and write the forecast as CSV (or "
              "Parquet, by the file's extension), in the layout Forecaster.predict returns.",
        "the data to forecast from: a CSV file or a registered name (default: the data the model was fit on)")
    parser.add_argument("--at", help="observation models: a CSV of requests (the fit's id and time columns and a "
                                     "variable column, one request per row; or id, time and variable columns)")
    parser.add_argument("--origin", help="observation models: forecast from this time, as the model was trained "
                                         "(a number, or a timestamp for datetime data)")
    parser.add_argument("-o", "--output", help="write the forecast to this file (.csv or .parquet); default: "
                                               "standard output as CSV")
    return parser


def _read_requests(path: str, id_column: Optional[str]) -> pd.DataFrame:
    """The ``--at`` table, its id column read as text (ids as the file writes them)."""
    return pd.read_csv(path, dtype={id_column: str} if id_column else None)


def forecast_main(argv: list[str], prog: str = "tsattn forecast") -> int:
    """``tsattn forecast``: a checkpoint and data in, a forecast table out (see ``_forecast_parser``)."""
    from .api import Forecaster  # the estimator pulls in the whole package: only here

    args = _forecast_parser(prog).parse_args(argv)
    output = None if args.output is None else Path(args.output).expanduser()
    if output is not None and output.suffix.lower() not in (".csv", ".parquet"):
        print(f"{prog}: error: -o must name a .csv or .parquet file; got {args.output!r}", file=sys.stderr)
        return 2
    try:
        f = Forecaster.load(args.ckpt)
        columns = ((f.data_record or {}).get("fitted") or {}).get("columns") or {}
        at = None if args.at is None else _read_requests(args.at, columns.get("id"))
        origin = args.origin
        if origin is not None:
            try:
                origin = float(origin)
            except ValueError:
                pass  # a timestamp: parsed the fit's way
        out = f.predict(args.data, at=at, origin=origin)
    except (DataError, ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    index = not isinstance(out.index, pd.RangeIndex)  # a window forecast is indexed by its timestamps
    if output is None:
        out.to_csv(sys.stdout, index=index)
    elif output.suffix.lower() == ".parquet":
        try:
            out.to_parquet(output, index=index)
        except ImportError as exc:
            print(f"{prog}: error: writing Parquet needs pyarrow ({exc}); pip install pyarrow, or write a .csv",
                  file=sys.stderr)
            return 2
    else:
        out.to_csv(output, index=index)
    return 0


def _adjust_parser(prog: str) -> argparse.ArgumentParser:
    parser = _checkpoint_parser(
        prog, "Fit the post-training adjustments of a checkpoint (written by Forecaster.save or tsattn fit) on a split "
              "of its data, and write the adjusted checkpoint: the naive blend (Forecaster.blend_naive), then the "
              "intervals' calibration (Forecaster.calibrate). Several checkpoints of one model's fits are combined first "
              "(Forecaster.combine).",
        "the data to fit them on: a CSV file or a registered name, read as the model's data was (default: the data it "
        "was fit on)", nargs="+",
        help="the checkpoint; or several fits of one model and settings (its seeds) on the same data, combined into "
             "one model that forecasts their mean (Forecaster.combine) before any adjustment")
    parser.add_argument("--blend-naive", action="store_true",
                        help="per channel (variable), move the forecast towards the naive one as far as the split says")
    parser.add_argument("--calibrate", action="store_true", help="calibrate a quantile model's intervals on the split")
    parser.add_argument("--split", default="val", choices=SPLITS, help="the split to fit them on (default: val)")
    parser.add_argument("-o", "--output", required=True, help="the adjusted checkpoint to write (a new file)")
    return parser


def adjust_main(argv: list[str], prog: str = f"tsattn {ADJUST_COMMAND}") -> int:
    """``tsattn adjust``: a checkpoint (or several fits, combined) in, the model with its blend and / or
    calibration fit out."""
    from .api import Forecaster

    args = _adjust_parser(prog).parse_args(argv)
    if not (args.blend_naive or args.calibrate or len(args.ckpt) > 1):
        print(f"{prog}: error: nothing to adjust: pass --blend-naive and / or --calibrate, or several checkpoints "
              "to combine", file=sys.stderr)
        return 2
    output = Path(args.output).expanduser()
    if output.exists() and any(output.resolve() == Path(c).expanduser().resolve() for c in args.ckpt):
        print(f"{prog}: error: -o names an input checkpoint; write the adjusted model to a new file", file=sys.stderr)
        return 2
    try:
        fits = [Forecaster.load(c) for c in args.ckpt]
        f = fits[0] if len(fits) == 1 else Forecaster.combine(fits)
        if args.blend_naive:
            f.blend_naive(args.data, split=args.split)
        if args.calibrate:
            f.calibrate(args.data, split=args.split)
        f.save(output)
    except (DataError, ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    if args.blend_naive:
        weights = ", ".join(f"{name} {w:.2f}" for name, w in f.naive_weights.items())
        print(f"naive blend weights (1: the model's forecast, 0: the naive one): {weights}")
    print(output.resolve())
    return 0


def main(args: Optional[list[str]] = None) -> int:
    """Entry point of the ``tsattn`` console script (``args`` for programmatic use); the exit status."""
    argv = list(sys.argv[1:] if args is None else args)
    if argv and argv[0] in FORECAST_COMMANDS:
        return forecast_main(argv[1:], prog=f"tsattn {argv[0]}")
    if argv and argv[0] == ADJUST_COMMAND:
        return adjust_main(argv[1:])
    try:
        cli = build_cli(None if args is None else argv)
    except Exception as exc:  # a data error, also when raised inside one of jsonargparse's links
        cause = _data_error(exc)
        if cause is None:
            raise
        print(f"tsattn: error: {cause}", file=sys.stderr)
        return 1
    checkpoint = getattr(cli.trainer, "checkpoint_callback", None) if cli.subcommand == "fit" else None
    best = checkpoint and (checkpoint.best_model_path or checkpoint.last_model_path)
    if best:
        print(Path(best).resolve())
    return 0


def _data_error(exc: BaseException) -> Optional[DataError]:
    """The ``DataError`` that ``exc`` is, or was raised from (None when there is none)."""
    while exc is not None and not isinstance(exc, DataError):
        exc = exc.__cause__ or exc.__context__
    return exc


if __name__ == "__main__":
    sys.exit(main())
