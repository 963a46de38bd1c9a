"""Gradient-compression kernels (what ``DistOpt``'s sparse and fp16 options run on): top-K and
threshold selection by magnitude, and fp16 pack/unpack with a scale. The C++ versions equal
their NumPy twins bit for bit (F16C and portable converters both), and the twins equal naive
formulas.

The fixtures ``cpp`` (skips when the extension was not built) and ``impl`` are
``test_kernels``'s, registered here under the same names.
"""
import numpy as np
import pytest

import test_kernels
from minitorch_dist.kernels import reference as ref
from test_kernels import FLOATS, rng

cpp = test_kernels.cpp
impl = test_kernels.impl


# --- gradient sparsification ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("k", [0, 1, 17, 999, 1000])
def test_cpp_topk_equals_reference_and_full_sort(cpp, dtype, k):
    flat = rng(50).standard_normal(1000).astype(dtype)
    got = cpp.topk_abs(flat, k)
    assert got.dtype == np.int64 and got.shape == (k,)
    np.testing.assert_array_equal(got, ref.topk_abs(flat, k))
    np.testing.assert_array_equal(got, np.sort(np.argsort(-np.abs(flat), kind="stable")[:k]))


@pytest.mark.parametrize("dtype", FLOATS)
def test_topk_when_a_strided_sample_misjudges_the_data(impl, dtype):
    """The C++ top-k estimates its cut-off from x[s * n // 4096]; data that hides its large
    values between those positions (or puts them all there) must still give the exact answer."""
    n = 100_000
    sampled = np.arange(4096) * n // 4096
    r = rng(52)
    hidden = r.uniform(1.0, 2.0, n).astype(dtype)      # large values everywhere but the sample
    hidden[sampled] = 0.0
    flooded = r.uniform(0.0, 1.0, n).astype(dtype)      # only the sample is large
    flooded[sampled] = r.uniform(1000.0, 2000.0, sampled.size)
    for flat, k in ((hidden, 50), (hidden, 3000), (flooded, 5000)):
        expected = np.sort(np.argsort(-np.abs(flat), kind="stable")[:k])
        np.testing.assert_array_equal(impl.topk_abs(flat, k), expected)


def test_topk_with_ties_and_nan(impl):
    flat = np.array([1.0, -2.0, 2.0, 0.5, -2.0, 2.0, 3.0])
    got = impl.topk_abs(flat, 3)
    assert got.tolist() == sorted(set(got.tolist())) and 6 in got
    assert np.abs(flat[got]).min() >= np.abs(np.delete(flat, got)).max()
    assert impl.topk_abs(np.array([0.1, np.nan, -5.0]), 1).tolist() == [1]


def test_topk_bad_k(impl):
    flat = np.ones(5, np.float32)
    for bad in (6, -1, 2.5):
        with pytest.raises(ValueError, match="must be an integer between 0 and the size 5"):
            impl.topk_abs(flat, bad)
    with pytest.raises(ValueError, match=r"1-D array, got shape \(5, 1\)"):
        impl.topk_abs(flat.reshape(5, 1), 1)


@pytest.mark.parametrize("dtype", FLOATS)
def test_threshold_abs(impl, dtype):
    flat = rng(51).standard_normal(500).astype(dtype)
    flat[7] = 1.5                                     # exactly at the threshold: included
    got = impl.threshold_abs(flat, 1.5)
    assert got.dtype == np.int64 and 7 in got
    np.testing.assert_array_equal(got, [i for i, x in enumerate(flat) if abs(x) >= dtype(1.5)])
    np.testing.assert_array_equal(got, ref.threshold_abs(flat, 1.5))
    assert impl.threshold_abs(flat, 1e9).shape == (0,)


# --- fp16 transport ---------------------------------------------------------------------------

def assert_same_halves(a, b):
    """Bit-identical float16 arrays, except that any NaN matches any NaN."""
    nan = np.isnan(a)
    np.testing.assert_array_equal(nan, np.isnan(b))
    np.testing.assert_array_equal(a.view(np.uint16)[~nan], b.view(np.uint16)[~nan])


@pytest.fixture(params=["f16c", "portable"])
def cpp_fp16(request, cpp):
    """The C++ wrappers with the hardware fp16 converters on, then off (portable bit code)."""
    from minitorch_dist import _C
    if request.param == "f16c" and not _C.HAVE_F16C:
        pytest.skip("this CPU has no F16C")
    previous = _C._set_use_f16c(request.param == "f16c")
    yield cpp
    _C._set_use_f16c(previous)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("scale", [1.0, 1 / 3])
def test_cpp_fp16_pack_is_bit_identical_to_numpy(cpp_fp16, scale):
    cpp = cpp_fp16
    bits = rng(60).integers(0, 2 ** 32, 200_003, dtype=np.uint64).astype(np.uint32)
    x32 = bits.view(np.float32)                       # every exponent, subnormals, inf, NaN
    assert_same_halves(cpp.fp16_pack(x32, scale), ref.fp16_pack(x32, scale))
    # values near every half-precision rounding boundary (ties included), in float64
    halves = np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
    finite = halves[np.isfinite(halves)].astype(np.float64)
    mids = (finite[:-1] + finite[1:]) / 2
    x64 = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
                          [65504.0, 65519.99, 65520.0, 1e300, 2.0 ** -25, 2.0 ** -26, -0.0]])
    assert_same_halves(cpp.fp16_pack(x64, scale), ref.fp16_pack(x64, scale))
    x32 = x64.astype(np.float32)                      # the ties are exact in float32 too
    assert_same_halves(cpp.fp16_pack(x32, scale), ref.fp16_pack(x32, scale))
    assert_same_halves(ref.fp16_pack(x64), x64.astype(np.float16))


def test_reference_fp16_unpack_every_half():
    assert_unpacks_every_half(ref)


def test_cpp_fp16_unpack_every_half(cpp_fp16):
    assert_unpacks_every_half(cpp_fp16)


def assert_unpacks_every_half(impl):
    halves = np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
    np.testing.assert_array_equal(impl.fp16_unpack(halves), halves.astype(np.float32))
    scaled = impl.fp16_unpack(halves, scale=4.0)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(scaled, halves.astype(np.float32) / np.float32(4.0))


def test_fp16_round_trip_with_out_arrays(impl):
    x = rng(61).standard_normal((3, 50)).astype(np.float32)
    packed = np.empty((3, 50), np.float16)
    assert impl.fp16_pack(x, 8.0, out=packed) is packed
    back = np.empty((3, 50), np.float32)
    assert impl.fp16_unpack(packed, 8.0, out=back) is back
    np.testing.assert_allclose(back, x, rtol=1e-3, atol=1e-4)
    np.testing.assert_array_equal(impl.fp16_pack(x[:, ::2]), x[:, ::2].astype(np.float16))
    with pytest.raises(TypeError, match="h must be float16, got float32"):
        impl.fp16_unpack(x)
    with pytest.raises(ValueError, match="scale must be non-zero"):
        impl.fp16_unpack(packed, 0.0)
    with pytest.raises(ValueError, match=r"C-contiguous float16 array of shape \(3, 50\)"):
        impl.fp16_pack(x, out=np.empty(150, np.float16))

