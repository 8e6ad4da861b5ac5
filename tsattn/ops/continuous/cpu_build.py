"""Build, cache and load the fused CPU kernel (``cpu_kernel.cpp``) at first use.

The source ships with the package and is compiled by the system C++ compiler (``$CXX``, else
``c++``, ``g++`` or ``clang++``: the compiler ``torch.compile``'s CPU backend uses too), without
torch headers or OpenMP, into a shared library loaded with ctypes. The library lands in the user
cache (``TSATTN_CACHE_DIR``, else ``$XDG_CACHE_HOME/tsattn`` or ``~/.cache/tsattn``), under
``kernels/`` with a name keyed by a hash of the source, the compiler and its version, the flags and
the CPU (model and feature flags: ``-march=native`` code only runs where it was built), so a
changed source, compiler or machine builds anew and an unchanged one loads in milliseconds.

The compiler writes to a temporary file beside the target, which is then renamed into place
(atomic on POSIX): processes building at the same time (pytest-xdist workers, DDP ranks) each
write their own temporary file and never see a half-written library.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

SOURCE = Path(__file__).with_name("cpu_kernel.cpp")
# IEEE semantics kept (no -ffast-math): the kernel's exp handles inf, NaN and underflow itself.
FLAGS = ("-std=c++17", "-O3", "-march=native", "-ffp-contract=fast", "-fno-exceptions", "-fno-rtti",
         "-shared", "-fPIC")
BUILD_TIMEOUT_S = 120
_COMPILERS = ("c++", "g++", "clang++")


class KernelBuildError(RuntimeError):
    """The kernel could not be compiled or loaded (the message says why)."""


@dataclass(frozen=True)
class Compiler:
    command: tuple[str, ...]   # the executable's path, then any arguments given with it in $CXX
    version: str


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout)


def find_compiler() -> Compiler:
    """The C++ compiler named by ``$CXX`` (e.g. "g++" or "ccache g++"), else the first of c++, g++,
    clang++ on PATH."""
    candidates = [shlex.split(os.environ["CXX"])] if os.environ.get("CXX", "").strip() else [[c] for c in _COMPILERS]
    for words in candidates:
        path = shutil.which(words[0])
        if path is None:
            continue
        command = (path, *words[1:])
        try:
            out = _run([*command, "--version"], timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0:
            return Compiler(command, out.stdout.strip())
    tried = ", ".join(" ".join(words) for words in candidates)
    raise KernelBuildError(f"no C++ compiler found (tried {tried}); install one (e.g. g++) or set CXX to its path")


def cpu_signature() -> str:
    """The CPU model and feature flags (``-march=native`` code is only valid on a CPU like this)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    keep = []
    for line in text.splitlines():
        key = line.split(":", 1)[0].strip()
        if key in ("model name", "flags", "Features", "CPU implementer", "CPU part") and line not in keep:
            keep.append(line)
    return "\n".join(keep) or f"{platform.machine()} {platform.processor()}"


def library_path(cache: Path, compiler: Compiler, source: bytes, extra_flags: tuple[str, ...] = ()) -> Path:
    """``cache/kernels/tsattn_cpu_<hash>.so``, the hash over source, compiler, flags and CPU."""
    key = hashlib.sha256()
    for part in (source, " ".join(compiler.command).encode(), compiler.version.encode(),
                 " ".join(FLAGS + tuple(extra_flags)).encode(),
                 cpu_signature().encode()):
        key.update(part)
        key.update(b"\0")
    return cache / "kernels" / f"tsattn_cpu_{key.hexdigest()[:20]}.so"


def compile_library(compiler: Compiler, source: Path, target: Path, extra_flags: tuple[str, ...] = ()) -> None:
    """Compile ``source`` into ``target`` through a temporary file renamed into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.stem + ".", suffix=".tmp.so", dir=target.parent)
    os.close(fd)
    try:
        cmd = [*compiler.command, *FLAGS, *extra_flags, "-o", tmp, str(source)]
        try:
            out = _run(cmd, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise KernelBuildError(f"`{' '.join(cmd)}` did not finish within {BUILD_TIMEOUT_S} s") from None
        if out.returncode != 0:
            tail = (out.stderr or out.stdout).strip()[-2000:]
            raise KernelBuildError(f"`{' '.join(cmd)}` failed (exit {out.returncode}):\n{tail}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def build(cache: Path, source: Path = SOURCE, compiler: Optional[Compiler] = None,
          extra_flags: tuple[str, ...] = ()) -> Path:
    """The path of the compiled kernel for this source, compiler and CPU; compiled if not cached.
    ``extra_flags`` are added to ``FLAGS`` (tests: ``-DVECTOR_BYTES=16`` builds another vector width)."""
    compiler = compiler or find_compiler()
    extra_flags = tuple(extra_flags)
    target = library_path(cache, compiler, source.read_bytes(), extra_flags)
    if not target.is_file():
        compile_library(compiler, source, target, extra_flags)
    return target


def load(path: Path) -> ctypes.CDLL:
    """Load the library (ctypes.CDLL releases the GIL during every call into it)."""
    try:
        return ctypes.CDLL(str(path))
    except OSError as exc:
        raise KernelBuildError(f"could not load {path}: {exc}; delete it to rebuild") from None
