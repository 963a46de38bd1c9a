"""DLPack interop: memory shared with NumPy, PyTorch and CuPy, in both directions."""
import numpy as np
import pytest

import minitorch_dist as ms
from minitorch_dist import Tensor


def test_numpy_sees_tensor_memory():
    t = Tensor(np.arange(4.0, dtype=np.float32))
    assert t.__dlpack_device__() == (1, 0)            # kDLCPU, device 0
    view = np.from_dlpack(t)
    assert view.dtype == np.float32 and view.shape == (4,)
    view[0] = 42.0                                    # a write on one side ...
    assert t.tolist()[0] == 42.0                      # ... is seen on the other
    t[1] = -1.0
    assert view[1] == -1.0


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_])
def test_from_numpy_shares_memory_and_keeps_dtype(dtype):
    a = np.zeros((2, 3), dtype)
    t = ms.from_dlpack(a)
    assert t.dtype == dtype and t.shape == (2, 3) and t.device.is_host
    a[1, 2] = 1
    assert t.asnumpy()[1, 2] == 1
    assert np.shares_memory(t.data, a)


def test_from_numpy_non_contiguous_view():
    a = np.arange(12.0).reshape(3, 4)[:, ::2]
    t = ms.from_dlpack(a)
    np.testing.assert_array_equal(t.asnumpy(), a)
    a[0, 1] = 99.0
    assert t.asnumpy()[0, 1] == 99.0


def test_round_trip_through_numpy_keeps_working_as_a_tensor():
    a = np.array([1.0, 2.0])
    t = ms.from_dlpack(a)
    x = Tensor(t.asnumpy(), requires_grad=True)
    (x * t).backward(np.ones(2))
    np.testing.assert_allclose(x.grad.asnumpy(), a)
    np.testing.assert_array_equal(np.from_dlpack(ms.from_dlpack(a)), a)


def test_pytorch_round_trips():
    torch = pytest.importorskip("torch")
    t = Tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    tt = torch.from_dlpack(t)
    assert tt.dtype == torch.float32 and tuple(tt.shape) == (2, 3)
    tt[0, 0] = 7.0
    assert t.asnumpy()[0, 0] == 7.0
    t[1, 2] = -3.0
    assert tt[1, 2].item() == -3.0

    src = torch.arange(4, dtype=torch.float64)
    m = ms.from_dlpack(src)
    assert m.dtype == np.float64 and m.device.is_host
    src[3] = 100.0
    assert m.tolist()[3] == 100.0
    m[0] = -5.0
    assert src[0].item() == -5.0
    assert ms.from_dlpack(torch.tensor([1, 2])).dtype == np.int64
    assert ms.from_dlpack(torch.tensor([True, False])).dtype == np.bool_


def test_pytorch_tensor_that_requires_grad_must_be_detached():
    torch = pytest.importorskip("torch")
    src = torch.ones(2, requires_grad=True)
    with pytest.raises((BufferError, RuntimeError)):
        ms.from_dlpack(src)
    assert ms.from_dlpack(src.detach()).tolist() == [1.0, 1.0]


def test_from_dlpack_rejects_non_dlpack_objects():
    with pytest.raises(TypeError, match=r"__dlpack__.*got list"):
        ms.from_dlpack([1.0, 2.0])


def test_from_dlpack_rejects_unsupported_dtypes():
    """Regression: from_dlpack used to wrap dtypes the Tensor constructor refuses."""
    with pytest.raises(TypeError, match="dtype uint16, which is not supported"):
        ms.from_dlpack(np.zeros(2, np.uint16))
    with pytest.raises(TypeError, match="dtype complex128, which is not supported"):
        ms.from_dlpack(np.zeros(2, np.complex128))


def test_virtual_gpu_tensors_export_host_memory(virtual_gpu):
    t = Tensor(np.ones(3, np.float32), device="GPU")
    assert t.__dlpack_device__() == (1, 0)      # the virtual GPU is host memory underneath
    assert np.from_dlpack(t).sum() == 3.0


@pytest.mark.gpu
def test_cupy_round_trips():
    cupy = pytest.importorskip("cupy")
    t = Tensor(np.arange(4.0, dtype=np.float32), device="GPU")
    assert t.__dlpack_device__()[0] == 2           # kDLCUDA
    c = cupy.from_dlpack(t)
    c[0] = 42.0
    assert t.asnumpy()[0] == 42.0
    src = cupy.arange(3, dtype=cupy.float64)
    m = ms.from_dlpack(src)
    assert m.device == "GPU" and m.dtype == np.float64
    src[1] = -1.0
    assert m.asnumpy()[1] == -1.0
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        tt = torch.from_dlpack(t)
        tt[1] = 9.0
        assert t.asnumpy()[1] == 9.0
