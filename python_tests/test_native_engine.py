"""The backward engine's C++ loops (``cpp/engine.cpp``) against their Python twins in
``autograd.py``: the same gradients to the bit, the same ``.grad`` accumulation, the same
errors, and the twins still used where the pass is watched or pruned."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor, autograd, nn, ops

from test_autograd import WrongCount     # a backward that returns two gradients for one input

pytestmark = pytest.mark.skipif(autograd._native is None,
                                reason="the C++ extension is not built: only the twins exist")

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def twin(monkeypatch):
    """Runs a callable once with the C++ loops and once with the Python twins."""
    def both(fn):
        native = fn()
        monkeypatch.setattr(autograd, "_native", None)
        try:
            python = fn()
        finally:
            monkeypatch.undo()
        return native, python
    return both


def _same(a, b):
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, ms.RowTensor):
        _same(a.indices.asnumpy(), b.indices.asnumpy())
        _same(a.values.asnumpy(), b.values.asnumpy())
    elif a is None:
        assert b is None
    else:
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()


def test_a_training_step_gets_the_same_gradients(twin):
    """An MLP with broadcast biases, a weight used twice (its gradients summed) and a
    cross-entropy loss."""
    rng = np.random.default_rng(0)
    x = Tensor(rng.normal(size=(16, 8)).astype(np.float32))
    y = Tensor(rng.integers(0, 4, 16).astype(np.int32))
    w1 = ms.Parameter(Tensor(rng.normal(size=(8, 8)).astype(np.float32)), name="w1")
    b1 = ms.Parameter(Tensor(rng.normal(size=(8,)).astype(np.float32)), name="b1")
    w2 = ms.Parameter(Tensor(rng.normal(size=(8, 4)).astype(np.float32)), name="w2")
    loss_fn = nn.CrossEntropyLoss()

    def forward(x, y):
        h = ops.relu(ops.matmul(x, w1) + b1)
        h = ops.relu(ops.matmul(h, w1) + b1)     # w1 and b1 consumed twice
        return loss_fn(ops.matmul(h, w2), y)

    grad_fn = ms.value_and_grad(forward, None, [w1, b1, w2])
    native, python = twin(lambda: [g.asnumpy() for g in grad_fn(x, y)[1]])
    _same(native, python)


def test_grad_accumulates_the_same_into_leaves(twin):
    def run():
        a = Tensor(np.arange(6, dtype=np.float64).reshape(2, 3), requires_grad=True)
        b = Tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
        for _ in range(2):
            ((a * b + b) * a).sum().backward()
        return a.grad.asnumpy(), b.grad.asnumpy()
    native, python = twin(run)
    _same(native, python)


def test_multi_output_sparse_and_half_gradients(twin):
    """A multi-output node (Split), a RowTensor gradient (a sparse embedding) and a float16
    input whose float32 gradient is cast back: the paths that call the twin's helpers."""
    def run():
        x = Tensor(np.arange(8, dtype=np.float32), requires_grad=True)
        first, second = ops.split(x, 4, 0)
        table = Tensor(np.ones((10, 3), np.float32), requires_grad=True)
        rows = ops.Gather(sparse_grad=True)(table, Tensor(np.array([1, 7, 1])), 0)
        half = Tensor(np.array([1.0, 2.0], np.float16), requires_grad=True)
        loss = (first * 2.0).sum() + (second * second).sum() + \
            ops.cast(half, ms.float32).sum() * 3.0 + rows.sum() + (table * 0.5).sum()
        return autograd.run_backward([loss], [np.ones((), np.float32)],
                                     targets=[x, half, table])
    native, python = twin(run)
    _same(native, python)


def test_the_same_errors(twin):
    def wrong_count():
        x = Tensor(np.ones(3), requires_grad=True)
        with pytest.raises(RuntimeError) as err:
            WrongCount()(x).sum().backward()
        return str(err.value)

    def freed_graph():
        x = Tensor(np.ones(3), requires_grad=True)
        y = (x * x).sum()
        y.backward()
        with pytest.raises(RuntimeError) as err:
            y.backward()
        return str(err.value)

    for case in (wrong_count, freed_graph):
        native, python = (re.sub(r"-op\d+", "", m) for m in twin(case))   # instance names
        assert native == python
        assert ("returned 2 gradients for 1 inputs" if case is wrong_count else
                "second time") in native


def test_retain_graph_keeps_the_contexts(twin):
    def run():
        x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
        y = (x * x * x).sum()
        y.backward(retain_graph=True)
        y.backward()
        return x.grad.asnumpy()
    native, python = twin(run)
    _same(native, python)
    _same(native, np.array([6.0, 24.0]))


def test_the_topological_orders_agree():
    x = Tensor(np.ones((2, 2)), requires_grad=True)
    a = x * 2.0
    b = ops.matmul(a, x) + a
    roots = [b.sum(), (a * 3.0).sum(), x]
    native = autograd._native.topological_order(roots, autograd.InputLink)
    python = autograd._python_topological_order(roots)
    assert native[0] == python[0] and native[2] == python[2]
    assert [tuple(map(id, i)) for i in native[1]] == [tuple(map(id, i)) for i in python[1]]


def test_a_watched_or_pruned_pass_runs_the_twin(monkeypatch):
    """The C++ loop takes only an unwatched pass over every node; an observer (DistOpt's
    buckets) or pruning to some targets goes through the Python loop."""
    calls = []
    native = autograd._native

    class Spy:
        def __getattr__(self, name):
            if name == "backward_nodes":
                calls.append(name)
            return getattr(native, name)

    monkeypatch.setattr(autograd, "_native", Spy())
    w = Tensor(np.ones(2), requires_grad=True)
    v = Tensor(np.ones(2), requires_grad=True)
    loss = (w * v).sum()
    autograd.run_backward([loss], [np.ones(())], targets=[w], retain_graph=True)
    assert calls == []                          # v's side pruned: the twin
    autograd.run_backward([loss], [np.ones(())], targets=[w], retain_graph=True,
                          observer=autograd.BackwardObserver())
    assert calls == []                          # an observer: the twin
    autograd.run_backward([loss], [np.ones(())], targets=[w, v])
    assert calls == ["backward_nodes"]


def test_the_engine_suites_pass_on_the_python_twins():
    """The autograd suites again with MINITORCH_DIST_NO_CPP=1, where the twins do all."""
    files = ["test_autograd.py", "test_value_and_grad.py", "test_autograd_pruning.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
         *[os.path.join(HERE, f) for f in files]],
        env=dict(os.environ, MINITORCH_DIST_NO_CPP="1"), capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def _random_graph(seed):
    """A loss over a random graph of element-wise ops, products, reductions and a split on
    four leaves: fan-out, diamonds, broadcasting and unused branches, as ``seed`` picks."""
    rng = np.random.default_rng(seed)
    leaves = [Tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
              for shape in [(3, 4), (4,), (1, 4), (4, 3)]]
    pool = list(leaves)
    for _ in range(12):
        a, b = (pool[i] for i in rng.integers(0, len(pool), 2))
        kind = rng.integers(0, 6)
        if kind == 0 and a.shape[-1] == b.shape[0] and a.ndim == 2 and b.ndim == 2:
            pool.append(ops.matmul(a, b))
        elif kind == 1 and a.ndim == 2 and a.shape[0] % 2 == 0:
            pool.extend(ops.split(a, a.shape[0] // 2, 0))     # a node with two outputs
        elif kind == 2:
            pool.append(ops.relu(a) * 0.5)
        elif kind == 3:
            pool.append(a.sum(axis=0) if a.ndim == 2 else a * a)
        else:
            try:
                pool.append(a * b + a if kind == 4 else a - b * 2.0)
            except ValueError:      # shapes that do not broadcast: another pick
                pool.append(a * 1.5)
    loss = pool[-1].sum()
    for t in pool[-5:-1]:
        loss = loss + t.sum()
    return loss, leaves


@pytest.mark.parametrize("seed", range(16))
def test_random_graphs_get_the_same_gradients(twin, seed):
    def run():
        loss, leaves = _random_graph(seed)
        return autograd.run_backward([loss], [np.ones((), np.float32)], targets=leaves)
    native, python = twin(run)
    _same(native, python)
