"""benchmarks/physionet_search.py --report: the table of the validation search."""
import json

import pytest


@pytest.fixture(scope="module")
def search(benchmark_script):
    return benchmark_script("physionet_search")


def line(trial, attention, mse, epoch=5, seconds=120.4):
    return {"trial": trial, "attention": attention, "best_val_mse": mse, "best_epoch": epoch,
            "seconds_per_epoch_median": seconds}


def test_report_table_latest_line_per_trial_and_best_trial(search, tmp_path):
    rows = [line("base", "continuous", 5.6e-3), line("base", "softmax", 5.5e-3),
            line("1 layer", "continuous", 4.0e-3),                 # run again below: the later line counts
            line("1 layer", "continuous", 5.7e-3, epoch=4, seconds=80.0),
            line("zero sink", "softmax", 5.4e-3)]
    path = tmp_path / "search.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    lines = search.report(path).splitlines()
    assert len(lines) == 2 + len(search.TRIALS) + 2
    assert "| base | 5.600e-3 (5; 120) | 5.500e-3 (5; 120) |" in lines
    assert "| 1 layer | 5.700e-3 (4; 80) | - |" in lines
    assert "| lr 3e-4 | - | - |" in lines                        # a trial not run yet
    assert lines[-2] == "best for continuous: 'base' (5.600e-3)"
    assert lines[-1] == "best for softmax: 'zero sink' (5.400e-3)"
