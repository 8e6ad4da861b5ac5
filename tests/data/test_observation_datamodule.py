"""ObservationDataModule: fixed and rolling origins, splits by series and by time, the scaler, batches.

Every window, split and count is checked against a brute-force computation on the observations
(plain numpy masks over the whole set), not against the module's own row arithmetic.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from tsattn.data import (
    DataError,
    DataWarning,
    ObservationDataModule,
    ObservationSet,
    UnknownDatasetError,
    collate_forecast_samples,
    read_observations,
)

SPLIT_NAMES = ("train", "val", "test")


def _irregular(n_series: int = 12, seed: int = 0, span: float = 100.0, n_obs: int = 150) -> ObservationSet:
    """Series with random times (some repeated), 3 variables at their own times, values by variable."""
    rng = np.random.default_rng(seed)
    frames = []
    for s in range(n_series):
        times = np.sort(np.round(rng.uniform(0, span, n_obs), 1))
        var = rng.integers(0, 3, n_obs)
        frames.append(pd.DataFrame({
            "id": f"s{s:02d}", "t": times, "variable": np.array(["a", "b", "c"])[var],
            "value": rng.normal(size=n_obs) * (var + 1) + 10 * var,
        }))
    return read_observations(pd.concat(frames), id_column="id", time_column="t", variable_column="variable",
                             value_column="value")


def _grid_series(hours: int = 200, seed: int = 1, keep: float = 0.6) -> ObservationSet:
    """One hourly series of 2 variables, thinned at random (each value kept with probability ``keep``)."""
    t = np.arange(hours, dtype=float)
    frame = pd.DataFrame({"time": t, "x": np.sin(t / 5), "y": np.cos(t / 7) * 3})
    return read_observations(frame).thin(keep, seed=seed, by="observation")


def _batches(loader) -> list[dict]:
    return [b for b in loader]


def _rows(obs: ObservationSet, s: int, lo: float, hi: float) -> np.ndarray:
    """Brute force: global rows of series s with lo <= time < hi."""
    series = obs.series_index
    return np.flatnonzero((series == s) & (obs.time >= lo) & (obs.time < hi))


# -- fixed origins, split by series ------------------------------------------------------------------------
@pytest.mark.parametrize("history, horizon", [(None, None), (10.0, 20.0)])
def test_fixed_origin_windows_match_brute_force(history, horizon):
    obs = _irregular()
    dm = ObservationDataModule(obs, origins=[40.0], lookback=history, horizon=horizon)
    dm.setup()
    assert sorted(np.concatenate([dm.split_series(n) for n in SPLIT_NAMES]).tolist()) == list(range(12))
    assert [len(dm.split_series(n)) for n in SPLIT_NAMES] == [6, 3, 3]  # sklearn: 9 seen / 3, then floor(0.75 * 9)
    for name in SPLIT_NAMES:
        samples = dm.samples(name)
        assert sorted(samples.series.tolist()) == sorted(dm.split_series(name).tolist())
        for i in range(len(samples)):
            s = int(samples.series[i])
            hist = _rows(obs, s, -np.inf if history is None else 40.0 - history, 40.0)
            tgt = _rows(obs, s, 40.0, np.inf if horizon is None else 40.0 + horizon)
            assert np.array_equal(np.arange(samples.history_start[i], samples.target_start[i]), hist)
            assert np.array_equal(np.arange(samples.target_start[i], samples.target_stop[i]), tgt)


@pytest.mark.parametrize("history, horizon", [(None, None), (10.0, 20.0)])
def test_train_origins_add_train_samples_only(history, horizon):
    obs = _irregular()
    base = ObservationDataModule(obs, origins=[40.0], lookback=history, horizon=horizon)
    dm = ObservationDataModule(obs, origins=[40.0], lookback=history, horizon=horizon, train_origins=[30.0, 55.0])
    base.setup()
    dm.setup()
    for name in ("val", "test"):                                          # the evaluation is unchanged
        assert np.array_equal(dm.split_series(name), base.split_series(name))
        for field in ("series", "origin", "history_start", "target_start", "target_stop"):
            assert np.array_equal(getattr(dm.samples(name), field), getattr(base.samples(name), field))
    train = dm.samples("train")
    expected = {(int(s), t0) for s in dm.split_series("train") for t0 in (40.0, 30.0, 55.0)}
    assert {(int(s), float(t0)) for s, t0 in zip(train.series, train.origin)} == expected
    assert len(train) == len(expected)
    for i in range(len(train)):                                           # each window from the observations
        s, t0 = int(train.series[i]), float(train.origin[i])
        hist = _rows(obs, s, -np.inf if history is None else t0 - history, t0)
        tgt = _rows(obs, s, t0, np.inf if horizon is None else t0 + horizon)
        assert np.array_equal(np.arange(train.history_start[i], train.target_start[i]), hist)
        assert np.array_equal(np.arange(train.target_start[i], train.target_stop[i]), tgt)
    # the scaler is fit on the split's observations, whatever the origins
    assert np.array_equal(dm.scaler.transform(obs.value, obs.variable), base.scaler.transform(obs.value, obs.variable))
    assert len(dm.train_dataloader().dataset) == 3 * len(base.train_dataloader().dataset)
    record = dm.record()
    assert record["options"]["train_origins"] == [30.0, 55.0]
    # other data read the fit's way (a fitted model's evaluation or forecasts) takes no extra train samples
    assert ObservationDataModule.from_record(record, obs.subset(np.arange(6))).train_origins is None


def test_train_origins_ask_history_of_the_train_series_only():
    obs = _irregular()
    probe = ObservationDataModule(obs, origins=[40.0])
    probe.setup()
    held_out, train = int(probe.split_series("test")[0]), int(probe.split_series("train")[0])
    frame = obs.to_frame("long")
    late = frame[~((frame["id"] == obs.series_ids[held_out]) & (frame["time"] < 30.0))]   # a test series starts at 30
    obs = read_observations(late, id_column="id", time_column="time", variable_column="variable", value_column="value")
    dm = ObservationDataModule(obs, origins=[40.0], train_origins=[20.0])
    dm.setup()                                                 # the test series needs no history before 20
    assert len(dm.samples("train")) == 2 * len(dm.split_series("train"))
    assert np.array_equal(dm.split_series("test"), probe.split_series("test"))
    early = frame[~((frame["id"] == obs.series_ids[train]) & (frame["time"] < 30.0))]      # a train series does
    obs = read_observations(early, id_column="id", time_column="time", variable_column="variable", value_column="value")
    with pytest.raises(DataError, match=rf"no observation before 20 .*{obs.series_ids[train]}"):
        ObservationDataModule(obs, origins=[40.0], train_origins=[20.0]).setup()


def test_train_origins_is_a_fit_option_of_the_irregular_models_only():
    from tsattn.tasks import get_task, split_fit_options

    data, trainer = split_fit_options(get_task("observations"), "irregular", {"train_origins": [20.0], "max_epochs": 1})
    assert data == {"train_origins": [20.0]} and trainer == {"max_epochs": 1}
    with pytest.raises(ValueError, match="train_origins"):
        split_fit_options(get_task("window"), "patchtst", {"train_origins": [20.0]})


@pytest.mark.parametrize("kwargs, phrase", [
    (dict(origins=[40.0], train_origins=["soon"]), "train_origins must be a list of numbers"),
    (dict(origins=[40.0], train_origins=[]), "train_origins must be a list of numbers"),
    (dict(origin_stride=5.0, lookback=20.0, horizon=10.0, train_origins=[30.0]), "rolling origins"),
    (dict(origins=[40.0], split="time", train_origins=[30.0]), "split='time'"),
])
def test_train_origins_bad_arguments(kwargs, phrase):
    with pytest.raises(DataError, match=phrase):
        ObservationDataModule(_irregular(n_series=3), **kwargs)

def test_series_split_follows_sklearn_on_sorted_ids():
    from sklearn.model_selection import train_test_split

    obs = _irregular(n_series=20).subset(np.random.default_rng(0).permutation(20))  # set order shuffled
    dm = ObservationDataModule(obs, origins=[40.0], split_seed=5)
    dm.setup()
    ids = sorted(obs.series_ids.tolist())
    seen, test = train_test_split(ids, train_size=0.8, random_state=5, shuffle=True)
    train, val = train_test_split(seen, train_size=0.75, shuffle=False)
    for name, part in zip(SPLIT_NAMES, (train, val, test)):
        assert sorted(obs.series_ids[dm.split_series(name)].tolist()) == sorted(part)


def test_series_without_history_is_an_error_naming_it():
    frame = pd.DataFrame({"id": ["a", "a", "late", "late"], "t": [1.0, 30.0, 25.0, 31.0], "x": [1.0, 2, 3, 4]})
    obs = read_observations(frame, id_column="id", time_column="t")
    dm = ObservationDataModule(obs, origins=[24.0], split_fractions=(0.5, 0.0, 0.5))
    with pytest.raises(DataError, match=r"1 series have no observation before 24 .*series 'late' \(index 1\)"):
        dm.setup()
    windowed = ObservationDataModule(obs, origins=[24.0], lookback=5.0, split_fractions=(0.5, 0.0, 0.5))
    with pytest.raises(DataError, match=r"no observation \[19, 24\)"):
        windowed.setup()


def test_series_with_history_but_no_targets_is_kept():
    frame = pd.DataFrame({"id": ["a", "a", "short", "b", "b"], "t": [1.0, 30.0, 2.0, 3.0, 40.0],
                          "x": [1.0, 2, 3, 4, 5]})
    obs = read_observations(frame, id_column="id", time_column="t")
    dm = ObservationDataModule(obs, origins=[24.0], split_fractions=(1 / 3, 1 / 3, 1 / 3), scale_from="seen")
    dm.setup()
    assert sum(len(dm.samples(n)) for n in SPLIT_NAMES) == 3
    name = next(n for n in SPLIT_NAMES if obs.position("short") in dm.split_series(n))
    batch = dm.split_dataset(name).batch([0])
    assert batch["x_mask"].sum() == 1 and batch["y_mask"].sum() == 0  # it counts, adds no loss
    assert batch["y_mask"].shape == (1, 1) and batch["y_value"].abs().sum() == 0  # padded to width 1


# -- rolling origins, split by time --------------------------------------------------------------------------
def test_rolling_origins_windows_and_time_split():
    obs = _grid_series()
    history, horizon, stride = 10.0, 5.0, 3.0
    dm = ObservationDataModule(obs, origin_stride=stride, lookback=history, horizon=horizon, scaler="standard")
    dm.setup()
    assert dm.split == "time" and dm.split_fractions == (0.7, 0.1, 0.2)
    t_first, t_last = obs.time[0], obs.time[-1]
    b1, b2 = t_first + 0.7 * (t_last - t_first), t_first + 0.8 * (t_last - t_first)
    np.testing.assert_allclose(dm.time_borders, [[b1, b2]], rtol=1e-12)
    every = np.arange(t_first + history, t_last - horizon + 1e-9, stride)  # the origin grid
    seen = []
    for name in SPLIT_NAMES:
        samples = dm.samples(name)
        assert len(samples) > 0
        for i in range(len(samples)):
            t0 = samples.origin[i]
            hist = _rows(obs, 0, t0 - history, t0)
            tgt = _rows(obs, 0, t0, t0 + horizon)
            assert np.array_equal(np.arange(samples.history_start[i], samples.target_start[i]), hist)
            assert np.array_equal(np.arange(samples.target_start[i], samples.target_stop[i]), tgt)
            assert np.all(obs.time[hist] < t0) and np.all(obs.time[tgt] >= t0)  # no target before its origin
            assert t0 + horizon <= t_last
        end = samples.origin + horizon
        if name == "train":
            assert np.all(end <= b1)
        elif name == "val":
            assert np.all((samples.origin >= b1) & (end <= b2))
        else:
            assert np.all(samples.origin >= b2)
        seen.append(samples.origin)
    got = np.sort(np.concatenate(seen))
    straddling = ((every < b1) & (every + horizon > b1)) | ((every < b2) & (every + horizon > b2))
    np.testing.assert_allclose(got, every[~straddling], rtol=1e-12)  # every other grid origin, once
    val_first = dm.samples("val")
    assert np.any(obs.time[val_first.history_start] < b1)  # val histories reach back into train


def test_rolling_origins_without_history_have_no_sample():
    obs = _grid_series(keep=1.0)
    gap = (obs.time >= 50) & (obs.time < 75)
    gapped = ObservationSet(
        series_ids=obs.series_ids, offsets=np.array([0, int((~gap).sum())]), time=obs.time[~gap],
        variable=obs.variable[~gap], value=obs.value[~gap], variables=obs.variables,
    )
    dm = ObservationDataModule(gapped, origin_stride=1.0, lookback=10.0, horizon=5.0, split_fractions=(1.0, 0.0, 0.0))
    dm.setup()
    origins = dm.samples("train").origin
    assert not np.any((origins >= 60) & (origins <= 75))  # their history window [t0 - 10, t0) is empty
    assert np.any(origins == 59.0) and np.any(origins == 76.0)
    assert np.all(dm.samples("train").n_history > 0)


def test_batches_of_rolling_samples_stay_inside_their_windows():
    dm = ObservationDataModule(_grid_series(), origin_stride=2.0, lookback=10.0, horizon=5.0, batch_size=8)
    dm.setup()
    for batch in _batches(dm.train_dataloader()) + _batches(dm.test_dataloader()):
        x, y = batch["x_time"][batch["x_mask"]], batch["y_time"][batch["y_mask"]]
        assert torch.all((x >= -10) & (x < 0)) and torch.all((y >= 0) & (y < 5))


# -- the scaler --------------------------------------------------------------------------------------------
def _changed(obs: ObservationSet, rows: np.ndarray) -> ObservationSet:
    value = obs.value.copy()
    value[rows] = value[rows] * 100 + 1e4
    return obs.with_values(value)


@pytest.mark.parametrize("scale_from", ["train", "seen"])
@pytest.mark.parametrize("scaler", ["minmax", "standard"])
def test_scaler_never_sees_test_series(scale_from, scaler):
    obs = _irregular(n_series=15)
    options = dict(origins=[50.0], scaler=scaler, scale_from=scale_from, seed=3, batch_size=4)
    dm = ObservationDataModule(obs, **options)
    dm.setup()
    test_rows = np.isin(obs.series_index, dm.split_series("test"))
    other = ObservationDataModule(_changed(obs, test_rows), **options)
    other.setup()
    np.testing.assert_array_equal(dm.scaler.offset, other.scaler.offset)
    np.testing.assert_array_equal(dm.scaler.scale, other.scaler.scale)
    for loader in ("train_dataloader", "val_dataloader"):
        for a, b in zip(_batches(getattr(dm, loader)()), _batches(getattr(other, loader)())):
            assert all(torch.equal(a[k], b[k]) for k in a)
    changed = [not torch.equal(a["y_value"], b["y_value"]) for a, b in zip(_batches(dm.test_dataloader()),
                                                                       _batches(other.test_dataloader()))]
    assert all(changed)  # the change itself is visible where it belongs


@pytest.mark.parametrize("scale_from", ["train", "seen"])
def test_scaler_never_sees_test_times(scale_from):
    obs = _grid_series(hours=300)
    options = dict(origin_stride=1.0, lookback=12.0, horizon=6.0, scaler="minmax", scale_from=scale_from, seed=0)
    dm = ObservationDataModule(obs, **options)
    dm.setup()
    b1, b2 = dm.time_borders[0]
    other = ObservationDataModule(_changed(obs, np.flatnonzero(obs.time >= b2)), **options)
    other.setup()
    np.testing.assert_array_equal(dm.scaler.offset, other.scaler.offset)
    np.testing.assert_array_equal(dm.scaler.scale, other.scaler.scale)
    for loader in ("train_dataloader", "val_dataloader"):
        for a, b in zip(_batches(getattr(dm, loader)()), _batches(getattr(other, loader)())):
            assert all(torch.equal(a[k], b[k]) for k in a)
    fit = obs.time < (b1 if scale_from == "train" else b2)
    for v in range(obs.n_variables):
        values = obs.value[fit & (obs.variable == v)]
        assert dm.scaler.offset[v] == values.min()
        assert dm.scaler.scale[v] == pytest.approx(values.max() - values.min(), rel=1e-12)


def test_minmax_standard_constant_and_inverse_transform():
    frame = pd.DataFrame({"id": np.repeat(["a", "b", "c", "d", "e"], 4), "t": np.tile([0.0, 1.0, 2.0, 3.0], 5),
                          "x": np.arange(20.0) ** 1.5, "k": 7.0})
    obs = read_observations(frame, id_column="id", time_column="t")
    for kind in ("minmax", "standard"):
        dm = ObservationDataModule(obs, origins=[2.0], scaler=kind, split_fractions=(0.6, 0.2, 0.2))
        dm.setup()
        fit = np.isin(obs.series_index, dm.split_series("train"))
        x = obs.value[fit & (obs.variable == 0)]
        scaled = dm.scaler.transform(x, np.zeros_like(x, dtype=np.int64))
        if kind == "minmax":
            assert scaled.min() == 0.0 and scaled.max() == pytest.approx(1.0, rel=1e-12)
        else:
            assert abs(scaled.mean()) < 1e-12 and scaled.std() == pytest.approx(1.0, rel=1e-12)
        assert dm.scaler.scale[1] == 1.0  # the constant variable: no division by zero
        batch = next(iter(dm.val_dataloader()))
        k_values = batch["x_value"][batch["x_mask"] & (batch["x_var"] == 1)]
        assert torch.all(k_values == 0)  # 7 - offset 7 (min or mean), scale 1
        back = dm.inverse_transform(batch["x_value"], batch["x_var"])
        s = int(batch["series"][0])
        rows = _rows(obs, s, -np.inf, 2.0)
        expected = torch.as_tensor(obs.value[rows], dtype=torch.float32)
        torch.testing.assert_close(back[0][batch["x_mask"][0]], expected, rtol=1e-6, atol=1e-5)
    stats = dm.scaler.statistics
    assert list(stats.index) == ["x", "k"] and stats.loc["k", "count"] == 3 * 4


def test_variable_never_observed_in_the_fitting_split_is_an_error():
    frame = pd.DataFrame({"id": list("aabbccddee"), "t": [0.0, 5.0] * 5, "x": np.arange(10.0), "rare": np.nan})
    with pytest.warns(DataWarning, match=r"'rare' \(no values\)"):  # an empty column is left out, as in read_series
        probe = ObservationDataModule(read_observations(frame, id_column="id", time_column="t"), origins=[1.0])
    probe.split_series("test")  # sets up with x only observed
    test_id = probe.observations.series_ids[probe.split_series("test")[0]]
    frame.loc[(frame["id"] == test_id) & (frame["t"] == 5.0), "rare"] = 1.0  # observed in a test series only
    obs = read_observations(frame, id_column="id", time_column="t")
    dm = ObservationDataModule(obs, origins=[1.0])
    with pytest.raises(DataError, match=r"variable\(s\) \['rare'\] are never observed in the train observations"):
        dm.setup()
    only_x = ObservationDataModule(obs, origins=[1.0], variables=["x"])
    only_x.setup()
    assert only_x.variables == ["x"] and only_x.n_variables == 1


# -- batches --------------------------------------------------------------------------------------------
def test_batch_layout_matches_brute_force():
    obs = _irregular()
    dm = ObservationDataModule(obs, origins=[30.0, 60.0], lookback=25.0, scaler="standard", batch_size=5)
    dm.setup()
    for batch in _batches(dm.val_dataloader()):
        assert batch["x_time"].dtype == torch.float32 and batch["x_var"].dtype == torch.int64
        assert batch["x_value"].dtype == torch.float32 and batch["x_mask"].dtype == torch.bool
        assert batch["series"].dtype == torch.int64 and batch["origin"].dtype == torch.float64
        n_x = batch["x_mask"].sum(1)
        assert batch["x_time"].shape[1] == max(1, int(n_x.max()))
        for b in range(len(batch["series"])):
            s, t0 = int(batch["series"][b]), float(batch["origin"][b])
            for part, (lo, hi) in (("x", (t0 - 25.0, t0)), ("y", (t0, np.inf))):
                rows = _rows(obs, s, lo, hi)
                mask = batch[f"{part}_mask"][b]
                n = len(rows)
                assert mask[:n].all() and not mask[n:].any()  # real observations first, then padding
                np.testing.assert_allclose(batch[f"{part}_time"][b, :n].numpy(), obs.time[rows] - t0, rtol=1e-6, atol=1e-5)
                np.testing.assert_array_equal(batch[f"{part}_var"][b, :n].numpy(), obs.variable[rows])
                scaled = dm.scaler.transform(obs.value[rows], obs.variable[rows])
                np.testing.assert_allclose(batch[f"{part}_value"][b, :n].numpy(), scaled, rtol=1e-6, atol=1e-6)
                for key in ("time", "var", "value"):
                    assert torch.all(batch[f"{part}_{key}"][b, n:] == 0)  # padding is 0
                order = np.lexsort((obs.variable[rows], obs.time[rows]))
                assert np.array_equal(order, np.arange(n))  # sorted by (time, variable)


def test_collate_of_single_samples_equals_the_vectorised_batch():
    dm = ObservationDataModule(_irregular(), origins=[45.0], lookback=20.0, horizon=30.0)
    dm.setup()
    dataset = dm.train_dataset
    indices = [4, 0, 5, 2]
    fast = dataset.batch(indices)
    slow = collate_forecast_samples([dataset[i] for i in indices])
    assert fast.keys() == slow.keys()
    for key in fast:
        assert torch.equal(fast[key], slow[key]), key
    assert collate_forecast_samples(fast) == fast


def test_train_order_is_fixed_by_seed_and_epoch():
    def order(dm, epoch):
        loader = dm.train_dataloader()
        loader.sampler.set_epoch(epoch)
        return torch.cat([b["series"] for b in loader]).tolist()

    dm, twin = (ObservationDataModule(_irregular(n_series=30), origins=[40.0], seed=11, batch_size=4) for _ in range(2))
    dm.setup()
    twin.setup()
    assert order(dm, 0) == order(twin, 0) and order(dm, 3) == order(twin, 3)
    assert order(dm, 0) != order(dm, 1)
    assert sorted(order(dm, 0)) == sorted(dm.split_series("train").tolist())
    in_order = torch.cat([b["series"] for b in dm.val_dataloader()]).tolist()
    assert in_order == dm.samples("val").series.tolist()


# -- inputs and options ----------------------------------------------------------------------------------
def test_paths_and_npz_inputs(tmp_path):
    obs = _irregular(n_series=6)
    long = obs.to_frame()
    csv = tmp_path / "obs.csv"
    long.to_csv(csv, index=False)
    from_csv = ObservationDataModule(str(csv), origins=[40.0], id_column="id", variable_column="variable",
                                     value_column="value")
    npz = obs.save_npz(tmp_path / "obs.npz")
    from_npz = ObservationDataModule(npz, origins=[40.0])
    for dm in (from_csv, from_npz):
        dm.setup()
        np.testing.assert_allclose(dm.observations.value, obs.value, rtol=1e-12)
        assert dm.sample_counts()["samples"].sum() == 6
    assert from_npz.hparams["data"] == str(npz)


@pytest.mark.parametrize(
    "kwargs, phrase",
    [
        (dict(origins=[24.0], origin_stride=1.0), "give either origins"),
        (dict(), "give either origins"),
        (dict(origin_stride=1.0, horizon=5.0), "rolling origins need a finite lookback"),
        (dict(origins=[24.0], split="random"), "`split` must be one of"),
        (dict(origins=[24.0], split_fractions=(0.5, 0.5, 0.5)), "split_fractions must be three numbers"),
        (dict(origins=[24.0], scaler="robust"), "`scaler` must be one of"),
        (dict(origins=[24.0], scale_from="test"), "`scale_from` must be one of"),
        (dict(origins=[24.0], lookback=-1.0), "lookback must be a number > 0"),
        (dict(origins=[24.0], subsample=1.5), "subsample must be a fraction"),
        (dict(origins=[24.0], batch_size=0), "batch_size must be a positive integer"),
        (dict(origin_stride=5.0, lookback=80.0, horizon=30.0, split="time"), "no train samples"),
    ],
)
def test_bad_arguments(kwargs, phrase):
    with pytest.raises(DataError, match=phrase):
        dm = ObservationDataModule(_irregular(n_series=3), **kwargs)
        dm.setup()


def test_bad_data():
    with pytest.raises(DataError, match="neither a registered dataset"):
        ObservationDataModule("ETTh3", origins=[1.0])
    with pytest.raises(DataError, match="data must be an ObservationSet"):
        ObservationDataModule(42, origins=[1.0])
    with pytest.raises(DataError, match="cannot split 2 series"):
        dm = ObservationDataModule(_irregular(n_series=2), origins=[40.0])
        dm.setup()
    with pytest.raises(UnknownDatasetError, match="irregular observations"):
        from tsattn.data import registry

        registry.get_spec("physionet2012", kind="series")


def test_etth1_subsampled_rows_with_rolling_origins(real_file):
    real_file("ETTh1.csv")
    dm = ObservationDataModule("ETTh1", origin_stride=24.0, lookback=96.0, horizon=24.0, subsample=0.3,
                               subsample_seed=0, batch_size=16)
    dm.setup()
    obs = dm.observations
    assert len(obs) == 1 and obs.variables == ("HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT")
    assert obs.time_unit == pd.Timedelta(hours=1) and np.all(obs.time == np.round(obs.time))
    kept_hours = np.unique(obs.time)
    assert 0.27 < len(kept_hours) / 17420 < 0.33 and obs.n_observations == 7 * len(kept_hours)  # whole rows
    counts = dm.sample_counts()
    assert (counts["samples"] > 0).all()
    assert counts["samples"].sum() == pytest.approx((17419 - 96 - 24) / 24 - 2, abs=3)  # minus straddlers
    batch = next(iter(dm.test_dataloader()))
    x, y = batch["x_time"][batch["x_mask"]], batch["y_time"][batch["y_mask"]]
    assert torch.all((x >= -96) & (x < 0)) and torch.all((y >= 0) & (y < 24))
    assert dm.scaler.kind == "standard" and dm.scaler.statistics["count"].min() > 0
