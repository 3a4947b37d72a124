"""The example notebooks: committed clean, and each runs top to bottom in QUICK mode.

Each notebook is executed with nbclient in a fresh ``python3`` kernel that runs this
interpreter (so the kernel sees the same virtual environment), with
``BAYES_LOCO_QUICK=1`` (the notebooks' shrunk sizes) and ``MPLBACKEND=Agg``. A failing
cell fails its notebook's test with the cell's source and the error. The notebooks'
``assert`` cells are the checks: each asserts the conclusions its prose draws.

The kernel gets one BLAS thread: on a shared two-core machine OpenBLAS's spinning threads
made the notebooks ten times slower whenever another process was busy. The seven together
take about 385 s in the default run on two cores (notebooks/README.md has each; ``pytest
tests/test_notebooks.py --durations=0`` shows them).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402  (after the importorskips)
from jupyter_client.manager import KernelManager  # noqa: E402

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
EXPECTED = ("01_quickstart", "02_bayesian_road", "03_ellipsoid_vs_posterior", "04_reproducing_the_paper",
            "05_personalllm", "06_your_own_data", "07_pessimism_at_width")
# Seconds any one cell may run in QUICK mode before the test fails.
CELL_TIMEOUT = 600


def _ids(paths):
    return [p.stem for p in paths]


def test_the_notebooks_are_there():
    assert tuple(p.stem for p in NOTEBOOKS) == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_committed_clean(path):
    """No outputs, null execution counts, the python3 kernel, a title, the QUICK switch and asserts."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", "kernelspec must be python3"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"cell {i} has outputs: strip them before committing"
            assert cell.execution_count is None, f"cell {i} has an execution count: strip it"
        assert "attachments" not in cell or not cell.attachments, f"cell {i} has attachments"
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# "), "the first cell must be a title"
    assert len(first.source.strip().splitlines()) >= 3, "the title cell needs a sentence on what is learnt"
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    assert any('os.environ.get("BAYES_LOCO_QUICK", "0") == "1"' in s for s in sources), \
        "the preamble must read BAYES_LOCO_QUICK"
    assert any("RNG_SEED" in s for s in sources), "the preamble must set RNG_SEED"
    assert any(line.lstrip().startswith("assert ") for s in sources for line in s.splitlines()), \
        "a notebook asserts its conclusions"
    assert not any("progressbar=True" in s for s in sources), "PyMC progress bars do not export"


def _kernel_manager(tmp_path: Path) -> KernelManager:
    """A manager whose ``python3`` kernel is this interpreter, whatever kernelspecs are installed."""
    spec = tmp_path / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (bayes_loco tests)", "language": "python"}))
    specs = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")], ensure_native_kernel=False)
    return KernelManager(kernel_name="python3", kernel_spec_manager=specs)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_runs_in_quick_mode(path, tmp_path, monkeypatch):
    """Execute every cell in QUICK mode; the notebook's own asserts check its conclusions."""
    monkeypatch.setenv("BAYES_LOCO_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # One BLAS thread: on a shared two-core machine OpenBLAS's spinning threads made the notebooks
    # ten times slower whenever another process was busy; the problems here are too small to gain.
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "1")
    for name in ("PERSONALLLM_TRAIN", "PERSONALLLM_TEST", "BAYES_LOCO_RESULTS", "BAYES_LOCO_FULL_GRID"):
        monkeypatch.delenv(name, raising=False)  # the stand-ins and reduced runs, not a user's files
    nb = nbformat.read(path, as_version=4)
    workdir = tmp_path / "run"
    workdir.mkdir()
    km = _kernel_manager(tmp_path)
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", km=km,
                                     resources={"metadata": {"path": str(workdir)}})
    start = time.perf_counter()
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"{path.name}: a cell failed in QUICK mode\n{error}", pytrace=False)
    except nbclient.exceptions.CellTimeoutError as error:
        pytest.fail(f"{path.name}: a cell ran over {CELL_TIMEOUT} s in QUICK mode\n{error}", pytrace=False)
    finally:
        # nbclient leaves the kernel of a manager it was given running: without this every notebook's
        # kernel, with its fits in memory, lived until the test process ended.
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    seconds = time.perf_counter() - start
    print(f"{path.name}: {seconds:.0f} s in QUICK mode")
