"""benchmarks/average_best.py: one fit read as its best epoch and as the mean of its k best epochs."""
import json

import pytest

from . import synthetic


@pytest.fixture(scope="module")
def script(benchmark_script):
    return benchmark_script("average_best")


def test_one_fit_gives_the_best_epoch_and_the_weights_mean(script, tmp_path):
    path = tmp_path / "series.csv"
    synthetic.series(600).to_csv(path, index=False)
    out = tmp_path / "records.jsonl"
    tiny = json.dumps({"patch_len": 8, "stride": 4, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16})
    records = script.main(["--data", str(path), "--lookback", "48", "--horizon", "12", "--model-kwargs", tiny,
                           "--seeds", "3", "--max-epochs", "4", "--k", "2", "--fit-option", "target=OT",
                           "--fit-option", "enable_checkpointing=true", "--test", "--out", str(out)])
    (record,) = records
    assert json.loads(out.read_text()) == record and sorted(tmp_path.iterdir()) == [out, path]   # nothing else written
    curve = record["val_mse_curve"]
    assert record["epochs_run"] == len(curve) == 4 and len(record["averaged_epochs"]) == 2
    assert record["best"] == record["averaged_epochs"][0] == 1 + min(range(4), key=curve.__getitem__)
    # the best epoch's weights evaluated again give the validation MSE logged for that epoch
    assert record["best_epoch"]["val"]["mse"] == pytest.approx(min(curve), rel=1e-5)
    assert record["averaged"]["val"]["mse"] != record["best_epoch"]["val"]["mse"]
    assert set(record["averaged"]) == {"val", "test"} and record["fit_options"] == {"target": "OT", "enable_checkpointing": True}
    assert record["seed"] == 3 and record["lookback"] == 48 and record["config"]["model_kwargs"]["d_model"] == 8


def test_bad_fit_option_is_named(script):
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        script.main(["--data", "ETTh1", "--fit-option", "target"])
