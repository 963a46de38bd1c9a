"""Devices: resolving targets, the virtual GPU, counted copies, ``Tensor.to``, buffer pools."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor, RowTensor, ops
from minitorch_dist.backend.pool import BufferPool
from minitorch_dist.ops import Primitive


# ---- resolving targets ------------------------------------------------------------------
@pytest.mark.host_default
@pytest.mark.parametrize("spec", ["CPU", "cpu", "Cpu", "HOST", None])
def test_cpu_spellings_resolve_to_one_device(spec):
    dev = ms.get_device(spec)
    assert dev is ms.get_device("CPU")
    assert dev.is_host and dev.name == "CPU" and dev.xp is np
    assert dev == "CPU" and str(dev) == "CPU" and repr(dev) == "Device(CPU)"
    assert ms.get_device(dev) is dev


@pytest.mark.parametrize("make", [
    lambda: ms.get_device("Ascend"),
    lambda: ms.get_device("TPU:0"),
    lambda: ops.Add().set_device("TPU"),
    lambda: ops.MatMul().add_prim_attr("primitive_target", "Ascend"),
    lambda: Tensor([1.0], device="NPU"),
    lambda: Tensor([1.0]).to("tpu"),
    lambda: ms.set_context(device_target="Ascend"),
])
def test_unknown_targets_list_the_valid_ones(make):
    with pytest.raises(ValueError, match=r"unknown device target .*valid targets are \['CPU', 'GPU'\]"):
        make()


def test_device_spec_type_and_index_errors():
    with pytest.raises(TypeError, match="device must be a string"):
        ms.get_device(0)
    with pytest.raises(ValueError, match="must be an integer"):
        ms.get_device("CPU:x")
    with pytest.raises(ValueError, match="must be an integer"):
        ms.get_device("GPU:first")


@pytest.mark.host_default
def test_gpu_without_cupy_or_virtual_gpu_is_a_clear_error(no_gpu):
    expected = r"no GPU is available.*CuPy.*MINITORCH_DIST_VIRTUAL_GPU=1"
    with pytest.raises(ValueError, match=expected):
        ms.get_device("GPU")
    with pytest.raises(ValueError, match=expected):
        ms.set_context(device_target="GPU")
    assert ms.get_context("device_target") == "CPU"          # a failed set leaves it unchanged
    with pytest.raises(ValueError, match=expected):
        Tensor([1.0], device="GPU")
    with pytest.raises(ValueError, match=expected):
        Tensor([1.0]).to("GPU")
    add = ops.Add().set_device("GPU")      # set_device only records the target ...
    assert add.primitive_target == "GPU"
    with pytest.raises(ValueError, match=expected):   # ... running it is what fails
        add(Tensor([1.0]), Tensor([2.0]))


def test_device_equality_with_strings(virtual_gpu):
    cpu = ms.get_device("CPU")
    assert virtual_gpu == "GPU" and virtual_gpu == "GPU:0" and virtual_gpu == "cuda"
    assert virtual_gpu != cpu and cpu != "GPU" and cpu != "not-a-device"
    assert len({cpu, virtual_gpu, ms.get_device("GPU:0")}) == 2


# ---- the virtual GPU ------------------------------------------------------------------
def test_virtual_gpu_device(virtual_gpu):
    assert virtual_gpu.virtual and not virtual_gpu.is_host
    assert virtual_gpu.name == "GPU:0" and repr(virtual_gpu) == "Device(GPU:0 (virtual))"
    assert virtual_gpu.xp is np
    second = ms.get_device("GPU:1")
    assert second is not virtual_gpu and second.name == "GPU:1"
    assert virtual_gpu.pool is not ms.get_device("CPU").pool


def test_tensors_on_the_virtual_gpu_count_every_copy(virtual_gpu):
    t = Tensor(np.ones((4, 5), np.float32), device="GPU")
    assert t.device is virtual_gpu
    assert ms.transfer_stats() == {"host_to_device": 80, "device_to_host": 0,
                                   "device_to_device": 0, "copies": 1}
    assert t.asnumpy().sum() == 20.0
    assert t.tolist()[0][0] == 1.0
    stats = ms.transfer_stats()
    assert stats["device_to_host"] == 160 and stats["copies"] == 3
    ms.reset_transfer_stats()
    assert ms.transfer_stats() == {"host_to_device": 0, "device_to_host": 0,
                                   "device_to_device": 0, "copies": 0}


def test_virtual_gpu_memory_is_separate(virtual_gpu):
    host = np.arange(3.0)
    t = Tensor(host, device="GPU")
    host[0] = 50.0
    assert t.asnumpy()[0] == 0.0
    back = t.asnumpy()
    back[1] = 50.0
    assert t.asnumpy()[1] == 1.0


def test_context_device_target_sets_where_tensors_are_created(virtual_gpu):
    ms.set_context(device_target="GPU")
    assert ms.get_context("device_target") == "GPU"
    assert Tensor([1.0]).device is virtual_gpu
    assert (Tensor([1.0]) + 1.0).device is virtual_gpu
    ms.set_context(device_target="CPU")
    assert Tensor([1.0]).device.is_host


@pytest.mark.host_default
def test_tensor_from_a_gpu_tensor_counts_the_copy(virtual_gpu):
    """Regression: Tensor(gpu_tensor) used to copy to the host without counting it."""
    g = Tensor(np.ones(4, np.float32), device="GPU")
    ms.reset_transfer_stats()
    host = Tensor(g)
    assert host.device.is_host and host.tolist() == [1.0] * 4
    assert ms.transfer_stats()["device_to_host"] == 16
    ms.reset_transfer_stats()
    same = Tensor(g, dtype=ms.float64, device="GPU")
    assert same.device is virtual_gpu and same.dtype == np.float64
    assert not np.shares_memory(same.data, g.data)
    assert ms.transfer_stats()["copies"] == 0           # stayed on the device


# ---- Tensor.to ------------------------------------------------------------------------
@pytest.mark.host_default
def test_to_is_differentiable_and_counted(virtual_gpu):
    x = Tensor(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
    y = x.to("GPU")
    assert y.device is virtual_gpu and y.requires_grad and not y.is_leaf
    assert not np.shares_memory(x.data, y.data)
    z = y * y
    assert z.device is virtual_gpu
    z.backward(np.ones(3, np.float32))
    assert x.grad.device.is_host                       # the gradient came back to x's device
    np.testing.assert_allclose(x.grad.asnumpy(), [2.0, 4.0, 6.0])
    assert ms.transfer_stats() == {"host_to_device": 12, "device_to_host": 12,
                                   "device_to_device": 0, "copies": 2}


def test_round_trip_to_and_back(virtual_gpu):
    x = Tensor(np.array([[1.0, -1.0]], np.float64), requires_grad=True)
    back = x.to("GPU").to("CPU")
    assert back.device.is_host and back.dtype == np.float64
    (back * 3.0).backward(np.ones((1, 2)))
    np.testing.assert_allclose(x.grad.asnumpy(), [[3.0, 3.0]])
    assert ms.transfer_stats()["host_to_device"] == 32
    assert ms.transfer_stats()["device_to_host"] == 32


class TakeRows(Primitive):
    """``table[indices]`` with a RowTensor gradient for the table."""

    def forward(self, ctx, table, indices):
        ctx.indices, ctx.shape = indices, table.shape
        return table[indices]

    def backward(self, ctx, g):
        return RowTensor(Tensor._make(ctx.indices, ctx.device), Tensor._make(g, ctx.device), ctx.shape), None


@pytest.mark.host_default
def test_sparse_gradient_crosses_devices_as_rows(virtual_gpu):
    """Regression: a RowTensor gradient going back across a device copy used to crash."""
    table = Tensor(np.arange(40.0, dtype=np.float32).reshape(10, 4), requires_grad=True)
    ids = Tensor(np.array([7, 2, 7], np.int64))
    take = TakeRows().set_device("GPU")
    rows = take(table, ids)
    assert rows.device is virtual_gpu
    rows.backward(np.ones((3, 4), np.float32))
    g = table.grad
    assert isinstance(g, RowTensor) and g.device.is_host and g.values.device.is_host
    assert g.indices.tolist() == [7, 2, 7]
    np.testing.assert_allclose(g.to_dense().asnumpy()[:, 0], [0, 0, 1, 0, 0, 0, 0, 2, 0, 0])
    # forward: the whole table (160 B) and the ids (24 B); backward: ids and values only
    assert ms.transfer_stats()["host_to_device"] == 160 + 24
    assert ms.transfer_stats()["device_to_host"] == 24 + 48
    assert take.bytes_in == 184 and take.bytes_out == 72


# ---- buffer pools -----------------------------------------------------------------------
def test_buffer_pool_reuses_released_arrays():
    pool = BufferPool(np)
    a = pool.empty((4, 4), np.float32)
    assert pool.stats() == {"hits": 0, "misses": 1, "cached_bytes": 0}
    pool.release(a)
    assert pool.stats()["cached_bytes"] == 64
    assert pool.empty((4, 4), "float32") is a
    assert pool.stats()["hits"] == 1
    b = pool.empty((4, 4), np.float32)                  # free list is empty again: a miss
    assert b is not a and pool.stats()["misses"] == 2
    c = pool.empty((4, 4), np.float64)                  # another dtype is another key
    assert c.dtype == np.float64 and pool.stats()["misses"] == 3


def test_buffer_pool_zeros_views_limits_and_clear():
    pool = BufferPool(np, max_per_key=2)
    a = pool.empty((3,), np.float64)
    a[:] = 5.0
    pool.release(a)
    z = pool.zeros((3,), np.float64)
    assert z is a and z.tolist() == [0.0, 0.0, 0.0]
    pool.release(np.ones((6,))[::2])                    # a view: not ours to recycle
    pool.release(np.ones((2, 3)).T)                     # not C-contiguous either
    assert pool.stats()["cached_bytes"] == 0
    for _ in range(5):
        pool.release(np.empty((3,)))
    assert pool.stats()["cached_bytes"] == 2 * 24       # at most max_per_key per key
    pool.clear()
    assert pool.stats()["cached_bytes"] == 0


def test_buffer_pool_allocates_when_another_thread_took_the_last_free_array():
    """Thread ranks share a device's pool: between the check that a free list is not empty
    and the pop, another thread may take its last array (this was an IndexError)."""
    class TakenMeanwhile(list):
        def __bool__(self):         # the check saw an array that is gone by the pop
            return True

    pool = BufferPool(np)
    pool._free[((4,), np.dtype(np.float32).str)] = TakenMeanwhile()
    out = pool.empty((4,), np.float32)
    assert out.shape == (4,) and pool.stats()["misses"] == 1 and pool.stats()["hits"] == 0


def test_a_scratch_pool_is_the_calling_threads_alone():
    """The sharding trace gives its primitives a scratch pool. It used to swap the device's
    pool, which thread ranks share: two traces interleaved (A in, B in, A out, B out) left
    A's scratch pool on the device for good, and the other rank drew from it meanwhile."""
    import threading
    device = ms.get_device("CPU")
    own = device.pool
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def trace_a():
        with device.scratch_pool():
            seen["a"] = device.pool
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def trace_b():
        a_in.wait(10)
        with device.scratch_pool():
            seen["b"] = device.pool
            seen["b sees a"] = seen["a"] is device.pool
            b_in.set()
            a_out.wait(10)

    threads = [threading.Thread(target=trace_a), threading.Thread(target=trace_b)]
    for t in threads:
        t.start()
    with device.scratch_pool():
        pass
    for t in threads:
        t.join(10)
    assert seen["a"] is not own and seen["b"] is not own and seen["a"] is not seen["b"]
    assert not seen["b sees a"]
    assert device.pool is own


def test_device_pools_are_per_device(virtual_gpu):
    cpu_pool, gpu_pool = ms.get_device("CPU").pool, virtual_gpu.pool
    buf = gpu_pool.empty((2, 2), np.float32)
    gpu_pool.release(buf)
    hits = cpu_pool.hits
    cpu_pool.empty((2, 2), np.float32)
    assert cpu_pool.hits == hits                        # the CPU pool did not hand out GPU memory
    assert gpu_pool.empty((2, 2), np.float32) is buf
