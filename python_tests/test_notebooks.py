"""Every notebook in examples/notebooks/ runs top to bottom without errors, and the
snippets of the core docs page run as written.

Notebooks run with nbclient in a ``python3`` kernel (ipykernel); jupyter_client starts a
kernelspec whose command is plain ``python`` with this interpreter, so no kernel has to be
installed. The kernel starts in the repository root with the repository on PYTHONPATH.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "examples" / "notebooks").glob("*.ipynb"))
CORE_DOC = ROOT / "docs" / "tensors_autograd_devices.md"
TIMEOUT_S = 120


def _kernel_env(monkeypatch):
    """The kernel inherits this environment: repository importable, no virtual GPU leaking in."""
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + (os.pathsep + path if path else ""))
    monkeypatch.delenv("MINITORCH_DIST_VIRTUAL_GPU", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")


def test_notebooks_are_present():
    assert any(p.name.startswith("01_") for p in NOTEBOOKS), "notebook 01 is missing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch, tmp_path):
    """The notebook runs top to bottom and, once its kernel has stopped, has left nothing in
    its temporary folder (04 and 06 used ``mkdtemp`` and left a folder on every run)."""
    nbformat = pytest.importorskip("nbformat", reason="nbformat is needed to read notebooks "
                                                      "(pip install minitorch_dist[dev])")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is needed to run notebooks "
                                                      "(pip install minitorch_dist[dev])")
    pytest.importorskip("ipykernel", reason="ipykernel provides the python3 kernel "
                                            "(pip install minitorch_dist[dev])")
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    try:
        KernelSpecManager().get_kernel_spec("python3")
    except NoSuchKernel:
        pytest.skip("no 'python3' Jupyter kernel: run `python -m ipykernel install --sys-prefix`")

    _kernel_env(monkeypatch)
    temp = tmp_path / "tmpdir"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))         # the kernel's temporary folder
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs"), f"{path.name}: commit notebooks with outputs cleared"
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=TIMEOUT_S,
                                     resources={"metadata": {"path": str(ROOT)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as err:
        pytest.fail(f"{path.name} failed:\n{err}")
    left = sorted(p.name for p in temp.iterdir())
    assert left == [], f"{path.name} left {left} in its temporary folder"


def test_core_doc_snippets_run():
    """The python blocks of docs/tensors_autograd_devices.md, run in order in one process."""
    blocks = re.findall(r"```python\n(.*?)```", CORE_DOC.read_text(), re.S)
    assert len(blocks) > 10
    env = {k: v for k, v in os.environ.items() if k != "MINITORCH_DIST_VIRTUAL_GPU"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    # spot checks of what the page promises
    assert "[5.0, 7.0, 9.0]" in out                       # autograd example
    assert "'host_to_device': 216, 'device_to_host': 216" in out   # placement example
    assert ("primitive target does not match backend: GPU, primitive_target: CPU, node name: "
            "layer1.add (Add)") in result.stderr                 # the seed-000 log line, once
    assert result.stderr.count("does not match backend") == 1
    assert "CPU RowTensor" in out and "'host_to_device': 192, 'device_to_host': 192" in out
    assert "needs 31.2 KiB (32000 bytes)" in out               # the virtual GPU's capacity
    assert "[42.0, 1.0, 2.0, 3.0]" in out                 # dlpack example
