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

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread_everywhere():
    """One intra-op thread for the whole session, module- and session-scoped fixtures included
    (they are set up before function-scoped fixtures). fp32 results depend on the thread count
    (it changes how reductions are split), so a model a fixture fits and one a test fits must see
    the same count to be comparable. Restored at the end."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _one_torch_thread(_one_torch_thread_everywhere):
    """Tests use tiny tensors: one intra-op thread beats two contending ones (and a test that
    changes the count does not leak it into the next)."""
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(1)


def _synthetic_frame(rows: int = 900, seed: int = 0) -> pd.DataFrame:
    """Hourly series with daily cycles: load, temp and OT (the default target)."""
    rng = np.random.default_rng(seed)
    t = np.arange(rows)
    return pd.DataFrame({
        "date": pd.date_range("2021-01-01", periods=rows, freq="h"),
        "load": 10 + 3 * np.sin(2 * np.pi * t / 24) + 0.3 * rng.standard_normal(rows),
        "temp": 5 + np.cos(2 * np.pi * t / 48) + 0.2 * rng.standard_normal(rows),
        "OT": 50 + 8 * np.sin(2 * np.pi * t / 24 + 1.0) + 0.5 * rng.standard_normal(rows),
    })


@pytest.fixture(scope="session")
def make_frame():
    """The synthetic-series factory: make_frame(rows=900, seed=0) -> DataFrame."""
    return _synthetic_frame


@pytest.fixture
def frame() -> pd.DataFrame:
    return _synthetic_frame()


@pytest.fixture(scope="session")
def benchmark_script():
    """``benchmark_script("run_protocol")``: the module of ``benchmarks/<name>.py``, loaded from its file."""
    import importlib.util

    def load(name: str):
        path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
