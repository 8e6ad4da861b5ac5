"""benchmarks/summarize_runs.py: the table of run_protocol records, mean +- std per attention."""
import json
import pathlib
import statistics

import pytest



@pytest.fixture(scope="module")
def summarize(benchmark_script):
    return benchmark_script("summarize_runs")


def record(attention, seed, mse, mae, tag="full protocol", dataset="physionet2012", **extra):
    return {"attention": attention, "seed": seed, "tag": tag, "dataset": dataset, "epochs_run": 30, "best_epoch": 20,
            "best_val_mse": mse + 1e-4, "test_mse": mse, "test_mae": mae, "seconds_per_epoch_median": 97.4,
            "commit": "abc1234", **extra}


def test_table_rows_and_mean_std(summarize, tmp_path):
    rows = [record("continuous", 1, 5.0e-3, 3.6e-2), record("continuous", 2, 5.2e-3, 3.8e-2),
            record("softmax", 1, 5.1e-3, 3.7e-2),
            record("softmax", 2, 9.9e-3, 9.9e-2),                        # superseded by the later line
            record("softmax", 2, 5.3e-3, 3.5e-2),
            record("softmax", 3, 1.0e-3, 1.0e-2, tag="short schedule"),  # another tag: left out
            record("softmax", 4, 1.0e-3, 1.0e-2, dataset="ETTh1"),       # another data set: left out
            {k: v for k, v in record("softmax", 5, 1e-3, 1e-2).items() if k != "test_mse"}]   # not tested
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    text = summarize.main(["--runs", str(path), "--tag", "full", "--dataset", "physionet2012"])
    lines = text.splitlines()
    assert len(lines) == 2 + 4 + 2                                        # header, 4 runs, 2 summaries
    assert "| continuous | 1 | 30 (20) | 5.10 | 5.00 | 3.60 | 97 | abc1234 |" in lines
    std = statistics.stdev([5.0, 5.2])
    assert f"**5.10 +- {std:.2f}**" in lines[-2] and "| 1,2 |" in lines[-2]
    assert "**5.20 +- 0.14**" in lines[-1] and "**3.60 +- 0.14**" in lines[-1]   # softmax seeds 1 and 2 (latest)


def test_match_selects_by_any_field_and_reads_evaluated_checkpoints(summarize, tmp_path):
    evaluated = {k: v for k, v in record("softmax", 1, 5.0e-3, 3.5e-2, tag="series, seed 1").items()
                 if k not in ("epochs_run", "best_val_mse", "seconds_per_epoch_median")}
    evaluated["val_mse"] = 5.3e-3                                        # eval_checkpoint.py's name for it
    rows = [evaluated, record("softmax", 2, 5.2e-3, 3.7e-2, tag="", config="configs/x/irregular_series_softmax.yaml"),
            record("softmax", 3, 9e-3, 9e-2, tag="", config="configs/x/irregular_softmax.yaml")]   # not selected
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    text = summarize.main(["--runs", str(path), "--match", "config=irregular_series_", "--match", "tag=series, seed"])
    lines = text.splitlines()
    assert len(lines) == 2 + 2 + 1
    assert "| softmax | 1 | - (20) | 5.30 | 5.00 | 3.50 | - | abc1234 |" in lines
    assert "| 1,2 |" in lines[-1] and "5.30 +- 0.00" in lines[-1] and "**5.10 +- 0.14**" in lines[-1]
    with pytest.raises(SystemExit):
        summarize.main(["--runs", str(path), "--match", "config"])           # no =TEXT
    with pytest.raises(SystemExit):
        summarize.main(["--runs", str(path)])                                # no selection at all


def test_no_matching_record_is_an_error_naming_the_tag(summarize, tmp_path, capsys):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(record("softmax", 1, 5e-3, 3e-2)) + "\n")
    with pytest.raises(SystemExit):
        summarize.main(["--runs", str(path), "--tag", "nothing like it"])
    assert "'nothing like it'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        summarize.main(["--runs", str(tmp_path / "absent.jsonl"), "--tag", "x"])
    assert "no such file" in capsys.readouterr().err


def test_physionet_protocol_runs_every_seed_of_both_attentions_resumably(benchmark_script, tmp_path):
    module = benchmark_script("physionet_protocol")
    runs = module.commands([1, 2], ["continuous", "softmax"], 1, tmp_path, tmp_path / "r.jsonl", "full protocol")
    assert [name for name, _ in runs] == ["physionet2012_irregular_continuous_s1", "physionet2012_irregular_softmax_s1",
                                          "physionet2012_irregular_continuous_s2", "physionet2012_irregular_softmax_s2"]
    argv = runs[3][1]
    assert argv[argv.index("--seed") + 1] == "2" and "--resume" in argv and argv[argv.index("--threads") + 1] == "1"
    assert argv[argv.index("--config") + 1].endswith("configs/physionet2012/irregular_softmax.yaml")
    assert pathlib.Path(argv[argv.index("--config") + 1]).is_file()
    # another config family, and arguments after -- for every run
    variant = module.commands([1], ["softmax"], 1, tmp_path, tmp_path / "r.jsonl", "t", "irregular_series",
                              ["--epochs", "20", "--no-test"])
    (name, argv), = variant
    assert name == "physionet2012_irregular_series_softmax_s1" and argv[-3:] == ["--epochs", "20", "--no-test"]
    assert argv[argv.index("--config") + 1].endswith("configs/physionet2012/irregular_series_softmax.yaml")
    with pytest.raises(SystemExit):      # an unknown family is an error naming the files, and nothing is made
        module.main(["--configs", "irregular_nope", "--runs-dir", str(tmp_path / "none")])
    assert not (tmp_path / "none").exists()
    with pytest.raises(SystemExit):
        module.main(["--jobs", "0"])


def test_runs_on_other_splits_are_kept_apart_and_baselines_left_out(summarize, tmp_path):
    rows = [record("continuous", 1, 5.2e-3, 3.6e-2, tag="split robustness"),
            record("continuous", 1, 4.9e-3, 3.5e-2, tag="split robustness", overrides=["data.init_args.split_seed=43"]),
            record("continuous", 1, 4.8e-3, 3.4e-2, tag="split robustness", split_seed=44),
            {"name": "physionet2012_last_observation", "model": "last_observation", "seed": None, "tag": "split robustness",
             "dataset": "physionet2012", "test_mse": 6.4e-3, "test_mae": 3.7e-2, "overrides": ["data.init_args.split_seed=43"]}]
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    lines = summarize.main(["--runs", str(path), "--tag", "split robustness"]).splitlines()
    assert len(lines) == 2 + 3 + 1                        # the three splits of seed 1 each a row; no baseline row
    assert lines[0].startswith("| attention | seed | split | epochs (best) |")
    assert "| continuous | 1 | - | 30 (20) | 5.30 | 5.20 | 3.60 | 97 | abc1234 |" in lines
    assert "| continuous | 1 | 43 | 30 (20) | 5.00 | 4.90 | 3.50 | 97 | abc1234 |" in lines
    assert "| continuous | 1 | 44 |" in lines[4]
    assert "| 1,1,1 | -,43,44 |" in lines[-1] and "**4.97 +- 0.21**" in lines[-1]


def test_runs_of_different_models_are_kept_apart(summarize, tmp_path):
    """Two models on the same (attention, seed, split) are two rows and two summaries, named by the settings
    in which they differ; a re-run of the same model still replaces the earlier record."""
    base = {"d_model": 64, "residual": True}
    rows = [record("continuous", 1, 5.2e-3, 3.6e-2, model="irregular", model_kwargs=base),
            record("continuous", 1, 9.9e-3, 9.9e-2, model="irregular", model_kwargs=dict(base, patch_length=8.0),
                   overrides=["model.model_kwargs.patch_length=8"]),             # superseded by the next line
            record("continuous", 1, 5.0e-3, 3.5e-2, model="irregular", model_kwargs=dict(base, patch_length=8.0),
                   overrides=["model.model_kwargs.patch_length=8", "data.init_args.split_seed=43"], split_seed=43),
            record("continuous", 1, 5.1e-3, 3.5e-2, model="irregular", model_kwargs=dict(base, patch_length=8.0)),
            record("continuous", 2, 5.4e-3, 3.7e-2, model="irregular", model_kwargs=base,
                   overrides=["model.lr_schedule=cosine"]),
            record("continuous", 3, 5.3e-3, 3.7e-2, model="irregular")]          # an evaluated checkpoint
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    lines = summarize.main(["--runs", str(path), "--tag", "full"]).splitlines()
    assert lines[0].startswith("| model | attention | seed | split |")
    runs = [line for line in lines[2:] if "mean +- std" not in line]
    assert len(runs) == 5 and len(lines) == 2 + 5 + 4
    assert "| - | continuous | 1 | - | 30 (20) | 5.30 | 5.20 |" in lines[2]           # "-": none of the differences
    assert "| model.lr_schedule=cosine | continuous | 2 | - |" in lines[3]
    assert sum("| not recorded | continuous | 3 |" in line for line in lines) == 1
    patched = [line for line in runs if line.startswith("| patch_length=8.0 |")]
    assert [line.split(" | ")[3] for line in patched] == ["-", "43"]                # the latest of split 42 kept
    assert "| 5.10 |" in patched[0] and "| 5.00 |" in patched[1]
    assert "| patch_length=8.0 | **continuous: mean +- std** | 1,1 | -,43 |" in lines[-1]


def test_one_model_under_two_configs_has_no_model_column(summarize, tmp_path):
    rows = [record(a, 1, 5.2e-3, 3.6e-2, model="irregular", model_kwargs={"d_model": 64},
                   config=f"configs/physionet2012/irregular_{a}.yaml") for a in ("continuous", "softmax")]
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    lines = summarize.main(["--runs", str(path), "--tag", "full"]).splitlines()
    assert lines[0].startswith("| attention | seed | epochs (best) |") and len(lines) == 2 + 2 + 2
