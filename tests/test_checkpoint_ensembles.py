"""benchmarks/checkpoint_ensembles.py and run_protocol.py --keep-checkpoints: one checkpoint per epoch,
ranked by its validation MSE; the best epoch's metric is the logged one; the mean of forecasts is never
worse than their mean metric; weight and prediction means of one checkpoint are that checkpoint; the test
split is read only when asked; clear errors."""
import json

import numpy as np
import pandas as pd
import pytest
import yaml

from .synthetic import LONG, observations


@pytest.fixture(scope="module")
def scripts(benchmark_script):
    return benchmark_script("run_protocol"), benchmark_script("checkpoint_ensembles")


@pytest.fixture(scope="module")
def runs(scripts, tmp_path_factory):
    """Two seeds of a tiny irregular model, 3 epochs each, every epoch's checkpoint kept."""
    run_protocol, _ = scripts
    root = tmp_path_factory.mktemp("keep")
    observations(n_series=10, hours=48, seed=0, resolution=0.5, id_format="p{:02d}").to_csv(root / "obs.csv", index=False)
    config = root / "irregular.yaml"
    config.write_text(yaml.safe_dump({
        "trainer": {"max_epochs": 3, "limit_train_batches": 2, "accelerator": "cpu"},
        "model": {"model": "irregular", "lr": 0.01, "lr_schedule": "constant",
                  "model_kwargs": {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "dropout": 0.0}},
        "data": {"class_path": "tsattn.data.ObservationDataModule",
                 "init_args": {"data": str(root / "obs.csv"), "id_column": LONG["id_column"],
                               "time_column": LONG["time_column"], "variable_column": LONG["variable_column"],
                               "value_column": LONG["value_column"], "lookback": 24.0, "horizon": 24.0,
                               "origins": [24.0], "split_fractions": [0.6, 0.2, 0.2], "batch_size": 4}}}))
    records = [run_protocol.main(["--config", str(config), "--seed", str(seed), "--keep-checkpoints", "--no-test",
                                  "--threads", "1", "--resume", "--runs-dir", str(root / "runs"),
                                  "--out", str(root / "runs.jsonl")]) for seed in (1, 2)]
    return root, [root / "runs" / record["name"] for record in records], records


def test_keep_checkpoints_keeps_every_epoch_named_by_its_validation_mse(scripts, runs):
    _, ensembles = scripts
    _, folders, records = runs
    for folder, record in zip(folders, records):
        ranked = ensembles.ranked_checkpoints(folder)
        assert sorted(epoch for _, epoch, _ in ranked) == [1, 2, 3]                  # one per epoch (from 1)
        assert [value for value, _, _ in ranked] == sorted(value for value, _, _ in ranked)
        curve = record["val_mse_curve"]
        for value, epoch, _ in ranked:
            assert value == pytest.approx(curve[epoch - 1], abs=1e-6)                 # the name holds the logged value
        assert ranked[0][1] == record["best_epoch"]
        assert (folder / "checkpoints" / "last.ckpt").is_file()                       # --resume still has its state


def test_ensemble_records_on_validation(scripts, runs):
    _, ensembles = scripts
    _, folders, records = runs
    out = ensembles.evaluate(folders, k=2, splits=["val"])
    assert [r["variant"] for r in out] == ["best epoch", "prediction mean", "weight mean"] * 2 + \
        ["runs: best epochs", "runs: prediction means", "runs: weight means",
         "ensemble of 1 weight means", "ensemble of 2 weight means"]
    assert all("test_mse" not in r and "test_mae" not in r for r in out)            # the test split not read
    for r, record in zip(out[0:6:3], records):
        assert r["epochs"] == [record["best_epoch"]]
        assert r["val_mse"] == pytest.approx(record["best_val_mse"], rel=1e-4)      # the protocol's metric, recomputed
    for r in out[1:6:3]:
        # the squared error is convex: the mean of forecasts is at most the mean of their errors, per variable
        assert r["k"] == 2 and r["val_mse"] <= np.mean(r["logged_val_mse"]) + 1e-6
    assert out[6]["val_mse"] <= (out[0]["val_mse"] + out[3]["val_mse"]) / 2 + 1e-9
    one, two = out[-2], out[-1]
    assert one["subsets"] == 2 and two["subsets"] == 1                               # every subset of each size
    assert one["val_mse"] == pytest.approx((out[2]["val_mse"] + out[5]["val_mse"]) / 2, rel=1e-12)
    assert two["val_mse"] == pytest.approx(out[8]["val_mse"], rel=1e-12) and two["val_mse_std"] == 0.0
    assert one["val_mse_std"] > 0                                                    # two seeds are two models


def test_weight_mean_only_gives_one_forecast_per_run(scripts, runs):
    _, ensembles = scripts
    _, folders, _ = runs
    full = ensembles.evaluate(folders, k=2, splits=["val"])
    out = ensembles.evaluate(folders, k=2, splits=["val"], weight_mean_only=True)
    assert [r["variant"] for r in out] == ["weight mean", "weight mean", "runs: weight means",
                                           "ensemble of 1 weight means", "ensemble of 2 weight means"]
    assert out[0]["run"].endswith("/" + folders[0].name) and out[0]["run"] != out[1]["run"]
    for a, b in zip(out, [full[2], full[5], full[8], full[9], full[10]]):
        assert a["val_mse"] == pytest.approx(b["val_mse"], rel=1e-12)


def test_one_checkpoint_is_its_own_mean_and_test_is_read_on_request(scripts, runs):
    _, ensembles = scripts
    root, folders, _ = runs
    out_file = root / "ensembles.jsonl"
    out = ensembles.main([str(folders[0]), "--k", "1", "--test", "--threads", "1", "--out", str(out_file)])
    best, prediction, weight = out
    for key in ("val_mse", "val_mae", "test_mse", "test_mae"):
        assert prediction[key] == pytest.approx(best[key], rel=1e-12)
        assert weight[key] == pytest.approx(best[key], rel=1e-6)
    assert [json.loads(line)["variant"] for line in out_file.read_text().splitlines()] == \
        ["best epoch", "prediction mean", "weight mean"]


def test_protocol_metrics_are_means_over_variables(scripts):
    _, ensembles = scripts
    forecast, observed = np.array([1.0, 3.0, 10.0]), np.zeros(3)
    scale, variable = np.array([1.0, 1.0, 10.0]), np.array(["a", "a", "b"])
    out = ensembles.protocol_metrics(forecast, observed, scale, variable)
    assert out["mse"] == pytest.approx(((1 + 9) / 2 + 1) / 2)                       # a: 5, b: 1 (scaled)
    assert out["mae"] == pytest.approx(((1 + 3) / 2 + 1) / 2)


def test_a_folder_without_kept_checkpoints_says_how_to_make_them(scripts, tmp_path):
    _, ensembles = scripts
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "epoch=0-step=2.ckpt").write_bytes(b"")
    with pytest.raises(SystemExit, match="--keep-checkpoints"):
        ensembles.ranked_checkpoints(tmp_path)
    with pytest.raises(SystemExit, match="--k wants"):
        ensembles.evaluate([tmp_path], k=0, splits=["val"])


def test_per_variable_reads_several_checkpoints_as_their_weights_mean(scripts, runs, benchmark_script):
    _, ensembles = scripts
    root, folders, _ = runs
    per_variable = benchmark_script("per_variable")
    ranked = [path for _, _, path in ensembles.ranked_checkpoints(folders[0])[:2]]
    weight_mean = ensembles.evaluate(folders[:1], k=2, splits=["val"])[2]
    assert weight_mean["variant"] == "weight mean"
    per_variable.main(["--ckpt", *map(str, ranked), "--out", str(root / "mean.csv")])
    table = pd.read_csv(root / "mean.csv", index_col=0)
    assert table["mse"].mean() == pytest.approx(weight_mean["val_mse"], rel=1e-6)   # the same model, the same metric
    assert table["mse_last"].notna().all() and np.isfinite(table["mse_ratio"]).all()  # the reference read the same data
    per_variable.main(["--ckpt", str(ranked[0]), "--out", str(root / "best.csv")])
    best = pd.read_csv(root / "best.csv", index_col=0)["mse"].mean()
    assert best == pytest.approx(ensembles.evaluate(folders[:1], k=1, splits=["val"])[0]["val_mse"], rel=1e-6)
    assert abs(best - table["mse"].mean()) > 1e-6 * best                           # two checkpoints are not one
    per_variable.main(["--ckpt", str(ranked[0]), "--by-history", "--out", str(root / "history.csv")])
    parts = pd.read_csv(root / "history.csv", index_col=0)
    assert parts["mse"].mean() == pytest.approx(best, rel=1e-12)
    counts = parts[["targets_seen", "targets_unseen"]].fillna(0).sum(axis=1)
    assert (counts == parts["targets"]).all() and parts["targets_seen"].sum() > 0
    shares = parts[["share_of_metric_seen", "share_of_metric_unseen"]].fillna(0).sum(axis=1)
    np.testing.assert_allclose(shares, parts["share_of_metric"], rtol=1e-9)     # the parts add up to the whole


def test_runs_of_variants_are_read_with_their_own_settings_and_other_data_is_refused(scripts, runs, tmp_path):
    run_protocol, ensembles = scripts
    root, folders, _ = runs
    record = run_protocol.main(["--config", str(root / "irregular.yaml"), "--seed", "1", "--keep-checkpoints",
                                "--no-test", "--threads", "1", "--resume", "--runs-dir", str(tmp_path / "wide"),
                                "--set", "model.model_kwargs.d_model=12", "--out", str(tmp_path / "runs.jsonl")])
    variant = tmp_path / "wide" / record["name"]
    out = ensembles.evaluate([folders[0], variant], k=1, splits=["val"], weight_mean_only=True)
    assert out[1]["val_mse"] == pytest.approx(record["best_val_mse"], rel=1e-4)      # its own width, not the first's
    other = tmp_path / "other"
    other.mkdir()
    observations(n_series=10, hours=48, seed=5, resolution=0.5, id_format="p{:02d}").to_csv(other / "obs.csv",
                                                                                            index=False)
    config = yaml.safe_load((root / "irregular.yaml").read_text())
    config["data"]["init_args"]["data"] = str(other / "obs.csv")
    (other / "irregular.yaml").write_text(yaml.safe_dump(config))
    record = run_protocol.main(["--config", str(other / "irregular.yaml"), "--seed", "1", "--keep-checkpoints",
                                "--no-test", "--threads", "1", "--resume", "--runs-dir", str(other / "runs"),
                                "--out", str(other / "runs.jsonl")])
    with pytest.raises(SystemExit, match="other data"):
        ensembles.evaluate([folders[0], other / "runs" / record["name"]], k=1, splits=["val"])


def test_best_checkpoint_of_a_run_is_the_lowest_validation_not_the_last_name(scripts, tmp_path):
    run_protocol, _ = scripts
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    with pytest.raises(SystemExit, match="no checkpoint"):
        run_protocol.best_checkpoint(tmp_path)
    (folder / "last.ckpt").write_bytes(b"")
    (folder / "epoch=3-step=8.ckpt").write_bytes(b"")     # what a ModelCheckpoint with save_top_k=1 keeps
    assert run_protocol.best_checkpoint(tmp_path).name == "epoch=3-step=8.ckpt"
    (folder / "epoch=12-step=26.ckpt").write_bytes(b"")
    with pytest.raises(SystemExit, match="2 checkpoints.*--keep-checkpoints"):
        run_protocol.best_checkpoint(tmp_path)
    for name in ("epoch=9-val_mse=0.006000.ckpt", "epoch=10-val_mse=0.005000.ckpt", "epoch=19-val_mse=0.007000.ckpt"):
        (folder / name).write_bytes(b"")                # epoch 9 sorts last by name; epoch 10 is the best
    assert run_protocol.best_checkpoint(tmp_path).name == "epoch=10-val_mse=0.005000.ckpt"


def test_members_of_an_ensemble_run_are_scored_alone(scripts, runs, tmp_path):
    run_protocol, ensembles = scripts
    root, folders, _ = runs
    record = run_protocol.main(["--config", str(root / "irregular.yaml"), "--seed", "1", "--keep-checkpoints",
                                "--no-test", "--threads", "1", "--resume", "--runs-dir", str(tmp_path / "pair"),
                                "--set", "model.ensemble=2", "--set", "model.bootstrap=true",
                                "--out", str(tmp_path / "runs.jsonl")])
    pair = tmp_path / "pair" / record["name"]
    out = ensembles.evaluate([pair], k=2, splits=["val"], weight_mean_only=True, members=True)
    assert [r["variant"] for r in out] == ["weight mean: member 1 alone", "weight mean: member 2 alone",
                                           "weight mean: members alone, their mean", "weight mean"]
    one, two, mean, ensemble = (r["val_mse"] for r in out)
    assert one != two and mean == pytest.approx((one + two) / 2, rel=1e-12)
    assert ensemble <= mean + 1e-9                        # per variable, the mean forecast's error is at most theirs
    # a one-net run has no members to score: the same records as without the option
    plain = ensembles.evaluate([folders[0]], k=2, splits=["val"], weight_mean_only=True, members=True)
    assert [r["variant"] for r in plain] == ["weight mean"]
