"""Files on this machine: the data folder, the user cache, checksums and atomic downloads.

- ``data_dir()``: the folder named by ``TSATTN_DATA_DIR`` (None when unset);
- ``cache_dir()``: ``TSATTN_CACHE_DIR``, else ``$XDG_CACHE_HOME/tsattn``, else ``~/.cache/tsattn``;
- ``offline()``: ``TSATTN_OFFLINE=1`` forbids downloads;
- ``download(url, dest, sha256)``: stream into a temporary file beside ``dest``, check the sha256,
  then rename; on any failure nothing is left behind.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Optional, Union

from .errors import ChecksumError, DownloadError

__all__ = ["cache_dir", "data_dir", "download", "offline", "sha256_of"]


def _truthy(value: Optional[str]) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def offline() -> bool:
    """Whether downloads are forbidden (``TSATTN_OFFLINE=1``)."""
    return _truthy(os.environ.get("TSATTN_OFFLINE"))


def data_dir() -> Optional[Path]:
    """The folder named by ``TSATTN_DATA_DIR``, or None when unset."""
    value = os.environ.get("TSATTN_DATA_DIR")
    return Path(value).expanduser() if value else None


def cache_dir() -> Path:
    """The user cache (``tsattn.user_cache.cache_dir``, shared with the op's CPU kernel build)."""
    from ..user_cache import cache_dir as user_cache_dir

    return user_cache_dir()


_SHA_MEMO: dict[tuple[str, int, int], str] = {}


def sha256_of(path: Union[str, os.PathLike]) -> str:
    """The sha256 hex digest of a file (remembered per path, size and modification time)."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHA_MEMO:
        digest = hashlib.sha256()
        with path.open("rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
        _SHA_MEMO[key] = digest.hexdigest()
    return _SHA_MEMO[key]


def download(
    url: str,
    dest: Union[str, os.PathLike],
    sha256: Optional[str] = None,
    *,
    timeout: float = 60.0,
    opener: Callable[..., Any] = urllib.request.urlopen,
) -> Path:
    """Download ``url`` to ``dest`` atomically: stream into a temporary file in ``dest``'s folder,
    check ``sha256`` (when given), then rename. On any failure nothing is left behind.

    Raises:
        ChecksumError: the bytes' sha256 differs from ``sha256``.
        DownloadError: the download failed.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            try:
                with opener(url, timeout=timeout) as response:
                    for chunk in iter(lambda: response.read(1 << 20), b""):
                        out.write(chunk)
                        digest.update(chunk)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise DownloadError(
                    f"download of {url} failed ({exc}); check the network, or download the file yourself "
                    f"and put it at {str(dest)!r}"
                ) from None
        actual = digest.hexdigest()
        if sha256 is not None and actual != sha256.lower():
            raise ChecksumError(
                f"checksum mismatch for {url}: sha256 {actual}, expected {sha256}; the file was not kept. "
                "The server may hold a different version: get the registered file (see datasets/README.md), "
                "or pass the CSV path directly to use another version"
            )
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest
