"""``tsattn`` console script: LightningCLI over ``ForecastModule`` and ``CSVDataModule``.

    tsattn fit --config configs/ETTh1/patchtst_continuous_96.yaml
    tsattn test --config configs/ETTh1/patchtst_continuous_96.yaml --ckpt_path best
    tsattn fit --config ... --model.attention softmax --trainer.max_epochs 5
    tsattn fit --config ... --print_config

The YAML file is the record of an experiment; this module holds no logic beyond the links of
values that only the data knows (channels, output positions) into the model.
"""
from __future__ import annotations

from typing import Optional

from lightning.pytorch.cli import LightningCLI

from .data import CSVDataModule
from .lightning import ForecastModule


class ForecastCLI(LightningCLI):
    """LightningCLI with the data module's window sizes and channels linked into the model."""

    def add_arguments_to_parser(self, parser) -> None:
        parser.link_arguments("data.lookback", "model.lookback")
        parser.link_arguments("data.horizon", "model.horizon")
        parser.link_arguments("data.n_channels_in", "model.n_channels", apply_on="instantiate")
        parser.link_arguments("data.target_index", "model.target_index", apply_on="instantiate")


def main(args: Optional[list[str]] = None) -> ForecastCLI:
    """Entry point of the ``tsattn`` console script (``args`` for programmatic use and tests)."""
    return ForecastCLI(
        ForecastModule,
        CSVDataModule,
        args=args,
        save_config_kwargs={"overwrite": True},
        auto_configure_optimizers=False,
    )


if __name__ == "__main__":
    main()
