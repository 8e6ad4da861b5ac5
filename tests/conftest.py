"""Test-wide environment: Triton's CPU interpreter, a scratch matplotlib config, the data folder."""
import os
import pathlib
import tempfile

# Triton kernels run on CPU only under the interpreter, and only if this is set before `import triton`.
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="tsattn-mpl-"))
_shared = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data"
if "TSATTN_DATA_DIR" not in os.environ and _shared.is_dir():
    os.environ["TSATTN_DATA_DIR"] = str(_shared)

# Under pytest-xdist every worker is its own process: one intra-op thread each keeps 2 workers on
# 2 cores from oversubscribing (OpenMP spin-waits make oversubscribed eager code many times slower).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
