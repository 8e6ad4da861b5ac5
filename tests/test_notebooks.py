"""Notebooks run top to bottom (in their quick mode) without errors."""
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("TSATTN_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    if path.stem == "01_quickstart":  # it saves the continuous model and reloads it
        assert (tmp_path / "notebook_runs" / "continuous.ckpt").is_file()


# Stored executed, so that someone who only reads them sees the data, the forecasts, the intervals and
# the backtests.
STORED_EXECUTED = {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebooks_are_stored_as_intended(path):
    nb = nbformat.read(path, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if path.stem not in STORED_EXECUTED:
        assert all(not cell.get("outputs") for cell in code), path.name
        return
    assert all(cell.get("execution_count") for cell in code), "run every cell before storing it"
    outputs = [o for cell in code for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    # logs and warnings (progress banners, this machine's paths) are not what a reader should see
    assert not [o for o in outputs if o.get("name") == "stderr"], "store it without its stderr streams"
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(figures) >= 2, "the stored notebook shows its plots"
