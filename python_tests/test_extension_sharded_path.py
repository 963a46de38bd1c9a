"""The sharded call runs one way (``parallel/extension.py``, ``parallel/sharding/``): its cell
hook exists only while it runs, the communication it inserts never re-enters its primitive
hook, its per-cell state lives in the parallel layer (weakly), and a training step is found
by a trace that stops there (its callers decide on the returned graph)."""
import gc
import weakref

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.communication import run_ranks
from minitorch_dist.nn.cell import set_cell_hook
from minitorch_dist.ops.primitive import set_primitive_hook
from minitorch_dist.parallel.comm.collectives import run_inserted
from minitorch_dist.parallel.extension import sharded_call_of
from minitorch_dist.parallel.sharding import executor
from minitorch_dist.parallel.sharding.graph import trace
from minitorch_dist.parallel.sharding.parameters import slice_parameter, sliced_parameters
from minitorch_dist.parallel.sharding.layout import TensorLayout
from minitorch_dist.parallel.sharding.scope import sharding_world

WORLD = 2


@pytest.fixture(autouse=True)
def _semi_auto():
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel")
    yield
    ms.reset_auto_parallel_context()


def _hooks():
    """This thread's (cell hook, primitive hook), left as they were."""
    cell, prim = set_cell_hook(None), set_primitive_hook(None)
    set_cell_hook(cell)
    set_primitive_hook(prim)
    return cell, prim


class Probe(nn.Cell):
    """Records the cell hook it runs under; raises on the call given by ``fail_at``."""

    def __init__(self, fail_at=None):
        super().__init__()
        self.relu = ops.ReLU()
        self.seen = []
        self.fail_at = fail_at

    def construct(self, x):
        self.seen.append(_hooks()[0])
        if len(self.seen) == self.fail_at:
            raise RuntimeError("probe failed")
        return self.relu(x)


class Net(nn.Cell):
    """A split MatMul (AllReduce over the contracting axis), a replicated parameter (a
    mirror) and a layout change before the second MatMul (a redistribution)."""

    def __init__(self, fail_at=None):
        super().__init__()
        self.w1 = ms.Parameter(ms.Tensor(np.full((4, 6), 0.5, np.float32)), "w1")
        self.w2 = ms.Parameter(ms.Tensor(np.full((6, 2), 0.25, np.float32)), "w2")
        self.mm1 = ops.MatMul().shard(((1, 2), (2, 1)))
        self.probe = Probe(fail_at)
        self.mm2 = ops.MatMul().shard(((2, 1), (1, 1)))

    def construct(self, x):
        return self.mm2(self.probe(self.mm1(x, self.w1)), self.w2)


def _x():
    return np.arange(16, dtype=np.float32).reshape(4, 4) / 16


def _whole(x):
    return np.maximum(x @ np.full((4, 6), 0.5, np.float32), 0) @ np.full((6, 2), 0.25, np.float32)


def test_the_cell_hook_is_installed_only_while_a_sharded_call_runs():
    ms.set_auto_parallel_context(dataset_strategy="full_batch")

    def rank(comm):
        with sharding_world(comm):
            net = Net()
            before = _hooks()
            out = net(ms.Tensor(_x()))
            return before, _hooks(), net.probe.seen, out.asnumpy()

    for before, after, seen, out in run_ranks(WORLD, rank, timeout=60):
        assert before == (None, None) and after == (None, None)
        tracer_hook, run_hook = seen          # the trace's hook, then the run's
        assert tracer_hook is not None and run_hook is not None and run_hook != tracer_hook
        np.testing.assert_allclose(out, _whole(_x()), rtol=1e-6)


def test_the_hooks_are_removed_after_a_sharded_call_that_raised():
    ms.set_auto_parallel_context(dataset_strategy="full_batch")

    def rank(comm):
        with sharding_world(comm):
            net = Net(fail_at=2)              # the trace passes, the run raises
            with pytest.raises(RuntimeError, match="probe failed"):
                net(ms.Tensor(_x()))
            return _hooks()

    assert run_ranks(WORLD, rank, timeout=60) == [(None, None)] * WORLD


def test_inserted_collectives_do_not_reenter_the_primitive_hook(monkeypatch):
    """The hook sees each of the network's primitive calls once, and nothing else, while
    the run inserts a mirror, an AllReduce and a redistribution."""
    ms.set_auto_parallel_context(dataset_strategy="full_batch")
    seen = {}
    original = executor.LocalRun.primitive_hook

    def counting(self, prim, inputs, attrs):
        seen.setdefault(self.rank, []).append(type(prim).__name__)
        return original(self, prim, inputs, attrs)

    monkeypatch.setattr(executor.LocalRun, "primitive_hook", counting)

    def rank(comm):
        with sharding_world(comm):
            net = Net()
            comm.reset_stats()
            out = net(ms.Tensor(_x()))
            program = sharded_call_of(net).program
            calls = sum(c.comm_stats()["calls"] for c in program.groups.communicators() + [comm])
            return out.asnumpy(), len(program.graph.nodes), calls

    for r, (out, nodes, calls) in enumerate(run_ranks(WORLD, rank, timeout=60)):
        assert seen[r] == ["MatMul", "ReLU", "MatMul"] and nodes == 3
        assert calls >= 2        # the parameters' broadcast and the inserted collectives ran
        np.testing.assert_allclose(out, _whole(_x()), rtol=1e-6)


def test_run_inserted_runs_past_any_hook_and_rejects_unknown_kinds():
    def rank(comm):
        calls = []
        previous = set_primitive_hook(lambda prim, inputs, attrs: calls.append(prim))
        try:
            out = run_inserted("all_reduce", ms.Tensor([1.0]), comm, op="sum")
        finally:
            set_primitive_hook(previous)
        return out.asnumpy().tolist(), calls

    assert run_ranks(2, rank, timeout=60) == [([2.0], [])] * 2
    with pytest.raises(ValueError, match="unknown collective 'gather'.*all_reduce"):
        run_inserted("gather", ms.Tensor([1.0]), None)


def test_per_cell_state_leaves_no_attribute_and_does_not_keep_the_cell_alive():
    ms.set_auto_parallel_context(dataset_strategy="full_batch")

    def rank(comm):
        with sharding_world(comm):
            net = Net()
            names = set(net.__dict__)
            net(ms.Tensor(_x()))
            assert sharded_call_of(net) is not None and sharded_call_of(net).program is not None
            added = set(net.__dict__) - names
            ref = weakref.ref(net)
            del net
            gc.collect()
            return added, ref() is None

    assert run_ranks(WORLD, rank, timeout=60) == [(set(), True)] * WORLD


@pytest.mark.parametrize("update", ["optimizer", "set_data", "in_place"])
def test_a_trace_stops_at_the_training_step_and_changes_no_weight(update):
    """Regression: a trace computes with the real parameters, so nothing of a training step
    after its gradient may run in it (a hand-written update would be applied twice on the
    first call, a print or counter would act once more than asked)."""
    net = nn.Dense(3, 2)
    opt = nn.SGD(net.trainable_params(), 0.5)
    loss_fn = nn.MSELoss()
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, opt.parameters)
    reached = []

    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        reached.append("after the gradient")
        if update == "optimizer":
            opt(grads)
        for p, g in zip(opt.parameters, grads):
            if update == "set_data":
                p.set_data(p * 0.9 - 0.5 * g)
            elif update == "in_place":
                p.data[...] = p.data * 0.9
        return loss

    x, y = ms.Tensor(np.ones((4, 3), np.float32)), ms.Tensor(np.ones((4, 2), np.float32))
    weights = [p.asnumpy().copy() for p in net.trainable_params()]
    graph = trace(train_step, [x, y])
    assert graph.training_step == "value_and_grad" and reached == []
    for p, before in zip(net.trainable_params(), weights):
        np.testing.assert_array_equal(p.asnumpy(), before)
    assert trace(lambda g: opt(g), [ms.Tensor(np.zeros((2, 3), np.float32))]).training_step \
        == "SGD"
    for p, before in zip(net.trainable_params(), weights):      # the optimizer did not run
        np.testing.assert_array_equal(p.asnumpy(), before)
    network = trace(net, [x])
    assert network.training_step is None and [n.type_name for n in network.nodes] == \
        ["MatMul", "Add"]


def test_a_user_except_exception_does_not_hide_a_training_step():
    net = nn.Dense(3, 2)
    grad_fn = ms.value_and_grad(lambda x: net(x).sum(), None, net.trainable_params())

    def train_step(x):
        try:
            return grad_fn(x)[0]
        except Exception:           # noqa: BLE001 (the point of the test)
            return None

    assert trace(train_step, [ms.Tensor(np.ones((4, 3), np.float32))]).training_step == \
        "value_and_grad"


def test_sliced_parameters_keep_a_name_while_one_of_its_parameters_lives():
    """Regression: ranks as threads each slice their own ``w``; the registry lost ``w`` when
    the one sliced last was dropped, so a strategy file written then missed it."""
    layout = TensorLayout.replicated((2, 2), 1)
    kept = ms.Parameter(ms.Tensor(np.ones((2, 2), np.float32)), "w_registry_test")
    dropped = ms.Parameter(ms.Tensor(np.ones((2, 2), np.float32)), "w_registry_test")
    slice_parameter(kept, layout, 0, None)
    slice_parameter(dropped, layout, 0, None)
    assert sliced_parameters()["w_registry_test"] is dropped
    del dropped
    gc.collect()
    assert sliced_parameters()["w_registry_test"] is kept
