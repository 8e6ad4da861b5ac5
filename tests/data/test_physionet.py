"""PhysioNet 2012: parse rules, errors, the cache, the registry entry, and the full benchmark counts.

Parse rules and errors use small synthetic archives. The real archives (TSATTN_DATA_DIR/physionet2012)
are parsed once per test session (per xdist worker) into a session cache folder, and checked against
an independent reading of the raw text with plain pandas (ids from the file names, times from
splitting "HH:MM", duplicates averaged by a groupby).
"""
from __future__ import annotations

import dataclasses
import io
import os
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

from tsattn.data import (
    PHYSIONET2012_VARIABLES,
    DataError,
    DataFileNotFoundError,
    DownloadError,
    ObservationDataModule,
    load_physionet2012,
    parse_physionet_archives,
    registry,
)
from tsattn.data.io import physionet as physionet_module
from tsattn.data.__main__ import main as cli_main
from tsattn.data.files import sha256_of

HEADER = "Time,Parameter,Value\n"


def _record(rid: int, *lines: str, descriptors: bool = True) -> str:
    head = [f"00:00,RecordID,{rid}"]
    if descriptors:
        head += ["00:00,Age,54", "00:00,Gender,0", "00:00,Height,-1", "00:00,ICUType,4", "00:00,Weight,-1"]
    return HEADER + "".join(f"{line}\n" for line in head + list(lines))


def _archive(path: Path, records: dict, folder: str = "set-a") -> Path:
    """Write a .tar.gz holding ``folder/<name>.txt`` for each (name, text) of ``records``."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text in records.items():
            data = text.encode() if isinstance(text, str) else text
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def _real_archives() -> list[Path]:
    folder = Path(os.environ.get("TSATTN_DATA_DIR", "")) / "physionet2012"
    paths = [folder / f"set-{part}.tar.gz" for part in "abc"]
    if not all(p.is_file() for p in paths):
        pytest.skip(f"the PhysioNet 2012 archives are not under {folder}")
    return paths


# -- parse rules -----------------------------------------------------------------------------------------
@pytest.fixture
def two_records(tmp_path):
    later = _record(
        200001,
        "00:07,HR,73", "00:07,HR,77", "00:07,HR,81",  # three HR at one time: averaged
        "00:07,Temp,35.1", "01:37,NIDiasABP,-5", "01:37,,3.1",  # negative value kept; empty name skipped
        "25:00,Weight,80.5", "48:00,Urine,900",
    )
    earlier = _record(100001, "00:30,pH,7.4", "23:59,MechVent,1")
    return _archive(tmp_path / "set-a.tar.gz", {"200001.txt": later, "100001.txt": earlier})


def test_parse_rules_on_two_records(two_records):
    obs = parse_physionet_archives([two_records])
    assert list(obs.series_ids) == [100001, 200001]  # ordered by RecordID, not archive order
    assert obs.variables == PHYSIONET2012_VARIABLES and len(obs.variables) == 41
    assert obs.time_unit is None and obs.origins is None
    s = obs.series(1)
    table = pd.DataFrame({"t": s.time, "v": [obs.variables[i] for i in s.variable], "x": s.value})
    hr = table[table.v == "HR"]
    assert len(hr) == 1 and hr.x.iloc[0] == pytest.approx((73 + 77 + 81) / 3, rel=1e-12)
    assert hr.t.iloc[0] == pytest.approx(7 / 60, rel=1e-12)
    assert table[table.v == "NIDiasABP"].x.tolist() == [-5.0]
    assert table[table.v == "Weight"].x.tolist() == [-1.0, 80.5]  # the unknown descriptor kept
    assert table[table.v == "Urine"].t.tolist() == [48.0]
    assert "RecordID" not in set(table.v)
    counts = obs.read_counts
    assert counts["records"] == 2 and counts["lines"] == 2 * 6 + 8 + 2
    assert counts["record_id_lines"] == 2 and counts["empty_parameter_lines_skipped"] == 1
    assert counts["duplicates_merged"] == 2 and counts["negative_values_kept"] == 1
    assert counts["unknown_descriptors_kept"] == 4  # Height and Weight of both
    assert counts["observations"] == counts["lines"] - 2 - 1 - 2 == obs.n_observations


def test_unknown_descriptors_can_be_dropped(two_records):
    kept = parse_physionet_archives([two_records])
    dropped = parse_physionet_archives([two_records], unknown_descriptors="drop")
    assert dropped.n_observations == kept.n_observations - 4
    assert dropped.read_counts["unknown_descriptors_dropped"] == 4
    weight = PHYSIONET2012_VARIABLES.index("Weight")
    assert dropped.series(1).value[dropped.series(1).variable == weight].tolist() == [80.5]
    assert not np.any((dropped.value == -1) & (dropped.variable <= 4))


def test_max_series_stops_early(tmp_path):
    records = {f"{100 + k}.txt": _record(100 + k, "01:00,HR,70") for k in range(5)}
    path = _archive(tmp_path / "set-a.tar.gz", records)
    assert list(parse_physionet_archives([path], max_series=3).series_ids) == [100, 101, 102]


def test_crlf_and_blank_lines_are_handled(tmp_path):
    text = _record(7, "01:00,HR,70", "", "02:00,HR,71").replace("\n", "\r\n")
    obs = parse_physionet_archives([_archive(tmp_path / "x.tar.gz", {"7.txt": text})])
    assert obs.read_counts["blank_lines_skipped"] == 1 and obs.n_observations == 5 + 2


@pytest.mark.parametrize(
    "lines, phrases",
    [
        (["01:00,HeartRate,70"], ["unknown parameter name(s)", "'HeartRate'", "set-a.tar.gz:set-a/7.txt line 8"]),
        (["01:00,HR,abc"], ["value 'abc' of 'HR' is not a number", "set-a/7.txt line 8"]),
        (["01:00,HR,"], ["value '' of 'HR' is not a number"]),
        (["-00:30,HR,70"], ["negative time", "line 8"]),
        (["01:75,HR,70"], ["01:75 is not HH:MM with minutes 0-59"]),
        (["0130,HR,70"], ["is not HH:MM"]),
        (["01:00,HR,70,1"], ["does not have the 3 fields"]),
    ],
)
def test_malformed_lines_name_archive_member_and_line(tmp_path, lines, phrases):
    path = _archive(tmp_path / "set-a.tar.gz", {"7.txt": _record(7, *lines)})
    with pytest.raises(DataError) as info:
        parse_physionet_archives([path])
    for phrase in phrases:
        assert phrase in str(info.value), f"{phrase!r} not in {str(info.value)!r}"


@pytest.mark.parametrize(
    "records, phrase",
    [
        ({"7.txt": HEADER + "00:00,Age,54\n"}, "has 0 RecordID lines"),
        ({"7.txt": _record(7, "00:00,RecordID,7")}, "has 2 RecordID lines"),
        ({"7.txt": _record(8)}, "says RecordID 8, but its file name says 7"),
        ({"7.txt": "Time;Parameter;Value\n00:00;RecordID;7\n"}, "does not start with the header"),
    ],
)
def test_malformed_records(tmp_path, records, phrase):
    with pytest.raises(DataError, match=phrase):
        parse_physionet_archives([_archive(tmp_path / "set-a.tar.gz", records)])


def test_repeated_record_ids_across_archives(tmp_path):
    a = _archive(tmp_path / "set-a.tar.gz", {"7.txt": _record(7)})
    b = _archive(tmp_path / "set-b.tar.gz", {"7.txt": _record(7)}, folder="set-b")
    with pytest.raises(DataError, match="RecordID 7 occurs in several records"):
        parse_physionet_archives([a, b])


def test_bad_options(two_records):
    with pytest.raises(DataError, match="`unknown_descriptors` must be one of"):
        parse_physionet_archives([two_records], unknown_descriptors="impute")
    with pytest.raises(DataError, match="max_series must be a positive integer"):
        parse_physionet_archives([two_records], max_series=0)
    with pytest.raises(DataFileNotFoundError, match="PhysioNet archive not found"):
        parse_physionet_archives([two_records.parent / "absent.tar.gz"])


# -- corrupt archives and the cache ------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncate", "corrupt"])
def test_damaged_archive_is_an_error_and_nothing_is_cached(tmp_path, damage):
    source = _real_archives()[0]
    data = bytearray(source.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
    broken = tmp_path / "set-a.tar.gz"
    broken.write_bytes(bytes(data))
    cache = tmp_path / "cache"
    with pytest.raises(DataError) as info:
        load_physionet2012([broken], cache_folder=cache)
    assert str(broken) in str(info.value) and "truncated or corrupt" in str(info.value)
    assert _files(cache) == []


def test_cache_is_reused_keyed_by_content_and_options(two_records, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = load_physionet2012([two_records], cache_folder=cache)
    assert len(_files(cache)) == 1 and _files(cache)[0].startswith("parsed-") and _files(cache)[0].endswith(".npz")

    def no_parse(*args, **kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr(physionet_module, "parse_physionet_archives", no_parse)
    again = load_physionet2012([two_records], cache_folder=cache)
    np.testing.assert_array_equal(again.value, first.value)
    np.testing.assert_array_equal(again.time, first.time)
    assert list(again.series_ids) == list(first.series_ids) and again.read_counts == first.read_counts
    monkeypatch.undo()
    load_physionet2012([two_records], cache_folder=cache, unknown_descriptors="drop")  # another key
    assert len(_files(cache)) == 2
    _archive(two_records, {"5.txt": _record(5, "03:00,HR,90")})  # other contents: parsed again
    assert list(load_physionet2012([two_records], cache_folder=cache).series_ids) == [5]
    assert len(_files(cache)) == 3


def test_unreadable_cache_file_is_parsed_again(two_records, tmp_path):
    cache = tmp_path / "cache"
    load_physionet2012([two_records], cache_folder=cache)
    (cached,) = cache.iterdir()
    cached.write_bytes(b"not a zip file")
    with pytest.warns(UserWarning, match="parsing the archives again"):
        obs = load_physionet2012([two_records], cache_folder=cache)
    assert obs.n_observations > 0 and cached.stat().st_size > 100  # replaced by a good file


# -- the registry entry ------------------------------------------------------------------------------------
def test_registered_files_have_the_registered_sha256():
    paths = _real_archives()
    spec = registry.get_spec("physionet2012")
    assert [f.filename for f in spec.files] == ["set-a.tar.gz", "set-b.tar.gz", "set-c.tar.gz"]
    assert all(f.url.startswith("https://physionet.org/files/challenge-2012/1.0.0/") for f in spec.files)
    assert all(f.download_sha256 is None for f in spec.files)  # PhysioNet's own bytes are unknown here
    for file, path in zip(spec.files, paths):
        assert sha256_of(path) == file.sha256
    assert registry.resolve("PhysioNet") == tuple(paths)  # the sub-folder of TSATTN_DATA_DIR
    assert spec.n_variables == 41 and spec.variables == PHYSIONET2012_VARIABLES
    assert "physionet2012" not in registry.list_datasets() and "physionet2012" in registry.list_datasets("all")
    assert not registry.is_registered("physionet2012", "series") and registry.is_registered("physionet2012", "observations")


@pytest.fixture
def toy_observation_dataset(tmp_path, monkeypatch):
    """A registered observation dataset of two small archives served from file:// URLs."""
    server = tmp_path / "server"
    server.mkdir()
    a = _archive(server / "set-a.tar.gz", {"7.txt": _record(7, "30:00,HR,70")})
    b = _archive(server / "set-b.tar.gz", {"9.txt": _record(9, "30:00,HR,75")}, folder="set-b")
    real = registry.get_spec("physionet2012")
    spec = dataclasses.replace(
        real, name="toyobs", files=tuple(registry.RemoteFile(p.name, p.as_uri(), None, None) for p in (a, b)),
        subdir="toyobs", cache_subdir="toyobs", n_series=2, aliases=(),
    )
    monkeypatch.setitem(registry.REGISTRY, "toyobs", spec)
    data_dir, cache = tmp_path / "data", tmp_path / "cache"
    data_dir.mkdir()
    monkeypatch.setenv("TSATTN_DATA_DIR", str(data_dir))
    monkeypatch.setenv("TSATTN_CACHE_DIR", str(cache))
    return spec, data_dir, cache, (a, b)


def test_absent_files_offline_and_download(toy_observation_dataset, monkeypatch):
    spec, data_dir, cache, (a, b) = toy_observation_dataset
    with pytest.raises(DataFileNotFoundError, match="2 of 2 files absent") as info:
        registry.resolve("toyobs")
    assert "set-a.tar.gz, set-b.tar.gz" in str(info.value) and "fetch toyobs" in str(info.value)
    with pytest.raises(DownloadError, match="downloads are off"):
        registry.fetch("toyobs")  # TSATTN_OFFLINE=1 from the autouse fixture
    assert _files(cache) == []
    (data_dir / "set-a.tar.gz").write_bytes(a.read_bytes())  # one file directly in TSATTN_DATA_DIR
    monkeypatch.setenv("TSATTN_OFFLINE", "0")
    with pytest.warns(UserWarning, match="not verified; its sha256 is " + sha256_of(b)):
        paths = registry.fetch("toyobs")
    assert paths == (data_dir / "set-a.tar.gz", cache / "toyobs" / "set-b.tar.gz")
    assert _files(cache) == ["set-b.tar.gz"]  # no temporary file left
    assert registry.fetch("toyobs") == paths  # found locally the second time


def test_local_file_with_other_bytes_is_used_with_a_warning(toy_observation_dataset, monkeypatch):
    spec, data_dir, cache, (a, b) = toy_observation_dataset
    pinned = dataclasses.replace(spec, files=tuple(registry.RemoteFile(f.filename, f.url, "0" * 64, None)
                                                   for f in spec.files))
    monkeypatch.setitem(registry.REGISTRY, "toyobs", pinned)
    for path in (a, b):
        (data_dir / "toyobs").mkdir(exist_ok=True)
        (data_dir / "toyobs" / path.name).write_bytes(path.read_bytes())
    with pytest.warns(UserWarning, match="not the registered 0000"):
        assert registry.resolve("toyobs")[0] == data_dir / "toyobs" / "set-a.tar.gz"


def test_command_line(toy_observation_dataset, monkeypatch, capsys):
    spec, data_dir, cache, _ = toy_observation_dataset
    assert cli_main(["where", "toyobs"]) == 1 and "not available locally" in capsys.readouterr().err
    monkeypatch.setenv("TSATTN_OFFLINE", "0")
    with pytest.warns(UserWarning, match="not verified"):
        assert cli_main(["fetch", "toyobs"]) == 0
    out = capsys.readouterr().out.split()
    assert out == [str(cache / "toyobs" / "set-a.tar.gz"), str(cache / "toyobs" / "set-b.tar.gz")]
    assert cli_main(["list"]) == 0
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("toyobs"))
    assert "41 var" in line and "2 of 2 files" in line


def test_data_module_setup_never_downloads_prepare_data_does(toy_observation_dataset, monkeypatch):
    spec, data_dir, cache, _ = toy_observation_dataset
    monkeypatch.setenv("TSATTN_OFFLINE", "0")
    dm = ObservationDataModule("toyobs", split_fractions=(0.5, 0.0, 0.5), scale_from="train", variables=["Age", "HR"])
    with pytest.raises(DataFileNotFoundError, match="not available locally"):
        dm.setup()
    assert _files(cache) == []
    with pytest.warns(UserWarning, match="not verified"):
        dm.prepare_data()
    dm.setup()
    assert [len(dm.train_dataset), len(dm.val_dataset), len(dm.test_dataset)] == [1, 0, 1]
    assert dm.origins == [24.0] and dm.scaler.kind == "minmax"  # the registry's protocol


def test_registered_name_with_a_few_hundred_stays():
    _real_archives()
    dm = ObservationDataModule("physionet2012", max_series=300)
    dm.setup()
    assert len(dm.observations) == 300 and dm.n_variables == 41
    assert [len(dm.train_dataset), len(dm.val_dataset), len(dm.test_dataset)] == [180, 60, 60]
    assert (dm.split, dm.split_fractions, dm.scaler_kind, dm.scale_from) == ("series", (0.6, 0.2, 0.2), "minmax", "seen")
    batch = next(iter(dm.val_dataloader()))
    assert (batch["x_time"][batch["x_mask"]] < 0).all() and (batch["x_time"][batch["x_mask"]] >= -24).all()
    assert (batch["y_time"][batch["y_mask"]] >= 0).all() and (batch["origin"] == 24.0).all()
    with pytest.raises(DataError, match="reader_options=.* apply to a registered dataset's format reader"):
        ObservationDataModule(dm.observations, origins=[24.0], reader_options={"unknown_descriptors": "drop"})


# -- the full benchmark (parsed once per session) -----------------------------------------------------------
@pytest.fixture(scope="module")
def physionet(tmp_path_factory):
    """All 12,000 stays, parsed once into a session cache folder."""
    return load_physionet2012(_real_archives(), cache_folder=tmp_path_factory.mktemp("physionet-cache"))


@pytest.fixture(scope="module")
def reference_table():
    """The raw archives read independently: one row per unique (id, time, variable), duplicates averaged.

    Ids come from the file names, times from the "HH:MM" text as hours + minutes / 60 (each distinct
    time string parsed once), the variables' order from PHYSIONET2012_VARIABLES.
    """
    parts = []
    for path in _real_archives():
        with tarfile.open(path, "r:gz") as tar:
            for member in tar.getmembers():
                if not member.name.endswith(".txt"):
                    continue
                rid = member.name.rsplit("/", 1)[-1][: -len(".txt")]
                body = tar.extractfile(member).read().decode().split("\n", 1)[1].rstrip("\n")
                parts.append(f"{rid}," + body.replace("\n", f"\n{rid},") + "\n")
    raw = pd.read_csv(io.StringIO("".join(parts)), names=["id", "time", "variable", "value"],
                      dtype={"time": "category", "variable": str}, keep_default_na=False)
    raw = raw[raw["variable"].isin(PHYSIONET2012_VARIABLES)]
    hours = np.array([int(h) + int(m) / 60.0 for h, m in (t.split(":") for t in raw["time"].cat.categories)])
    raw = raw.assign(
        time=hours[raw["time"].cat.codes.to_numpy()],
        variable=raw["variable"].map({name: k for k, name in enumerate(PHYSIONET2012_VARIABLES)}).astype(np.int64),
    )
    return raw.groupby(["id", "time", "variable"], sort=True)["value"].mean().reset_index()


def test_full_parse_counts(physionet):
    assert len(physionet) == 12000 and physionet.variables == PHYSIONET2012_VARIABLES
    assert physionet.read_counts == {
        "records": 12000, "lines": 5285818, "record_id_lines": 12000, "empty_parameter_lines_skipped": 2403,
        "blank_lines_skipped": 0, "other_archive_members_skipped": 0, "unknown_descriptors_kept": 6739,
        "negative_values_kept": 283, "observations_after_48h": 0, "duplicates_merged": 11792,
        "observations": 5259623,
    }
    assert physionet.n_observations == 5285818 - 12000 - 2403 - 11792
    lengths = physionet.series_lengths
    assert lengths.min() >= 5 and np.all(physionet.time >= 0) and physionet.time.max() == 48.0


def test_full_parse_equals_an_independent_reading(physionet, reference_table):
    ref = reference_table
    assert len(ref) == physionet.n_observations
    np.testing.assert_array_equal(ref["id"].to_numpy(), physionet.series_ids[physionet.series_index])
    np.testing.assert_array_equal(ref["variable"].to_numpy(), physionet.variable)
    np.testing.assert_allclose(ref["time"].to_numpy(), physionet.time, rtol=1e-12, atol=0)
    np.testing.assert_allclose(ref["value"].to_numpy(), physionet.value, rtol=1e-12, atol=1e-12)


def test_full_protocol_counts_and_scaler(physionet, reference_table):
    dm = ObservationDataModule(physionet, **registry.get_spec("physionet2012").protocol)
    dm.setup()
    counts = dm.sample_counts()
    assert counts["samples"].tolist() == [7200, 2400, 2400] and counts["series"].tolist() == [7200, 2400, 2400]

    ref = reference_table
    ids = np.sort(ref["id"].unique())
    seen, test = train_test_split(ids, train_size=0.8, random_state=42, shuffle=True)
    train, val = train_test_split(seen, train_size=0.75, shuffle=False)
    for name, part in (("train", train), ("val", val), ("test", test)):
        rows = ref[ref["id"].isin(part)]
        assert counts.loc[name, "history_observations"] == int((rows["time"] < 24).sum())
        assert counts.loc[name, "target_observations"] == int((rows["time"] >= 24).sum())
        assert set(physionet.series_ids[dm.split_series(name)]) == set(part)
        targets = rows.loc[rows["time"] >= 24, "variable"].to_numpy().astype(np.int64)
        np.testing.assert_array_equal(dm.target_counts(name), np.bincount(targets, minlength=dm.n_variables))
    assert counts.loc["train", "history_observations"] == 1755053 and counts.loc["test", "target_observations"] == 462494

    seen_rows = ref[ref["id"].isin(seen)]  # min-max over train + val stays, never test
    lo = seen_rows.groupby("variable")["value"].min().reindex(range(41)).to_numpy()
    hi = seen_rows.groupby("variable")["value"].max().reindex(range(41)).to_numpy()
    np.testing.assert_array_equal(dm.scaler.offset, lo)
    np.testing.assert_allclose(dm.scaler.scale, np.where(hi > lo, hi - lo, 1.0), rtol=1e-12)
