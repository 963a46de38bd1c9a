"""Issue 17 items 7 and 12: inputs that used to be accepted silently are clear errors (or
documented behaviour), optional-dependency benchmarks skip with a one-line reason, and the
package metadata is in the current format."""
import os
import subprocess
import sys

import pytest

from mpi_jobs import REPO, child_env

HIDE_TORCH = '''import sys
class _HideTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        return None
sys.meta_path.insert(0, _HideTorch())
'''


def test_bench_host_device_without_torch_says_why_in_one_line(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(HIDE_TORCH)
    env = child_env({"PYTHONPATH": os.pathsep.join([str(tmp_path), REPO])})
    done = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "bench_host_device.py"),
                           "--rows", "100"], env=env, capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines() == [
        "bench_host_device: skipped: it compares against PyTorch, which is not installed "
        "(pip install torch; the CPU build is enough)"]
    assert "Traceback" not in done.stderr


def test_license_metadata_is_an_spdx_expression():
    try:
        import tomllib
    except ImportError:                      # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)
    assert project["project"]["license"] == "MIT"
    requires = project["build-system"]["requires"]
    assert any(r.startswith("setuptools>=") and int(r.split(">=")[1].split(".")[0]) >= 77
               for r in requires)


def test_readme_test_command_does_not_reinstall():
    with open(os.path.join(REPO, "README.md")) as handle:
        text = handle.read()
    assert "```bash\npython -m pytest -q\n```" in text
    assert 'pip install -e ".[dev]" && python -m pytest' not in text
    with open(os.path.join(REPO, ".ci", "run")) as handle:
        ci = handle.read()
    assert "python -m pytest -q" in ci and '"$status" -eq 5' in ci


# ---- item 7: silent acceptances ----------------------------------------------------------------
import numpy as np                                              # noqa: E402

import minitorch_dist as ms                                     # noqa: E402
import minitorch_dist.dataset as ds                             # noqa: E402
from minitorch_dist import kernels, nn                          # noqa: E402
from minitorch_dist.kernels import _checks                      # noqa: E402


@pytest.mark.parametrize("loss, labels", [
    (nn.MSELoss(), np.zeros((0, 3), np.float32)),
    (nn.L1Loss(), np.zeros((0, 3), np.float32)),
    (nn.BCEWithLogitsLoss(), np.zeros((0, 3), np.float32)),
    (nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"), np.zeros(0, np.int32)),
    (nn.CrossEntropyLoss(), np.zeros(0, np.int64)),
])
def test_an_empty_batch_is_an_error_not_nan(loss, labels):
    with pytest.raises(ValueError, match=r"the batch is empty \(logits of shape \(0, 3\)\)"):
        loss(ms.Tensor(np.zeros((0, 3), np.float32)), ms.Tensor(labels))


def test_an_empty_batch_with_sum_is_zero():
    out = nn.MSELoss(reduction="sum")(ms.Tensor(np.zeros((0, 3), np.float32)),
                                      ms.Tensor(np.zeros((0, 3), np.float32)))
    assert float(out.asnumpy()) == 0.0


@pytest.mark.parametrize("loss", [nn.MSELoss(), nn.L1Loss(), nn.BCEWithLogitsLoss()])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integer_labels_keep_the_loss_float32(loss, dtype):
    logits = ms.Tensor(np.full((2, 3), 0.5, np.float32), requires_grad=True)
    out = loss(logits, ms.Tensor(np.ones((2, 3), dtype)))
    assert out.dtype == np.float32
    reference = loss(ms.Tensor(np.full((2, 3), 0.5, np.float32)),
                     ms.Tensor(np.ones((2, 3), np.float32)))
    assert float(out.asnumpy()) == float(reference.asnumpy())
    out.backward()
    assert logits.grad.dtype == np.float32


@pytest.mark.parametrize("make", [
    lambda w: nn.Momentum([w], 0.1, momentum=5.0),
    lambda w: nn.Momentum([w], 0.1, momentum=1.0),
    lambda w: nn.SGD([w], 0.1, momentum=1.5),
])
def test_momentum_of_one_or_more_is_refused(make):
    w = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), name="w")
    with pytest.raises(ValueError, match=r"momentum must lie in \[0, 1\)"):
        optimizer = make(w)
        optimizer((ms.Tensor(np.ones(2, np.float32)),))        # Momentum checks at its step


def test_momentum_below_one_still_works():
    w = ms.Parameter(ms.Tensor(np.ones(2, np.float32)), name="w")
    nn.Momentum([w], 0.1, momentum=0.99)((ms.Tensor(np.ones(2, np.float32)),))
    np.testing.assert_allclose(w.asnumpy(), 0.9)


@pytest.mark.parametrize("lr", [-0.1, float("nan"), float("inf")])
def test_sparse_sgd_refuses_a_bad_learning_rate(lr):
    table = np.ones((4, 2), np.float32)
    with pytest.raises(ValueError, match="lr must be a finite number >= 0"):
        kernels.native.sparse_sgd(table, np.array([1]), np.ones((1, 2), np.float32), lr) \
            if kernels.HAVE_CPP else _checks.learning_rate(lr)
    assert (table == 1).all()


def test_a_huge_uint64_id_is_reported_as_itself():
    with pytest.raises(IndexError, match="id 18446744073709551615 is out of range"):
        _checks.index_array(np.array([3, 2 ** 64 - 1], np.uint64))
    assert _checks.index_array(np.array([3], np.uint64)).dtype == np.int64
    data = ds.NumpySlicesDataset({"id": np.array([1, 2 ** 64 - 1], np.uint64)}, shuffle=False)
    with pytest.raises(ValueError, match="uint64 value 18446744073709551615"):
        list(data)
