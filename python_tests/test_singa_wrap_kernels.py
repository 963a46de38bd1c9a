"""SINGA's low-level layer: ``singa_wrap``'s math and CPU kernels on CTensors, and ``t.data``
answering CTensor calls (issue 27, the part SINGA's test_api/test_mkldnn/test_opt use)."""
import numpy as np
import pytest

from minitorch_dist.singa import SingaNotSupported, opt, tensor
from minitorch_dist.singa import singa_wrap as singa
from minitorch_dist.singa.host_array import HostArray


def ct(values, dtype=np.float32):
    values = np.asarray(values, dtype)
    out = singa.Tensor(list(values.shape), None, singa.kInt if dtype == np.int32 else
                       singa.kFloat32)
    out.CopyFloatDataFromHostPtr(values.reshape(-1))
    return out


def as_pytensor(c):
    """What SINGA's helpers do with a CTensor result: assign it to a fresh Tensor."""
    t = tensor.Tensor()
    t.data = c
    t.shape = tuple(t.data.shape())
    t.device = t.data.device()
    t.dtype = t.data.data_type()
    return t


def test_tensor_data_answers_ctensor_calls_and_stays_the_array():
    t = tensor.Tensor((2, 3)).set_value(0.5)
    assert isinstance(t.data, HostArray) and t.data.shape() == (2, 3) == t.data.shape
    assert t.data.GetFloatValue(6).tolist() == [0.5] * 6 and t.data.Size() == 6
    assert t.data.data_type() == singa.kFloat32
    assert t.data.AsType(singa.kInt).data_type() == singa.kInt
    same = t.data
    t += 1                                  # raw in-place update keeps the array
    assert t.data is same and tensor.to_numpy(t)[0, 0] == 1.5
    assert type(tensor.to_numpy(t)) is np.ndarray and type(t.data + 1) is np.ndarray
    result = t * 2                          # a recorded result answers the calls too
    assert result.data.GetFloatValue(1).tolist() == [3.0]
    with pytest.raises(SingaNotSupported, match="CTensor.ToType"):
        t.data.ToType(singa.kInt)


def test_assigning_a_ctensor_to_data_and_refusing_disagreeing_shape_or_dtype():
    t = as_pytensor(ct([[1, 2, 3], [4, 5, 6]]))
    assert t.shape == (2, 3) and tensor.to_numpy(t).sum() == 21
    with pytest.raises(ValueError, match="Tensor.shape: the shape follows the data"):
        t.shape = (3, 2)
    with pytest.raises(ValueError, match="Tensor.dtype: the dtype follows the data"):
        t.dtype = tensor.int32


def test_elementwise_and_broadcast_arithmetic():
    x = np.array([[0.4, -1.5], [2.5, 3.7]], np.float32)
    assert singa.Round(ct(x)).GetFloatValue(4).tolist() == [0.0, -2.0, 3.0, 4.0]
    assert singa.RoundE(ct(x)).GetFloatValue(4).tolist() == [0.0, -2.0, 2.0, 4.0]
    assert singa.Ceil(ct(x)).GetFloatValue(2).tolist() == [1.0, -1.0]
    assert singa.Floor(ct(x)).GetFloatValue(2).tolist() == [0.0, -2.0]
    np.testing.assert_allclose(singa.Erf(ct([0.5])).GetFloatValue(1), [0.5204999], rtol=1e-6)
    a = np.arange(6, dtype=np.float32).reshape(3, 1, 2) + 1
    b = np.array([2.0, 4.0], np.float32)
    for fn, ref in ((singa.Pow, np.power), (singa.__add__, np.add), (singa.__sub__, np.subtract),
                    (singa.__mul__, np.multiply), (singa.__div__, np.divide)):
        out = fn(ct(a), tensor.from_numpy(b).data)          # t.data works as an argument
        np.testing.assert_allclose(np.asarray(out), ref(a, b), rtol=1e-6)
    assert singa.__lt__(ct([1, 3]), ct([2, 2])).GetFloatValue(2).tolist() == [1.0, 0.0]
    assert singa.GTFloat(ct([1, 3]), 2).GetFloatValue(2).tolist() == [0.0, 1.0]


def test_softmax_flattens_at_the_axis():
    x = np.random.default_rng(0).random((2, 3, 2)).astype(np.float32)
    for axis, rows in ((0, 1), (1, 2), (2, 6), (-1, 6), (-3, 1)):
        flat = x.reshape(rows, -1)
        ref = np.exp(flat) / np.exp(flat).sum(axis=1, keepdims=True)
        got = tensor._call_singa_func(singa.SoftMax, tensor.from_numpy(x).data, axis)
        np.testing.assert_allclose(tensor.to_numpy(got), ref.reshape(x.shape), rtol=1e-5)


def test_reshape_concat_and_astype():
    vec = singa.VecTensor()
    vec.append(ct(np.ones((1, 2))))
    vec.append(ct(np.zeros((2, 2))))
    assert singa.ConcatOn(vec, 0).shape() == (3, 2)
    t = singa.Reshape(ct(np.arange(6), np.int32), [3, 2])
    assert t.shape() == (3, 2) and t.data_type() == singa.kInt
    assert t.AsType(singa.kFloat32).GetFloatValue(6).tolist() == [0, 1, 2, 3, 4, 5]


def _conv_reference(x, w, b, stride, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _, h, wd = x.shape
    o, _, k, _ = w.shape
    oh, ow = (h - k) // stride + 1, (wd - k) // stride + 1
    y = np.zeros((n, o, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + k, j * stride:j * stride + k]
            y[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3])) + b
    return y


def test_cpu_convolution_forward_and_backward():
    rng = np.random.default_rng(1)
    x = rng.random((2, 2, 5, 5)).astype(np.float32)
    w = rng.random((3, 2, 3, 3)).astype(np.float32)
    b = np.array([0.1, 0.2, 0.3], np.float32)
    handle = singa.ConvHandle(ct(x), (3, 3), (2, 2), (1, 1), 2, 3, True, 1)
    y = singa.CpuConvForward(ct(x), ct(w), ct(b), handle)
    np.testing.assert_allclose(np.asarray(y), _conv_reference(x, w, b, 2, 1), rtol=1e-5)
    dy = np.ones(y.shape(), np.float32)
    eps, (n, c, i, j) = 1e-2, (1, 1, 2, 3)       # central difference of sum(y) in x[n,c,i,j]
    bumped = [x.copy(), x.copy()]
    bumped[0][n, c, i, j] += eps
    bumped[1][n, c, i, j] -= eps
    numeric = (_conv_reference(bumped[0], w, b, 2, 1).sum() -
               _conv_reference(bumped[1], w, b, 2, 1).sum()) / (2 * eps)
    dx = np.asarray(singa.CpuConvBackwardx(ct(dy), ct(w), ct(x), handle))
    assert dx.shape == x.shape and abs(dx[n, c, i, j] - numeric) < 1e-2
    assert singa.CpuConvBackwardW(ct(dy), ct(x), ct(w), handle).shape() == w.shape
    assert np.asarray(singa.CpuConvBackwardb(ct(dy), ct(b), handle)).tolist() == [18.0] * 3   # 2 images x 3x3 outputs


def test_cpu_pooling_forward_and_backward():
    x = ct(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    for is_max, first in ((True, 5.0), (False, 2.5)):
        handle = singa.PoolingHandle(x, [2, 2], [2, 2], [0, 0], is_max)
        y = singa.CpuPoolingForward(handle, x)
        assert y.shape() == (1, 1, 2, 2) and y.GetFloatValue(1)[0] == first
        dx = singa.CpuPoolingBackward(handle, ct(np.ones((1, 1, 2, 2))), x, y)
        assert float(np.asarray(dx).sum()) == 4.0


def test_cpu_batchnorm_training_inference_and_backward():
    x = np.array([[1, 2], [3, 6]], np.float32)
    rm, rv = ct([0.0, 0.0]), ct([1.0, 1.0])
    handle = singa.BatchNormHandle(0.5, ct(x))
    y, mean, var = singa.CpuBatchNormForwardTraining(handle, ct(x), ct([1, 1]), ct([0, 0]), rm,
                                                     rv)
    assert np.asarray(mean).tolist() == [2.0, 4.0] and np.asarray(var).tolist() == [1.0, 4.0]
    np.testing.assert_allclose(np.asarray(y), [[-1, -1], [1, 1]], atol=1e-4)
    # the handle's factor weighs the batch; the running variance is unbiased
    assert np.asarray(rm).tolist() == [1.0, 2.0] and np.asarray(rv).tolist() == [1.5, 4.5]
    inferred = singa.CpuBatchNormForwardInference(handle, ct(x), ct([1, 1]), ct([0, 0]),
                                                  ct([1, 2]), ct([4, 16]))
    np.testing.assert_allclose(np.asarray(inferred), [[0, 0], [1, 1]], atol=1e-5)
    dx, dscale, dbias = singa.CpuBatchNormBackwardx(handle, y, ct(np.ones((2, 2))), ct(x),
                                                    ct([1, 1]), ct([0, 0]), mean, var)
    np.testing.assert_allclose(np.asarray(dx), 0, atol=1e-5)      # a constant dy: no dx
    assert np.asarray(dbias).tolist() == [2.0, 2.0] and dscale.shape() == (2,)


def test_optimizer_states_checked_through_data():
    w = tensor.Tensor((2, 3)).set_value(0.1)
    g = tensor.Tensor((2, 3)).set_value(0.1)
    expected = w - 0.1 * g
    opt.SGD(lr=0.1).apply(w.name, w, g)
    np.testing.assert_allclose(w.data.GetFloatValue(6), expected.data.GetFloatValue(6))


def test_gpu_only_internals_are_refused_by_name():
    with pytest.raises(SingaNotSupported, match="singa_wrap.GpuConvForward"):
        singa.GpuConvForward
    with pytest.raises(TypeError, match="singa_wrap.CpuPoolingForward: expected a "
                                        "singa_wrap.PoolingHandle"):
        singa.CpuPoolingForward(None, ct([1.0]))
