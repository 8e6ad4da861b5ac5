"""benchmarks/ablations.py: the twins' table (best validation MSE, paired differences) and plots from
run records, without training."""
import json
import statistics

import pytest


@pytest.fixture(scope="module")
def ablations(benchmark_script):
    return benchmark_script("ablations")


def write(root, folder, attention, seed, curve, switch=None):
    run = root / folder / f"physionet2012_irregular_{attention}_s{seed}{'' if switch is None else '_switch2'}"
    run.mkdir(parents=True)
    (run / "record.json").write_text(json.dumps({"attention": attention, "seed": seed, "switch_epoch": switch,
                                                 "val_mse_curve": curve}))


def test_report_pairs_twins_by_seed(ablations, tmp_path, capsys):
    for seed, (c, m) in {1: (5.6, 5.7), 2: (5.8, 5.7), 3: (5.5, 5.6)}.items():
        write(tmp_path, "early", "continuous", seed, [9e-3, 7e-3, 6e-3, c * 1e-3, 6e-3])
        write(tmp_path, "early", "softmax", seed, [9e-3, 7e-3, 6e-3, m * 1e-3, 6e-3])
        write(tmp_path, "ablation/rope_off", "continuous", seed, [9e-3, 8e-3, 7e-3, 6.5e-3, (c + 0.4) * 1e-3])
    write(tmp_path, "ablation/switch", "softmax", 1, [9e-3, 8e-3, 7e-3, 6e-3, 5.9e-3], switch=2)
    write(tmp_path, "ablation/static", "continuous", 1, [1e-2] * 4)          # unfinished: left out
    out = tmp_path / "ablations.jsonl"
    assert ablations.main(["--report", "--runs", str(tmp_path), "--out", str(out),
                           "--plot-prefix", str(tmp_path / "plots" / "ablation")]) == 0
    text = capsys.readouterr().out
    diff = [5.6 - 5.7, 5.8 - 5.7, 5.5 - 5.6]
    assert (f"| base (3 seeds) | 5.633 +- {statistics.stdev([5.6, 5.8, 5.5]):.3f} | 5.667 +- 0.058 | "
            f"{statistics.mean(diff):.3f} +- {statistics.stdev(diff):.3f} |") in text
    assert "rope_off (" not in text                                          # no softmax twin: no table row
    assert "RoPE's effect (off - on, paired by seed): continuous 0.400 +- 0.000 e-3 (3 seeds)" in text
    assert "switch (softmax, then continuous from epoch 3; seed 1): best 5.900 e-3 against continuous 5.600" in text
    assert "| static" not in text and "static covariates' effect" not in text
    assert len(out.read_text().splitlines()) == 10
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["ablation_rope.png", "ablation_switch.png"]
