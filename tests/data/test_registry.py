"""Registry: resolution order (TSATTN_DATA_DIR, cache, download), checksums, offline mode, atomic writes.

No network: downloads use file:// URLs or a fake opener.
"""
from __future__ import annotations

import hashlib
import io
import os

import pytest

from tsattn.data import (
    ChecksumError,
    CSVDataModule,
    DataFileNotFoundError,
    DownloadError,
    registry,
)
from tsattn.data.__main__ import main as cli_main
from tsattn.data.files import download, sha256_of

CSV = "date,a,b,OT\n" + "".join(f"2021-01-{1 + h // 24:02d} {h % 24:02d}:00,{h},{2 * h},{h % 7}\n" for h in range(200))
SHA = hashlib.sha256(CSV.encode()).hexdigest()


@pytest.fixture
def env(tmp_path, monkeypatch, toy_spec):
    """A toy registered dataset served from a file:// URL; empty data dir and cache."""
    source = tmp_path / "server" / "toy.csv"
    source.parent.mkdir()
    source.write_text(CSV)
    data_dir, cache = tmp_path / "data", tmp_path / "cache"
    data_dir.mkdir()
    monkeypatch.setenv("TSATTN_DATA_DIR", str(data_dir))
    monkeypatch.setenv("TSATTN_CACHE_DIR", str(cache))
    spec = toy_spec(url=source.as_uri(), sha256=SHA)
    monkeypatch.setitem(registry.REGISTRY, "toy", spec)
    return spec, data_dir, cache, source


def _files(folder):
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_data_dir_comes_before_the_cache(env):
    spec, data_dir, cache, _ = env
    cache.mkdir()
    (cache / "toy.csv").write_text(CSV)
    assert registry.resolve("toy") == (cache / "toy.csv",)
    (data_dir / "toy.csv").write_text(CSV)
    assert registry.resolve("toy") == (data_dir / "toy.csv",)


def test_data_dir_in_time_series_library_layout(env):
    spec, data_dir, _, _ = env
    (data_dir / "toydir").mkdir()
    (data_dir / "toydir" / "toy.csv").write_text(CSV)
    assert registry.resolve("toy") == (data_dir / "toydir" / "toy.csv",)


def test_absent_without_download_says_where_to_put_the_file(env):
    spec, data_dir, cache, _ = env
    with pytest.raises(DataFileNotFoundError) as info:
        registry.resolve("toy")
    msg = str(info.value)
    assert "put toy.csv" in msg and str(data_dir) in msg and str(cache) in msg and "fetch toy" in msg


def test_offline_and_absent_is_an_error_and_writes_nothing(env):
    spec, data_dir, cache, _ = env  # TSATTN_OFFLINE=1 from the autouse fixture
    with pytest.raises(DownloadError, match="downloads are off \\(TSATTN_OFFLINE=1\\)") as info:
        registry.fetch("toy")
    assert "put toy.csv" in str(info.value)
    assert _files(cache) == [] and _files(data_dir) == []


def test_download_into_the_cache_with_checksum(env, monkeypatch):
    spec, data_dir, cache, _ = env
    monkeypatch.setenv("TSATTN_OFFLINE", "0")
    (path,) = registry.fetch("toy")
    assert path == cache / "toy.csv" and path.read_text() == CSV
    assert _files(cache) == ["toy.csv"]  # no temporary file left
    assert registry.fetch("toy") == (path,)  # found locally the second time


def test_checksum_mismatch_keeps_nothing(env, monkeypatch, toy_spec):
    spec, data_dir, cache, source = env
    monkeypatch.setenv("TSATTN_OFFLINE", "0")
    monkeypatch.setitem(registry.REGISTRY, "toy", toy_spec(url=source.as_uri(), sha256="0" * 64))
    with pytest.raises(ChecksumError, match="checksum mismatch") as info:
        registry.fetch("toy")
    assert SHA in str(info.value) and "not kept" in str(info.value)
    assert _files(cache) == []


def test_failed_download_keeps_nothing(env, monkeypatch, toy_spec):
    spec, data_dir, cache, source = env
    monkeypatch.setenv("TSATTN_OFFLINE", "0")
    monkeypatch.setitem(registry.REGISTRY, "toy", toy_spec(url="file:///no/such.csv", sha256=SHA))
    with pytest.raises(DownloadError, match="download of file:///no/such.csv failed"):
        registry.fetch("toy")
    assert _files(cache) == []


def test_interrupted_stream_keeps_no_partial_file(tmp_path):
    class Broken(io.BytesIO):
        def read(self, n=-1):
            if self.tell() > 0:
                raise ConnectionResetError("connection reset")
            return super().read(10)

    def opener(url, timeout):
        return Broken(CSV.encode())

    with pytest.raises(DownloadError, match="connection reset"):
        download("https://example.invalid/toy.csv", tmp_path / "toy.csv", SHA, opener=opener)
    assert _files(tmp_path) == []
    download("https://example.invalid/toy.csv", tmp_path / "ok.csv", SHA,
                      opener=lambda url, timeout: io.BytesIO(CSV.encode()))
    assert _files(tmp_path) == ["ok.csv"]


def test_unknown_sha256_downloads_with_a_warning(env, monkeypatch, toy_spec):
    spec, _, cache, source = env
    monkeypatch.setenv("TSATTN_OFFLINE", "0")
    monkeypatch.setitem(registry.REGISTRY, "toy", toy_spec(url=source.as_uri()))
    with pytest.warns(UserWarning, match=f"no sha256 is registered.*{SHA}"):
        registry.fetch("toy")
    assert _files(cache) == ["toy.csv"]


def test_local_file_with_other_bytes_is_used_with_a_warning(env):
    spec, data_dir, _, _ = env
    (data_dir / "toy.csv").write_text(CSV.replace("\n", "\r\n"))
    with pytest.warns(UserWarning, match="not the registered"):
        assert registry.resolve("toy") == (data_dir / "toy.csv",)


def test_setup_never_downloads_prepare_data_does(env, monkeypatch):
    spec, _, cache, _ = env
    monkeypatch.setenv("TSATTN_OFFLINE", "0")
    dm = CSVDataModule("toy", 8, 4)
    with pytest.raises(DataFileNotFoundError, match="not available locally"):
        dm.setup()
    assert _files(cache) == []
    dm.prepare_data()
    dm.setup()
    assert _files(cache) == ["toy.csv"] and len(dm.test_dataset) == 40 - 4 + 1


def test_real_benchmark_files_match_their_registered_sha256(real_file):
    for name in ("ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather"):
        spec = registry.get_spec(name)
        (file,) = spec.files
        path = real_file(file.filename)
        assert sha256_of(path) == file.sha256
        assert registry.resolve(name) == (path,)


def test_every_spec_is_complete():
    for name in registry.list_datasets():
        spec = registry.get_spec(name)
        (file,) = spec.files
        assert spec.kind == "series" and file.filename.endswith(".csv") and file.url.startswith("https://")
        assert spec.split in ("ett-hour", "ett-minute", "ratio") and spec.target == "OT"
        assert file.sha256 is None or len(file.sha256) == 64


def test_command_line(env, monkeypatch, capsys):
    spec, data_dir, cache, _ = env
    assert cli_main(["where", "toy"]) == 1
    assert "not available locally" in capsys.readouterr().err
    monkeypatch.setenv("TSATTN_OFFLINE", "0")
    assert cli_main(["fetch", "toy"]) == 0
    assert capsys.readouterr().out.strip() == str(cache / "toy.csv")
    assert cli_main(["list"]) == 0 and "toy" in capsys.readouterr().out
    assert cli_main(["where", "nope"]) == 1 and "unknown dataset" in capsys.readouterr().err
    assert os.listdir(cache) == ["toy.csv"]


def test_failed_download_names_the_folders_to_copy_the_file_into(env, monkeypatch, toy_spec):
    spec, data_dir, cache, source = env
    monkeypatch.setitem(registry.REGISTRY, "toy", toy_spec(url=source.as_uri() + ".gone", sha256=SHA))
    with pytest.raises(DownloadError, match="TSATTN_DATA_DIR") as info:
        registry.fetch("toy")
    assert str(cache) in str(info.value) and "failed" in str(info.value)
    assert _files(cache) == [] and _files(data_dir) == []
