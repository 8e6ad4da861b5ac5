"""benchmarks/naive_blend.py: per-variable weights between a model and the last observation, cross-fitted."""
import numpy as np
import pytest


@pytest.fixture(scope="module")
def blend(benchmark_script):
    return benchmark_script("naive_blend")


def test_weights_are_the_clipped_least_squares_mix(blend):
    rng = np.random.default_rng(0)
    n = 400
    var = np.repeat(np.arange(4), n // 4)
    last, truth = rng.normal(size=n), rng.normal(size=n)
    model = truth.copy()
    model[var == 1] = last[var == 1] + 2 * (truth[var == 1] - last[var == 1])   # moves twice too far: 0.5
    model[var == 2] = last[var == 2] + 0.5 * (truth[var == 2] - last[var == 2])  # half the move: 2, clipped to 1
    model[var == 3] = last[var == 3] - (truth[var == 3] - last[var == 3])        # the wrong way: -1, clipped to 0
    weights = blend.blend_weights(var, model, last, truth, 5)
    np.testing.assert_allclose(weights, [1.0, 0.5, 1.0, 0.0, 1.0])               # variable 4 has no targets: the model


def test_per_variable_mse(blend):
    var = np.array([0, 0, 2])
    out = blend.per_variable_mse(var, np.array([1.0, 3.0, 2.0]), np.zeros(3), 3)
    np.testing.assert_allclose(out[[0, 2]], [5.0, 4.0])
    assert np.isnan(out[1])


def test_cross_fitting_scores_each_half_with_the_other_halfs_weights(blend):
    rng = np.random.default_rng(1)
    series = np.repeat(np.arange(40), 10)
    var = np.tile(np.arange(2), 200)
    last, truth = rng.normal(size=400), rng.normal(size=400)
    noise = last + rng.normal(size=400)                 # a model that knows nothing: moves at random
    model = np.where(var == 0, truth, noise)
    out = blend.cross_fitted(var, series, model, last, truth, 2, halvings=3, seed=7)
    assert out["mse"].shape == (3, 2) and out["weights"].shape == (3, 2, 2)
    np.testing.assert_allclose(out["weights"][:, :, 0], 1.0)          # the exact model is kept as it is
    np.testing.assert_allclose(out["mse"][:, 0], 0.0, atol=1e-12)
    assert (out["weights"][:, :, 1] < 0.3).all()                      # the random one mostly left out
    assert (out["mse"][:, 1] < blend.per_variable_mse(var, model, truth, 2)[1]).all()
    # the first halving by hand: the weights of one half score the other
    first = np.isin(series, np.random.default_rng(7).permutation(np.unique(series))[:20])
    mixed = model.copy()
    for fit, score in ((first, ~first), (~first, first)):
        w = blend.blend_weights(var[fit], model[fit], last[fit], truth[fit], 2)
        mixed[score] = last[score] + w[var[score]] * (model[score] - last[score])
    np.testing.assert_allclose(out["mse"][0], blend.per_variable_mse(var, mixed, truth, 2))
    # the product's minimum count: 200 targets per variable, ~100 per half; at 150 every weight stays 1
    kept = blend.cross_fitted(var, series, model, last, truth, 2, halvings=2, seed=7, min_points=150)
    np.testing.assert_allclose(kept["weights"], 1.0)
    np.testing.assert_allclose(kept["mse"], np.tile(blend.per_variable_mse(var, model, truth, 2), (2, 1)), atol=1e-12)


def test_the_script_on_a_tiny_protocol_fit(blend, benchmark_script, tmp_path, capsys):
    """From a checkpoint: the frames of the model and the last observation hold the same targets of the
    validation stays, row for row, and the record's figures are the per-variable means of them."""
    import json

    from tsattn import Forecaster

    from .synthetic import LONG, observations

    path = tmp_path / "obs.csv"
    observations(n_series=12, hours=48, seed=0, resolution=0.5, id_format="p{:02d}").to_csv(path, index=False)
    f = Forecaster("irregular", lookback=24.0, horizon=24.0, batch_size=4, seed=1,
                   model_kwargs={"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "dropout": 0.0})
    f.fit(path, **LONG, origins=[24.0], split_fractions=[0.5, 0.25, 0.25], max_epochs=1, limit_train_batches=1,
          enable_progress_bar=False, logger=False, enable_checkpointing=False)
    ckpt = f.save(tmp_path / "tiny.ckpt")
    assert blend.main(["--ckpt", str(ckpt), "--halvings", "2", "--out", str(tmp_path / "r.jsonl"),
                       "--table", str(tmp_path / "t.csv")]) == 0
    record = json.loads((tmp_path / "r.jsonl").read_text())
    _, data, frames = benchmark_script("per_variable").load_frames([ckpt], "val")
    model, last = frames["model"], frames["last_observation"]
    assert set(model["patient"]) == data.series_ids("val")
    assert model[["patient", "name", "cutoff", "lead", "observed"]].equals(last[["patient", "name", "cutoff", "lead", "observed"]])
    scale = model["name"].map(data.scale)
    for frame, key in ((model, "model_mse"), (last, "last_observation_mse")):
        want = (((frame["forecast"] - frame["observed"]) / scale) ** 2).groupby(frame["name"]).mean().mean()
        assert record[key] == pytest.approx(want, rel=1e-9)
    assert record["mixed_mse_mean"] > 0 and "mixed per variable" in capsys.readouterr().out
    assert blend.main(["--ckpt", str(ckpt), "--halvings", "2", "--product-rule", "--out", str(tmp_path / "p.jsonl")]) == 0
    product = json.loads((tmp_path / "p.jsonl").read_text())
    assert product["product_rule"] and not record["product_rule"]
    for key in ("model_mse", "last_observation_mse"):                        # the same model and baseline
        assert product[key] == record[key]
