"""benchmarks/run_protocol.py builds a run from the config as `tsattn fit --config` does: trainer options
of the YAML take effect, the command-line overrides still apply, and one record is appended."""
import json

import numpy as np
import pandas as pd
import pytest
import yaml



@pytest.fixture(scope="module")
def run_protocol(benchmark_script):
    return benchmark_script("run_protocol")


@pytest.fixture
def config(tmp_path):
    rows = 600
    t = np.arange(rows)
    pd.DataFrame({
        "date": pd.date_range("2022-03-01", periods=rows, freq="h"),
        "a": np.sin(2 * np.pi * t / 24), "OT": np.cos(2 * np.pi * t / 24),
    }).to_csv(tmp_path / "series.csv", index=False)
    content = {
        "seed_everything": 7,
        "trainer": {
            "max_epochs": 5, "limit_train_batches": 2, "limit_val_batches": 1, "accelerator": "cpu",
            "callbacks": [{"class_path": "lightning.pytorch.callbacks.EarlyStopping",
                           "init_args": {"monitor": "val_mse", "mode": "min", "patience": 50}}],
        },
        "model": {"model": "patchtst", "attention": "continuous", "lr_schedule": "constant",
                  "model_kwargs": {"patch_len": 8, "stride": 4, "n_layers": 1, "n_heads": 2, "d_model": 8,
                                   "d_ff": 16}},
        "data": {"data": str(tmp_path / "series.csv"), "lookback": 32, "horizon": 8, "batch_size": 16},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(content))
    return path


def test_trainer_options_of_the_yaml_take_effect(run_protocol, config, tmp_path):
    out = tmp_path / "runs.jsonl"
    record = run_protocol.main(["--config", str(config), "--epochs", "2", "--seed", "3", "--patience", "4",
                                "--switch-epoch", "1", "--model-kwargs", '{"d_ff": 8}', "--threads", "1",
                                "--tag", "unit test", "--runs-dir", str(tmp_path / "runs"), "--out", str(out)])
    # limit_train_batches: 2 (a trainer option the runner once ignored) bounds every epoch: 2 steps each
    assert record["epochs_run"] == 2 and record["train_steps"] == 4 and record["max_epochs"] == 2
    # the overrides
    assert record["seed"] == 3 and record["patience"] == 4 and record["switch_epoch"] == 1
    assert "split_seed" in record and record["split_seed"] is None      # the data's own split
    assert record["attention"] == "softmax"  # trained softmax first, switched at epoch 1
    assert record["model_kwargs"]["d_ff"] == 8 and record["model_kwargs"]["d_model"] == 8
    assert record["tag"] == "unit test" and record["threads"] == 1 and record["commit"]
    assert {"test_mse", "test_mae", "test_mse_orig", "test_mae_orig", "seconds_per_epoch_median"} <= set(record)
    assert len(record["command"]) > 0 and record["accelerator"] == "CPUAccelerator"
    assert json.loads(out.read_text().splitlines()[-1]) == json.loads(json.dumps(record))
    run_dir = tmp_path / "runs" / record["name"]
    assert record["name"] == "series_patchtst_softmax_h8_s3_switch1" and run_dir.is_dir()
    # the run's folder records the configuration it was built from, as `tsattn fit` does
    saved = yaml.safe_load(next(run_dir.rglob("config.yaml")).read_text())
    assert saved["trainer"]["limit_train_batches"] == 2 and saved["model"]["seed"] == 3


def test_resume_continues_an_interrupted_run_as_if_uninterrupted(run_protocol, config, tmp_path):
    common = ["--config", str(config), "--seed", "5", "--threads", "1", "--resume"]
    whole = run_protocol.main([*common, "--epochs", "3", "--runs-dir", str(tmp_path / "a"),
                               "--out", str(tmp_path / "a.jsonl")])
    assert whole["resumed_at_epoch"] is None and whole["epochs_run"] == 3
    # an interrupted run: one epoch, then the process ends before its record (as a killed one would)
    out = tmp_path / "b.jsonl"
    first = run_protocol.main([*common, "--epochs", "1", "--runs-dir", str(tmp_path / "b"), "--out", str(out)])
    run_dir = tmp_path / "b" / first["name"]
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    (run_dir / "record.json").unlink()
    resumed = run_protocol.main([*common, "--epochs", "3", "--runs-dir", str(tmp_path / "b"), "--out", str(out)])
    assert resumed["resumed_at_epoch"] == 1
    assert (resumed["epochs_run"], resumed["train_steps"], resumed["best_epoch"]) == \
        (whole["epochs_run"], whole["train_steps"], whole["best_epoch"])
    # the same batches, weights and best checkpoint: equal up to rounding (one thread, same machine; the
    # tolerance only allows for a different summation order in a restored optimizer state)
    for key in ("best_val_mse", "test_mse", "test_mae"):
        assert resumed[key] == pytest.approx(whole[key], rel=1e-6), key
    # the validation curve, one value per epoch, the resumed run's from both of its log versions
    assert len(whole["val_mse_curve"]) == len(resumed["val_mse_curve"]) == 3
    assert resumed["val_mse_curve"] == pytest.approx(whole["val_mse_curve"], rel=1e-6)
    assert min(whole["val_mse_curve"]) == pytest.approx(whole["best_val_mse"], rel=1e-6)
    # a finished run started again with --resume runs nothing and appends nothing
    lines = out.read_text().splitlines()
    again = run_protocol.main([*common, "--epochs", "3", "--runs-dir", str(tmp_path / "b"), "--out", str(out)])
    assert again == json.loads(json.dumps(resumed)) and out.read_text().splitlines() == lines


def test_resume_refuses_a_folder_of_other_settings(run_protocol, config, tmp_path):
    """A variant whose name is that of another run (a --set the name does not spell out) is not resumed
    from, nor reported as, that run: the error names the setting that differs and the fix."""
    common = ["--config", str(config), "--seed", "5", "--threads", "1", "--resume", "--no-test",
              "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "runs.jsonl")]
    first = run_protocol.main([*common, "--epochs", "1"])
    run_dir = tmp_path / "runs" / first["name"]
    assert json.loads((run_dir / "settings.json").read_text())["model"]["lr_schedule"] == "constant"
    # finished: the same command prints its record; a variant is refused, and nothing is appended
    assert run_protocol.main([*common, "--epochs", "1"])["name"] == first["name"]
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    with pytest.raises(SystemExit, match=r"model\.lr_schedule: 'constant' there, 'onecycle' now.*--runs-dir"):
        run_protocol.main([*common, "--epochs", "1", "--set", "model.lr_schedule=onecycle"])
    # interrupted (no record): a variant is refused before it trains; the checkpoint is left as it was
    (run_dir / "record.json").unlink()
    last = (run_dir / "checkpoints" / "last.ckpt").read_bytes()
    with pytest.raises(SystemExit, match=r"model\.lr: unset there, 0\.5 now"):
        run_protocol.main([*common, "--epochs", "2", "--set", "model.lr=0.5"])
    assert (run_dir / "checkpoints" / "last.ckpt").read_bytes() == last
    assert (tmp_path / "runs.jsonl").read_text().splitlines() == lines
    # a longer run of the same settings resumes
    assert run_protocol.main([*common, "--epochs", "2"])["resumed_at_epoch"] == 1


def _tiny_irregular_config(tmp_path, lr: float):
    """A config of the irregular model on two small synthetic series, 2 training batches an epoch."""
    rng = np.random.default_rng(0)
    t = np.concatenate([np.sort(rng.choice(480, size=160, replace=False)) for _ in range(2)]).astype(float)
    pd.DataFrame({"id": np.repeat(["a", "b"], 160), "time": t, "x": rng.standard_normal(320)}).to_csv(
        tmp_path / "obs.csv", index=False)
    config = tmp_path / "irregular.yaml"
    config.write_text(yaml.safe_dump({
        "seed_everything": 1,
        "trainer": {"max_epochs": 3, "limit_train_batches": 2, "accelerator": "cpu"},
        "model": {"model": "irregular", "lr": lr, "lr_schedule": "constant",
                  "model_kwargs": {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "dropout": 0.0}},
        "data": {"class_path": "tsattn.data.ObservationDataModule",
                 "init_args": {"data": str(tmp_path / "obs.csv"), "id_column": "id", "time_column": "time",
                               "lookback": 24.0, "horizon": 12.0, "origin_stride": 12.0,
                               "batch_size": 4}}}))
    return config


def test_last_checkpoint_holds_every_epoch_improved_or_not(run_protocol, tmp_path):
    """With --resume, last.ckpt is the latest epoch's state even when validation did not improve (here the
    rate is 0: the weights never move, so only the first epoch is a best), so a resumed run repeats nothing."""
    import torch

    config = _tiny_irregular_config(tmp_path, lr=0.0)
    record = run_protocol.main(["--config", str(config), "--threads", "1", "--resume", "--no-test",
                                "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "runs.jsonl")])
    assert record["epochs_run"] == 3 and record["best_epoch"] == 1            # counted from 1: the first
    last = torch.load(tmp_path / "runs" / record["name"] / "checkpoints" / "last.ckpt", weights_only=False)
    assert last["epoch"] == 2 and last["global_step"] == record["train_steps"]
    assert sorted(p.name for p in (tmp_path / "runs" / record["name"] / "checkpoints").iterdir()) == \
        ["epoch=0-step=2.ckpt", "last.ckpt"]


def test_resume_of_a_moved_folder_keeps_its_best_epoch(run_protocol, tmp_path):
    """A run's folder moved between sittings (another checkout, a renamed --runs-dir) resumes with its best
    checkpoint and score: the rate is 0, so every epoch ties with the first and only the first is a best;
    without the relocation the first resumed epoch became the best and the test read it."""
    import torch

    config = _tiny_irregular_config(tmp_path, lr=0.0)
    common = ["--config", str(config), "--threads", "1", "--resume", "--no-test"]
    first = run_protocol.main([*common, "--epochs", "1", "--runs-dir", str(tmp_path / "a"),
                               "--out", str(tmp_path / "runs.jsonl")])
    (tmp_path / "a" / first["name"] / "record.json").unlink()          # interrupted before its record
    (tmp_path / "a").rename(tmp_path / "b")
    resumed = run_protocol.main([*common, "--epochs", "3", "--runs-dir", str(tmp_path / "b"),
                                 "--out", str(tmp_path / "runs.jsonl")])
    assert resumed["resumed_at_epoch"] == 1 and resumed["epochs_run"] == 3
    assert resumed["best_epoch"] == 1 and resumed["best_val_mse"] == pytest.approx(first["best_val_mse"])
    assert sorted(p.name for p in (tmp_path / "b" / first["name"] / "checkpoints").iterdir()) == \
        ["epoch=0-step=2.ckpt", "last.ckpt"]
    # a folder in place is left as it is
    last = tmp_path / "b" / first["name"] / "checkpoints" / "last.ckpt"
    assert not run_protocol.relocate_checkpoint_paths(last, torch.load(last, weights_only=False))


def test_ema_validates_and_tests_the_averaged_weights(run_protocol, config, tmp_path):
    import torch

    record = run_protocol.main(["--config", str(config), "--epochs", "2", "--seed", "3", "--ema", "0.9",
                                "--threads", "1", "--runs-dir", str(tmp_path / "runs"),
                                "--out", str(tmp_path / "runs.jsonl")])
    assert record["ema"] == 0.9 and record["name"] == "series_patchtst_continuous_h8_s3_ema0.9"
    (best,) = (tmp_path / "runs" / record["name"]).rglob("epoch=*.ckpt")
    checkpoint = torch.load(best, map_location="cpu", weights_only=False)
    # the checkpoint (what the test reads) holds the average; the trained weights are kept beside it
    averaged, current = checkpoint["state_dict"], checkpoint["current_model_state"]
    assert averaged.keys() == current.keys()
    assert any(not torch.equal(averaged[k], current[k]) for k in averaged if averaged[k].is_floating_point())
    with pytest.raises(SystemExit, match="--ema wants a decay"):
        run_protocol.main(["--config", str(config), "--ema", "1.5", "--runs-dir", str(tmp_path / "bad"),
                           "--out", str(tmp_path / "bad.jsonl")])


def test_run_names_tell_apart_the_series_sequence_and_the_split(benchmark_script):
    """Runs that differ in the series sequence or the split seed get folders of their own (so --resume and
    the records never mix them); a config that sets neither keeps its name."""
    rp = benchmark_script("run_protocol")
    config = {"seed_everything": 1, "model": {"model": "irregular", "attention": "continuous", "model_kwargs": {}},
              "data": {"class_path": "tsattn.data.ObservationDataModule", "init_args": {"data": "physionet2012"}}}
    assert rp.run_name(config, None) == "physionet2012_irregular_continuous_s1"
    config["model"]["model_kwargs"]["series_layers"] = 1
    config["data"]["init_args"]["split_seed"] = 43
    assert rp.run_name(config, None) == "physionet2012_irregular_continuous_s1_series1_split43"
    assert rp.run_name(config, 2, 0.999) == "physionet2012_irregular_continuous_s1_series1_split43_switch2_ema0.999"


def test_set_option_points_a_class_path_section_at_init_args(benchmark_script):
    rp = benchmark_script("run_protocol")
    config = {"data": {"class_path": "x.Data", "init_args": {"data": "physionet2012"}}, "model": {"lr": 1e-3}}
    rp.set_option(config, "data.init_args.split_seed=43")
    rp.set_option(config, "model.model_kwargs.series_layers=1")
    assert config["data"]["init_args"]["split_seed"] == 43 and config["model"]["model_kwargs"] == {"series_layers": 1}
    rp.set_option(config, "data.init_args.data=ETTh1")                  # a key that is there is replaced
    assert config["data"]["init_args"]["data"] == "ETTh1"
    with pytest.raises(SystemExit, match=r"write --set data\.init_args\.split_seed=44"):
        rp.set_option(config, "data.split_seed=44")
    assert config["data"]["init_args"]["split_seed"] == 43 and "split_seed" not in config["data"]   # nothing changed
    with pytest.raises(SystemExit, match="section.key=value"):
        rp.set_option(config, "data")


def test_set_option_reads_an_exponent_without_a_point_as_a_number(benchmark_script):
    rp = benchmark_script("run_protocol")
    config = {"model": {"lr": 1e-3}}
    for text, value in [("1e-5", 1e-5), ("-2E3", -2000.0), ("3.5e-4", 3.5e-4), (".5e1", 5.0), ("0.001", 0.001)]:
        rp.set_option(config, f"model.weight_decay={text}")
        assert isinstance(config["model"]["weight_decay"], float) and config["model"]["weight_decay"] == value
    for text, value in [("'1e-5'", "1e-5"), ("e5", "e5"), ("onecycle", "onecycle"), ("3", 3)]:
        rp.set_option(config, f"model.x={text}")             # quoted, not a number, or an int: as YAML reads it
        assert config["model"]["x"] == value and type(config["model"]["x"]) is type(value)


def test_average_best_tests_the_mean_of_the_best_epochs(run_protocol, config, tmp_path):
    record = run_protocol.main(["--config", str(config), "--epochs", "3", "--seed", "3", "--average-best", "2",
                                "--threads", "1", "--runs-dir", str(tmp_path / "runs"),
                                "--out", str(tmp_path / "runs.jsonl")])
    assert record["name"] == "series_patchtst_continuous_h8_s3_avg2" and record["average_best"] == 2
    curve = record["val_mse_curve"]
    assert sorted(record["averaged_epochs"]) == sorted(sorted(range(1, 4), key=lambda e: curve[e - 1])[:2])
    assert record["averaged_val_mse"] > 0 and record["test_mse"] > 0         # the mean validated, then tested
    with pytest.raises(SystemExit, match="--average-best wants"):
        run_protocol.main(["--config", str(config), "--average-best", "0", "--runs-dir", str(tmp_path / "bad"),
                           "--out", str(tmp_path / "bad.jsonl")])
