"""``tsattn`` console script: LightningCLI over ``ForecastModule`` and a data module.

    tsattn fit --config configs/ETTh1/patchtst_continuous_96.yaml
    tsattn test --config configs/ETTh1/patchtst_continuous_96.yaml --ckpt_path best
    tsattn fit --config ... --model.attention softmax --trainer.max_epochs 5
    tsattn fit --config ... --print_config

The YAML file is the record of an experiment; this module holds no logic beyond the links of
values that only the data knows (window sizes, channels, output positions) into the model.
``build_cli`` is the one place that turns a configuration into a trainer, a model and a data
module: the console script and ``benchmarks/run_protocol.py`` both go through it, so a config
means the same thing to both.

The data module class is selectable: ``data:`` takes ``class_path`` / ``init_args`` like any
LightningCLI subclass argument, and defaults to ``tsattn.data.CSVDataModule`` (so a ``data:``
section without ``class_path`` holds ``CSVDataModule``'s arguments). Any ``LightningDataModule``
works if it exposes ``lookback``, ``horizon``, ``n_channels_in`` and ``target_index`` attributes
(linked into the model) and yields the batches ``ForecastModule`` reads: ``CSVDataModule``
(windows) and ``tsattn.data.ObservationDataModule`` (irregular observation sets, e.g.
``configs/physionet2012/*.yaml``) do.
"""
from __future__ import annotations

import sys
from typing import Any, Optional, Union

from lightning.pytorch import LightningDataModule
from lightning.pytorch.cli import LightningCLI

from .lightning import ForecastModule

DEFAULT_DATA_CLASS = "tsattn.data.CSVDataModule"


class ForecastCLI(LightningCLI):
    """LightningCLI with the data module's window sizes and channels linked into the model."""

    def add_arguments_to_parser(self, parser) -> None:
        parser.set_defaults({"data": {"class_path": DEFAULT_DATA_CLASS}})
        for source, target in (("lookback", "lookback"), ("horizon", "horizon"),
                               ("n_channels_in", "n_channels"), ("target_index", "target_index")):
            parser.link_arguments("data", f"model.{target}", compute_fn=_attribute(source), apply_on="instantiate")


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


def main(args: Optional[list[str]] = None) -> None:
    """Entry point of the ``tsattn`` console script (``args`` for programmatic use).

    Returns None, so the console script exits with status 0 when the subcommand succeeds.
    """
    build_cli(args)


if __name__ == "__main__":
    sys.exit(main())
