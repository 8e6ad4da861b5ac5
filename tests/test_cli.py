"""The `tsattn` console script: LightningCLI configs, overrides, links from the data, shipped configs."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from tsattn import Forecaster
from tsattn.cli import build_cli, main

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
    cli = build_cli(["fit", "--config", str(config)])
    # values only the data knows are linked into the model
    assert cli.model.hparams.n_channels == 3 and cli.model.hparams.lookback == 32 and cli.model.hparams.horizon == 8
    assert cli.model.hparams.target_index == [0, 1, 2]
    ckpt = tmp / "ckpt" / "best.ckpt"
    assert ckpt.is_file()
    cli = build_cli(["test", "--config", str(config), "--ckpt_path", str(ckpt)])
    metrics = cli.trainer.callback_metrics
    assert {"test_mse", "test_mae", "test_mse_orig", "test_mae_orig"} <= set(metrics)
    assert torch.isfinite(metrics["test_mse"])
    # the CLI's checkpoint carries what the fit learnt: the API forecasts from it, from the stored path
    loaded = Forecaster.load(ckpt)
    assert loaded.data_record["source"] == str(tmp / "series.csv")
    assert loaded.data_record["fitted"]["time_unit_ns"] == pd.Timedelta("15min").value
    assert loaded.predict().shape == (8, 3)


def test_dotted_overrides_and_print_config(experiment, capsys):
    config, _ = experiment
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(config), "--model.attention", "softmax", "--data.horizon", "4",
              "--print_config"])
    assert exit_info.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["model"]["attention"] == "softmax"
    assert printed["data"]["class_path"] == "tsattn.data.CSVDataModule"  # the default data module class
    assert printed["data"]["init_args"]["horizon"] == 4
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
    attention = "continuous" if "continuous" in config.stem else "softmax"
    assert printed["model"]["attention"] == attention
    data = printed["data"]["init_args"]
    assert data["data"] == config.parent.name.split("-")[0]   # e.g. ETTh1-gaps reads ETTh1
    if config.stem.startswith("patchtst"):
        assert printed["data"]["class_path"] == "tsattn.data.CSVDataModule" and data["lookback"] == 336
    else:  # irregular observation sets: the PhysioNet protocol comes from the registry
        assert printed["data"]["class_path"] == "tsattn.data.ObservationDataModule"
        assert printed["model"]["model"] == "irregular"


def test_shipped_configs_cover_the_benchmarks():
    names = {(c.parent.name, c.stem) for c in CONFIGS}
    for dataset in ("ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather"):
        for attention in ("softmax", "continuous"):
            assert (dataset, f"patchtst_{attention}_96") in names



@pytest.mark.parametrize("attention", ["continuous", "softmax"])
def test_vardrop_configs_are_the_configs_plus_the_augmentation(attention):
    """irregular_vardrop_<attention>.yaml is a copy of irregular_<attention>.yaml with one setting added: a
    change to the base config that the copy does not follow fails here."""
    folder = ROOT / "configs" / "physionet2012"
    base = yaml.safe_load((folder / f"irregular_{attention}.yaml").read_text())
    variant = yaml.safe_load((folder / f"irregular_vardrop_{attention}.yaml").read_text())
    assert variant["model"]["model_kwargs"].pop("history_variable_dropout") == 0.1
    assert variant["trainer"].pop("default_root_dir") == f"runs/physionet2012/irregular_vardrop_{attention}"
    base["trainer"].pop("default_root_dir")
    assert variant == base

def test_data_module_class_is_selectable(experiment):
    """`data:` with an explicit class_path (here the default class, spelt out) builds that class."""
    config, _ = experiment
    content = yaml.safe_load(config.read_text())
    content["data"] = {"class_path": "tsattn.data.CSVDataModule", "init_args": content["data"]}
    cli = build_cli(content, run=False)
    assert type(cli.datamodule).__name__ == "CSVDataModule" and cli.model.hparams.n_channels == 3


def _launchers():
    """How a user starts the CLI: the installed console script (when it imports this tree's tsattn)
    and `python -m tsattn.cli`. Both run with this tree first on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    launchers = [("python -m tsattn.cli", [sys.executable, "-m", "tsattn.cli"])]
    script = pathlib.Path(sys.executable).with_name("tsattn")
    if script.is_file():
        launchers.insert(0, ("console script", [str(script)]))
    return env, launchers


def test_console_script_exits_0_after_a_successful_fit(experiment):
    config, tmp = experiment
    env, launchers = _launchers()
    for name, command in launchers:
        if name == "console script":  # it imports tsattn through its interpreter: make sure it is this tree
            which = subprocess.run([sys.executable, "-c", "import tsattn; print(tsattn.__file__)"], env=env,
                                   capture_output=True, text=True, timeout=120).stdout.strip()
            if not which.startswith(str(ROOT)):
                continue
        out = subprocess.run([*command, "fit", "--config", str(config), "--trainer.fast_dev_run=true"],
                             capture_output=True, text=True, timeout=300, cwd=tmp, env=env)
        assert out.returncode == 0, f"{name}: exit {out.returncode}\n{out.stderr[-3000:]}"
        assert "ForecastCLI object" not in out.stdout + out.stderr, name
        assert "fast_dev_run" in out.stdout + out.stderr, name  # it did run the fit


def test_console_script_help():
    env, launchers = _launchers()
    for name, command in launchers:
        out = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 0 and "fit" in out.stdout and "test" in out.stdout, name


def test_fit_writes_the_mean_of_the_best_epochs_with_the_callback(experiment):
    """tsattn fit with BestEpochsAverage(save_to=...) in the config: the file holds the mean of the k best
    epochs' weights, and Forecaster.load forecasts from it (the shell road to the averaged model)."""
    torch.set_num_threads(1)
    config, tmp = experiment
    content = yaml.safe_load(config.read_text())
    content["trainer"]["max_epochs"] = 3
    content["trainer"]["callbacks"].append({"class_path": "tsattn.lightning.BestEpochsAverage",
                                            "init_args": {"k": 2, "save_to": str(tmp / "avg" / "average.ckpt")}})
    config.write_text(yaml.safe_dump(content))
    cli = build_cli(["fit", "--config", str(config)])
    average = next(c for c in cli.trainer.callbacks if type(c).__name__ == "BestEpochsAverage")
    assert len(average.averaged_epochs) == 2
    loaded = Forecaster.load(tmp / "avg" / "average.ckpt")
    for name, value in cli.model.state_dict().items():
        if torch.is_tensor(value):
            torch.testing.assert_close(loaded.module.state_dict()[name], value)
        else:
            assert loaded.module.state_dict()[name] == value
    assert loaded.predict().shape == (8, 3)
