"""Where tsattn keeps files it downloads or builds: the user cache folder.

A module of its own (no imports beyond the standard library) so that the op, which builds its CPU
kernel there, does not pull in the data layer; ``tsattn.data.registry.cache_dir`` is this function.
"""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The user cache: ``TSATTN_CACHE_DIR``, else ``$XDG_CACHE_HOME/tsattn``, else ``~/.cache/tsattn``."""
    value = os.environ.get("TSATTN_CACHE_DIR")
    if value:
        return Path(value).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tsattn"
