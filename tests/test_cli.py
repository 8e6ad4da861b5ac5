"""The `tsattn` console script: LightningCLI configs, overrides, links from the data, shipped configs."""
import pathlib
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from tsattn.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").glob("*/*.yaml"))


@pytest.fixture
def experiment(tmp_path):
    rows = 700
    t = np.arange(rows)
    pd.DataFrame({
        "date": pd.date_range("2022-03-01", periods=rows, freq="15min"),
        "a": np.sin(2 * np.pi * t / 96), "b": np.cos(2 * np.pi * t / 48), "OT": np.sin(2 * np.pi * t / 96 + 0.5),
    }).to_csv(tmp_path / "series.csv", index=False)
    config = {
        "seed_everything": 7,
        "trainer": {"max_epochs": 1, "default_root_dir": str(tmp_path / "run"), "enable_progress_bar": False,
                    "logger": False, "accelerator": "cpu",
                    "callbacks": [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                                   "init_args": {"dirpath": str(tmp_path / "ckpt"), "monitor": "val_mse",
                                                 "filename": "best"}}]},
        "model": {"model": "patchtst", "attention": "continuous", "sink": "first",
                  "model_kwargs": {"patch_len": 8, "stride": 4, "n_layers": 1, "n_heads": 2, "d_model": 8,
                                   "d_ff": 16}},
        "data": {"data": str(tmp_path / "series.csv"), "lookback": 32, "horizon": 8, "batch_size": 64},
    }
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, tmp_path


def test_fit_then_test_from_a_yaml_file(experiment):
    torch.set_num_threads(1)
    config, tmp = experiment
    cli = main(["fit", "--config", str(config)])
    # values only the data knows are linked into the model
    assert cli.model.hparams.n_channels == 3 and cli.model.hparams.lookback == 32 and cli.model.hparams.horizon == 8
    assert cli.model.hparams.target_index == [0, 1, 2]
    ckpt = tmp / "ckpt" / "best.ckpt"
    assert ckpt.is_file()
    cli = main(["test", "--config", str(config), "--ckpt_path", str(ckpt)])
    metrics = cli.trainer.callback_metrics
    assert {"test_mse", "test_mae", "test_mse_orig", "test_mae_orig"} <= set(metrics)
    assert torch.isfinite(metrics["test_mse"])


def test_dotted_overrides_and_print_config(experiment, capsys):
    config, _ = experiment
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(config), "--model.attention", "softmax", "--data.horizon", "4",
              "--print_config"])
    assert exit_info.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["model"]["attention"] == "softmax"
    assert printed["data"]["horizon"] == 4
    assert "horizon" not in printed["model"]  # linked from data, not set twice


def test_unknown_option_is_rejected_with_its_name(experiment, capsys):
    config, _ = experiment
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(config), "--model.attenton", "softmax"])
    assert exit_info.value.code != 0
    assert "attenton" in capsys.readouterr().err


@pytest.mark.parametrize("config", CONFIGS, ids=[f"{c.parent.name}/{c.stem}" for c in CONFIGS])
def test_shipped_configs_parse(config, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(config), "--print_config"])
    assert exit_info.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    attention = config.stem.split("_")[1]
    assert printed["model"]["attention"] == attention
    assert printed["data"]["data"] == config.parent.name and printed["data"]["lookback"] == 336


def test_shipped_configs_cover_the_benchmarks():
    names = {(c.parent.name, c.stem) for c in CONFIGS}
    for dataset in ("ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather"):
        for attention in ("softmax", "continuous"):
            assert (dataset, f"patchtst_{attention}_96") in names


def test_console_script_help():
    exe = pathlib.Path(sys.executable).with_name("tsattn")
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "fit" in out.stdout and "test" in out.stdout
