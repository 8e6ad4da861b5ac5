"""The format seam: an observation format read by one reader registered here and a dataset entry
registered here (no edit anywhere else) is what ``Forecaster.fit("<its name>")`` reads."""
import numpy as np
import pandas as pd
import pytest

from tsattn import Forecaster
from tsattn.data import ObservationSet, registry
from tsattn.data.io.readers import register_reader, unregister_reader
from tsattn.data.observations.observation_set import assemble_observations


def read_toy(paths, *, max_series=None, scale: float = 1.0):
    """``<series> <hours> <variable> <value>`` lines, one observation each (whitespace-separated)."""
    frame = pd.concat([pd.read_csv(p, sep=r"\s+", names=["s", "t", "v", "x"]) for p in paths])
    ids, series = np.unique(frame["s"].to_numpy(), return_inverse=True)
    names = sorted(frame["v"].unique())
    variable = frame["v"].map({n: k for k, n in enumerate(names)}).to_numpy()
    offsets, time, var, value, _ = assemble_observations(series, frame["t"].to_numpy(float), variable,
                                                         scale * frame["x"].to_numpy(float), len(ids))
    observations = ObservationSet(series_ids=ids, offsets=offsets, time=time, variable=var, value=value,
                                  variables=tuple(names), source=", ".join(map(str, paths)))
    return observations if max_series is None else observations.subset(np.arange(min(max_series, len(ids))))


@pytest.fixture
def toy_dataset(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    lines = [f"s{k} {t:.1f} {name} {level + rng.standard_normal():.3f}"
             for k in range(10) for t in np.arange(0, 48, 1.5) for name, level in (("a", 5.0), ("b", -3.0))
             if rng.random() < 0.7]
    (tmp_path / "toy.txt").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("TSATTN_DATA_DIR", str(tmp_path))
    register_reader("toy-format")(read_toy)
    spec = registry.register(registry.DatasetSpec(
        name="toyset", kind="observations", files=(registry.RemoteFile("toy.txt", "file:///nowhere/toy.txt", None, None),),
        format="toy-format", protocol={"origins": (24.0,), "split": "series", "split_fractions": (0.6, 0.2, 0.2)}))
    yield spec
    registry.unregister("toyset")
    unregister_reader("toy-format")


def test_a_registered_format_is_read_by_name(toy_dataset):
    f = Forecaster("irregular", lookback=None, horizon=None, model_kwargs={"d_model": 8, "n_heads": 2, "n_layers": 1,
                                                                           "d_ff": 16, "time_features": 4},
                   lr=3e-3, lr_schedule="constant", batch_size=4, seed=1)
    f.fit("toyset", max_epochs=1, logger=False, enable_progress_bar=False, reader_options={"scale": 2.0})
    dm = f.datamodule
    assert dm.variables == ["a", "b"] and len(dm.observations) == 10 and dm.origins == [24.0]  # the protocol
    assert dm.scaler.statistics.loc["a", "mean"] == pytest.approx(10.0, abs=0.5)  # the reader's option applied
    assert f.data_record["source"] == "toyset" and f.horizon is not None and f.horizon <= 24.0
    out = f.predict(origin=24.0)  # the registered source is read again by name
    assert set(out["variable"]) == {"a", "b"} and np.isfinite(out["value"]).all()
