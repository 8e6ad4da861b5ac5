"""benchmarks/plot_curves.py: the last record of each named run, the mean and spread per epoch over the runs
that reached it, a PNG, and clear errors for a bad line or a missing run."""
import json

import numpy as np
import pytest


def _records(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_band_averages_the_runs_that_reached_each_epoch(benchmark_script):
    plot = benchmark_script("plot_curves")
    epochs, mean, std = plot.band([[3.0, 2.0, 1.0], [5.0, 4.0]])
    assert list(epochs) == [1, 2, 3]
    np.testing.assert_allclose(mean, [4.0, 3.0, 1.0])
    np.testing.assert_allclose(std, [np.sqrt(2.0), np.sqrt(2.0), 0.0])       # ddof 1; one run at epoch 3: 0


def test_lines_read_the_last_record_of_each_run_and_write_a_png(benchmark_script, tmp_path, capsys):
    plot = benchmark_script("plot_curves")
    records = tmp_path / "runs.jsonl"
    _records(records, [{"name": "a_s1", "val_mse_curve": [9e-3, 9e-3]},             # replaced by its resumed record
                       {"name": "a_s1", "val_mse_curve": [6e-3, 5e-3, 5.5e-3]},
                       {"name": "a_s2", "val_mse_curve": [6e-3, 4e-3]}])
    label, curves = plot.read_curves(f"twin={records}:a_s1,a_s2")
    assert label == "twin" and curves == [[6e-3, 5e-3, 5.5e-3], [6e-3, 4e-3]]
    assert plot.read_curves(f"twin={records}:a_s[12]")[1] == curves                 # a shell-style pattern
    out = tmp_path / "figures" / "curves.png"
    assert plot.main([f"twin={records}:a_s1,a_s2", "--out", str(out), "--vline", "2.5"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "twin: 2 runs, best mean 4.500 e-3 at epoch 2 (of the 2 epochs" in capsys.readouterr().out
    _records(records, [{"name": "a_s1", "val_mse_curve": [6e-3, 5e-3, 1e-3]},
                       {"name": "a_s2", "val_mse_curve": [6e-3, 4e-3]}])
    plot.main([f"twin={records}:a_s*", "--out", str(out)])      # epoch 3, one run's alone, is not the best mean
    assert "best mean 4.500 e-3 at epoch 2" in capsys.readouterr().out


def test_bad_lines_name_the_fix(benchmark_script, tmp_path):
    plot = benchmark_script("plot_curves")
    records = tmp_path / "runs.jsonl"
    _records(records, [{"name": "a_s1", "val_mse_curve": [6e-3]}, {"name": "b_s1"}])
    with pytest.raises(SystemExit, match="LABEL=FILE:NAME"):
        plot.read_curves(str(records))
    with pytest.raises(SystemExit, match=r"no record named 'a_s9'.*a_s1"):
        plot.read_curves(f"x={records}:a_s9")
    with pytest.raises(SystemExit, match="no val_mse_curve"):
        plot.read_curves(f"x={records}:b_s1")
