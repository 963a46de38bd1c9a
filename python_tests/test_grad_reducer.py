"""DistributedGradReducer on in-process ranks (``run_ranks``): dense means and sums against the
closed form, fused and unfused alike, RowTensor gradients gathered row by row, the training
wrappers picking it up in data-parallel mode, and bad input."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import nn
from minitorch_dist.communication import run_ranks
from minitorch_dist.parallel import DistributedGradReducer
from minitorch_dist.row_tensor import RowTensor

SHAPES = [(3,), (4, 5), (2, 3, 2), (7,)]


def _params():
    return [ms.Parameter(ms.Tensor(np.zeros(s, np.float32)), name=f"p{i}")
            for i, s in enumerate(SHAPES)]


def _local_grads(rank):
    rng = np.random.default_rng(100 + rank)      # a different gradient on every rank
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("mean", [True, False])
@pytest.mark.parametrize("fusion_type, buff_size", [(1, 4 << 20), (1, 64), (0, 4 << 20)])
def test_dense_gradients_equal_the_closed_form_mean_or_sum(world, mean, fusion_type, buff_size):
    expected = np.sum([np.concatenate([g.ravel() for g in _local_grads(r)])
                       for r in range(world)], axis=0)
    if mean:
        expected /= world

    def body(comm):
        reducer = DistributedGradReducer(_params(), mean=mean, fusion_type=fusion_type,
                                         communicator=comm, buff_size=buff_size)
        inputs = [ms.Tensor(g) for g in _local_grads(comm.rank)]
        out = reducer(tuple(inputs))
        untouched = all(np.array_equal(t.asnumpy(), g)
                        for t, g in zip(inputs, _local_grads(comm.rank)))
        return np.concatenate([g.asnumpy().ravel() for g in out]), untouched

    for flat, untouched in run_ranks(world, body):
        np.testing.assert_allclose(flat, expected, rtol=1e-6, atol=1e-6)
        assert untouched, "the reducer must not modify the gradients passed in"


def test_results_do_not_alias_between_calls():
    def body(comm):
        reducer = DistributedGradReducer(_params(), mean=True, communicator=comm)
        first = reducer(tuple(ms.Tensor(g) for g in _local_grads(comm.rank)))
        kept = [g.asnumpy().copy() for g in first]
        reducer(tuple(ms.Tensor(g * 10) for g in _local_grads(comm.rank)))
        return all(np.array_equal(a.asnumpy(), b) for a, b in zip(first, kept))

    assert run_ranks(2, body) == [True, True]


def test_small_gradients_share_one_allreduce():
    def body(comm):
        reducer = DistributedGradReducer(_params(), communicator=comm)
        comm.reset_stats()
        reducer(tuple(ms.Tensor(g) for g in _local_grads(comm.rank)))
        return comm.comm_stats()["by_op"]["allreduce"]["calls"]

    assert run_ranks(2, body) == [1, 1]


def test_row_tensor_gradients_are_gathered_not_densified():
    table_shape = (10, 3)

    def local(rank):
        indices = np.array([rank, 5, 9 - rank][: 2 + rank])     # ranks send different counts
        values = np.full((len(indices), 3), rank + 1.0, np.float32)
        return indices, values

    dense = np.zeros(table_shape, np.float32)
    for r in range(2):
        i, v = local(r)
        np.add.at(dense, i, v)

    def body(comm):
        table = ms.Parameter(ms.Tensor(np.zeros(table_shape, np.float32)), name="table")
        reducer = DistributedGradReducer([table], mean=True, communicator=comm)
        i, v = local(comm.rank)
        (out,) = reducer((RowTensor(ms.Tensor(i), ms.Tensor(v), table_shape),))
        return out

    for out in run_ranks(2, body):
        assert isinstance(out, RowTensor) and out.indices.shape == (5,)
        np.testing.assert_allclose(out.to_dense().asnumpy(), dense / 2)


def test_mean_defaults_to_the_auto_parallel_context():
    def body(comm):
        p = ms.Parameter(ms.Tensor([0.0]), name="p")
        (g,) = DistributedGradReducer([p], communicator=comm)((ms.Tensor([2.0]),))
        return float(g.asnumpy()[0])

    try:
        ms.set_auto_parallel_context(gradients_mean=True)
        assert run_ranks(2, body) == [2.0, 2.0]
        ms.set_auto_parallel_context(gradients_mean=False)
        assert run_ranks(2, body) == [4.0, 4.0]
    finally:
        ms.reset_auto_parallel_context()


def test_train_one_step_cell_reduces_in_data_parallel_mode():
    """TrainOneStepCell in DATA_PARALLEL mode averages gradients: two ranks that each hold half
    of a batch take the same step as one process on the whole batch."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    y = rng.standard_normal((8, 2)).astype(np.float32)

    def make_step():
        ms.set_seed(3)
        net = nn.WithLossCell(nn.Dense(3, 2), nn.MSELoss())
        return net, nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), 0.1))

    net, step = make_step()
    for _ in range(3):
        step(ms.Tensor(x), ms.Tensor(y))
    expected = [p.asnumpy() for p in net.trainable_params()]

    from minitorch_dist import communication
    from minitorch_dist.nn import wrappers

    # built here, one seeded draw at a time: thread ranks drawing from the shared random
    # stream at once got different initial weights now and then
    built = [make_step() for _ in range(2)]
    for made, _ in built:
        for p in made.trainable_params():
            p.asnumpy()                         # a deferred initialisation draws now

    def body(comm):
        net, step = built[comm.rank]
        # what _make_grad_reducer builds on a launched job, over this in-process group
        step.grad_reducer = DistributedGradReducer(step.weights, mean=True, communicator=comm)
        half = slice(4 * comm.rank, 4 * comm.rank + 4)
        for _ in range(3):
            step(ms.Tensor(x[half]), ms.Tensor(y[half]))
        return [p.asnumpy() for p in net.trainable_params()]

    for got in run_ranks(2, body):
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

    # The hook itself: data-parallel mode without init() is a clear error; a world of one
    # needs no reduction.
    try:
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL,
                                     gradients_mean=True)
        with pytest.raises(RuntimeError, match="init"):
            make_step()
        communication.init()
        _, step = make_step()
        assert step.grad_reducer is wrappers._identity
    finally:
        communication.release()
        ms.reset_auto_parallel_context()


def test_nn_exposes_the_reducer():
    assert nn.DistributedGradReducer is DistributedGradReducer
    with pytest.raises(AttributeError):
        nn.NoSuchThing  # noqa: B018


def test_bad_input_is_a_clear_error():
    def body(comm):
        params = _params()
        reducer = DistributedGradReducer(params, communicator=comm)
        with pytest.raises(ValueError, match="4 gradients"):
            reducer((ms.Tensor(np.zeros(3, np.float32)),))
        with pytest.raises(ValueError, match=r"p1.*\(4, 5\)"):
            reducer(tuple(ms.Tensor(np.zeros(s if i != 1 else (5, 4), np.float32))
                          for i, s in enumerate(SHAPES)))
        with pytest.raises(ValueError, match="degree"):
            DistributedGradReducer(params, degree=0, communicator=comm)
        with pytest.raises(ValueError, match="fusion_type"):
            DistributedGradReducer(params, fusion_type=2, communicator=comm)
        with pytest.raises(ValueError, match="empty"):
            DistributedGradReducer([], communicator=comm)
        return True

    assert run_ranks(2, body) == [True, True]


def test_without_init_the_reducer_says_to_call_init():
    p = ms.Parameter(ms.Tensor([0.0]), name="p")
    with pytest.raises(RuntimeError, match="init"):
        DistributedGradReducer([p])


@pytest.mark.host_default
def test_host_gradients_use_the_host_communicator_under_nccl():
    """With NCCL as the world (a real GPU), host-resident gradients of a heterogeneous model
    must travel over the host communicator that bootstrapped it: NCCL moves device arrays only.
    A second in-process group stands in for the NCCL one and must stay unused."""
    from minitorch_dist.communication import LocalCommunicator
    stand_ins = LocalCommunicator.create(2)

    def body(comm):
        device_comm = stand_ins[comm.rank]
        device_comm.bootstrap = comm
        p = ms.Parameter(ms.Tensor([0.0, 0.0]), name="p")
        (g,) = DistributedGradReducer([p], mean=True, communicator=device_comm)(
            (ms.Tensor([1.0, 3.0]) * (comm.rank + 1),))
        return g.asnumpy().tolist(), device_comm.comm_stats()["calls"], comm.comm_stats()["calls"]

    for values, device_calls, host_calls in run_ranks(2, body):
        assert values == [1.5, 4.5] and device_calls == 0 and host_calls == 1
