"""The per-step bookkeeping of the engine stays thin (issue 29, "a thinner step").

None of these is timed: each counts something the dispatch or the tape does per node (nodes
recorded, inputs resolved, Python memory blocks kept, lists made), so that a change that adds
per-call work fails here whatever the machine's load.
"""
import gc
import importlib.util
import os
import sys

import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import autograd, nn, ops
from minitorch_dist.autograd import Node, _topological_nodes, run_backward
from minitorch_dist.backend import get_device

from mpi_jobs import REPO

spec = importlib.util.spec_from_file_location(
    "bench_training_step", os.path.join(REPO, "benchmarks", "bench_training_step.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def _mlp_loss():
    ms.set_seed(0)
    net = bench.SeedMLP()
    rng = np.random.default_rng(0)
    x = ms.Tensor(rng.normal(size=(8, 1, 28, 28)).astype(np.float32))
    y = ms.Tensor(rng.integers(0, 10, 8).astype(np.int32))
    return net, nn.CrossEntropyLoss()(net(x), y)


def test_the_seed_mlp_step_records_exactly_its_nodes():
    _, loss = _mlp_loss()
    kinds = [type(node.prim).__name__ for node in _topological_nodes([loss])]
    # the input's Flatten needs no gradient: no node; then MatMul + Add per layer, two ReLUs
    # and the loss, consumers first
    assert kinds[0] != "MatMul" and kinds.count("MatMul") == 3 and kinds.count("Add") == 3
    assert kinds.count("ReLU") == 2 and len(kinds) == 9, kinds


def test_backward_resolves_each_node_inputs_once(monkeypatch):
    """Counted on the Python twin: the C++ sort (``cpp/engine.cpp``) reads the links without
    the property, once per node by construction, and ``test_native_engine.py`` checks that
    it resolves them to the same inputs."""
    monkeypatch.setattr(autograd, "_native", None)
    net, loss = _mlp_loss()
    reads = []
    original = Node.inputs

    def counted(node):
        reads.append(node)
        return original.fget(node)

    monkeypatch.setattr(Node, "inputs", property(counted))
    weights = net.trainable_params()
    grads = run_backward([loss], [np.ones((), np.float32)], targets=weights)
    assert all(g is not None for g in grads)
    assert len(reads) == 9 and len(set(reads)) == 9, len(reads)


@pytest.mark.host_default
def test_placing_inputs_already_in_place_makes_no_list():
    add = ops.Add()
    inputs = (ms.Tensor([1.0]), ms.Tensor([2.0]))
    assert add._placed(inputs, get_device("CPU")) is inputs


def test_needs_input_grad_tuples_are_shared_between_nodes():
    x = ms.Tensor(np.ones(2, np.float32), requires_grad=True)
    a, b = ops.Mul()(x, 2.0), ops.Mul()(x, 3.0)
    assert a.grad_fn.ctx.needs_input_grad == (True, False)
    assert a.grad_fn.ctx.needs_input_grad is b.grad_fn.ctx.needs_input_grad


def _blocks_per_call(n, requires_grad):
    x = ms.Tensor(np.ones(1, np.float32), requires_grad=requires_grad)
    add = ops.Add()
    add(x, x)
    gc.collect()
    before = sys.getallocatedblocks()
    outs, y = [], x
    for _ in range(n):
        y = add(y, x)
        outs.append(y)
    gc.collect()
    kept = sys.getallocatedblocks() - before
    del outs, y
    return kept / n


def test_a_tape_node_keeps_a_bounded_number_of_python_blocks():
    without = _blocks_per_call(300, False)
    with_tape = _blocks_per_call(300, True)
    # the node, its context (and its attribute dict), the tuple of links, one InputLink with
    # its weak reference and shape tuple: 7 blocks, measured 7.0 on CPython 3.11
    assert with_tape - without <= 7.5, (with_tape, without)


def test_a_no_grad_call_records_nothing():
    x = ms.Tensor(np.ones(2, np.float32), requires_grad=True)
    with ms.no_grad():
        y = ops.Add()(x, x)
    assert y.grad_fn is None and not y.requires_grad


@pytest.mark.parametrize("observer", [None, "defer"])
def test_gradients_are_unchanged_bit_for_bit_with_or_without_an_observer(observer):
    net, loss = _mlp_loss()
    weights = net.trainable_params()
    ref = [g.copy() for g in run_backward([loss], [np.ones((), np.float32)], targets=weights,
                                          retain_graph=True)]
    watcher = None if observer is None else autograd.BackwardObserver()
    got = run_backward([loss], [np.ones((), np.float32)], targets=weights, observer=watcher)
    for a, b in zip(ref, got):
        assert a.tobytes() == b.tobytes()


def _count_pruning_walks(monkeypatch):
    walks = []
    original = autograd._nodes_reaching

    def counted(*args):
        walks.append(1)
        return original(*args)

    monkeypatch.setattr(autograd, "_nodes_reaching", counted)
    return walks


def test_a_gradient_of_every_weight_skips_the_pruning_walk_with_the_same_bits(monkeypatch):
    net, loss = _mlp_loss()
    weights = net.trainable_params()
    walks = _count_pruning_walks(monkeypatch)
    got = run_backward([loss], [np.ones((), np.float32)], targets=weights, retain_graph=True)
    assert walks == []          # every leaf that wants a gradient is a target: nothing to prune
    # the same pass with the walk forced: as if some leaf wanting a gradient were no target
    original = autograd._topological_order

    def with_a_stranger(roots):
        nodes, inputs, leaf_ids = original(roots)
        return nodes, inputs, leaf_ids | {-1}

    monkeypatch.setattr(autograd, "_topological_order", with_a_stranger)
    ref = run_backward([loss], [np.ones((), np.float32)], targets=weights)
    assert walks == [1]
    for a, b in zip(ref, got):
        assert a.tobytes() == b.tobytes()


def test_a_leaf_that_is_no_target_still_prunes_its_gradient(monkeypatch):
    w = ms.Tensor(np.full(3, 2.0, np.float32), requires_grad=True)
    v = ms.Tensor(np.full(3, 5.0, np.float32), requires_grad=True)    # wants one, not asked
    loss = ops.ReduceSum()(ops.Mul()(w, v))
    walks = _count_pruning_walks(monkeypatch)
    asked = []
    node = _topological_nodes([loss])[1]        # consumers first: ReduceSum, then Mul
    original = node.prim.backward

    def spy(ctx, g):
        asked.append(ctx.needs_input_grad)
        return original(ctx, g)

    node.prim.backward = spy
    (gw,) = run_backward([loss], [np.ones((), np.float32)], targets=[w])
    assert walks == [1] and asked == [(True, False)]      # v's gradient is not computed
    assert gw.tolist() == [5.0, 5.0, 5.0] and v.grad is None


def test_a_hand_made_context_without_needs_input_grad_still_backpropagates():
    # a node recorded outside Primitive.run (a device copy, say) may leave needs_input_grad
    # unset: pruning toward the targets must not read it blindly
    from minitorch_dist.ops.primitive import Context

    class Double:
        name = "Double"
        backward_always_runs = False
        backward_time = 0.0

        def backward(self, ctx, g):
            return 2 * g

    w = ms.Tensor(np.ones(2, np.float32), requires_grad=True)
    ctx = Context(get_device("CPU"))
    y = ms.Tensor._make(np.full(2, 2.0, np.float32), get_device("CPU"), True,
                        Node(Double(), ctx, (w,)))
    (g,) = run_backward([y], [np.ones(2, np.float32)], targets=[w])
    assert g.tolist() == [2.0, 2.0]


def _overhead_bench():
    path = os.path.join(REPO, "benchmarks", "bench_step_overhead.py")
    spec_ = importlib.util.spec_from_file_location("bench_step_overhead", path)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


@pytest.mark.parametrize("which", ["minitorch_dist", "numpy by hand", "gemms only"])
def test_the_overhead_benchmark_contenders_run(which):
    # the measured loop itself, without valgrind (no go file: nothing to wait for)
    _overhead_bench().child(which, steps=1, warmup=1, go_file=None)


def test_the_overhead_benchmark_counts_only_the_contenders_asked_for(monkeypatch):
    bench_overhead = _overhead_bench()
    counted = []
    monkeypatch.setattr(bench_overhead.shutil, "which", lambda name: "/usr/bin/valgrind")
    monkeypatch.setattr(bench_overhead, "count",
                        lambda which, steps, warmup: counted.append(which) or 10 * steps)
    per_step = bench_overhead.main(["--steps", "2", "--only", "minitorch_dist"])
    assert counted == ["minitorch_dist"] and per_step == {"minitorch_dist": 10.0}


def test_the_overhead_benchmark_refuses_to_run_without_valgrind(monkeypatch):
    bench_overhead = _overhead_bench()
    monkeypatch.setattr(bench_overhead.shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match="valgrind"):
        bench_overhead.main(["--steps", "1"])
    with pytest.raises(SystemExit):
        bench_overhead.main(["--steps", "0"])


@pytest.mark.parametrize("in_force", [1, 2])
def test_matmul_enters_the_thread_switch_only_where_it_switches(monkeypatch, in_force):
    import contextlib

    from minitorch_dist.backend import threads
    mm = sys.modules["minitorch_dist.ops.matmul"]     # ops.matmul is the function of that name
    entered = []

    @contextlib.contextmanager
    def spy(flops):
        entered.append(flops)
        yield

    monkeypatch.setattr(threads, "product_threads", spy)
    monkeypatch.setattr(threads, "get_num_threads", lambda: in_force)
    small = np.ones((4, 8), np.float32), np.ones((8, 2), np.float32)
    batched = np.ones((3, 4, 8), np.float32), np.ones((8, 2), np.float32)
    big = np.ones((256, 256), np.float32), np.ones((256, 128), np.float32)   # 2^23 flops
    for a, b in (small, batched, big):
        np.testing.assert_array_equal(mm._mm(np, a, b), np.matmul(a, b))
    # one thread in force: nothing to switch; two: the small products (batch counted) only
    assert entered == ([] if in_force == 1 else [4 * 8 * 2, 3 * 4 * 8 * 2])
