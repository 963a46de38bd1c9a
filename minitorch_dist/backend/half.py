"""float16 compute on the host: widen to float32, compute, round once to float16.

NumPy has no float16 BLAS: ``np.matmul`` on float16 arrays runs a plain loop about 150x
slower than float32's ``sgemm``, and its float16 ufunc loops convert every element on its
own. CPU frameworks (PyTorch, oneDNN, XLA) compute a float16 product with float32
accumulation and round the result once to float16. The host primitives do the same through
:func:`widen` and :func:`narrow`: the float16 operands are converted to float32, the
float32 kernel runs, and the result is rounded to float16 (round to nearest even, NumPy's
``astype``). Results therefore equal a float32-accumulated reference rounded to float16,
bit for bit (:func:`reference_matmul`).

The conversions use the F16C instructions of the C++ kernels (``kernels.fp16_pack`` /
``fp16_unpack``, bit-identical to ``astype``) when the array is contiguous, else ``astype``.
Only the host (NumPy) takes this path: CuPy's float16 products already run on the GPU's
float16 units with float32 accumulation. One case rounds twice: when a BatchMatMul operand
was broadcast over batch axes, the autograd engine sums its (already rounded) float16
gradient over those axes.
"""
import numpy as np

__all__ = ["is_host_half", "widen", "narrow", "convert", "elementwise", "reference_matmul",
           "run_in_float32"]

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_MIN_KERNEL_SIZE = 4096          # below this, astype's fixed cost is lower than the wrapper's


def _kernels():
    global _KERNELS
    if _KERNELS is False:
        try:
            from .. import kernels
            _KERNELS = kernels if kernels.HAVE_CPP else None
        except ImportError:
            _KERNELS = None
    return _KERNELS


_KERNELS = False


def is_host_half(xp, *arrays):
    """True when every array is float16 and ``xp`` is NumPy (the widen-compute-narrow case).

    >>> import numpy as np
    >>> is_host_half(np, np.zeros(2, np.float16), np.zeros(2, np.float16))
    True
    >>> is_host_half(np, np.zeros(2, np.float16), np.zeros(2, np.float32))
    False
    """
    if xp is not np:
        return False
    for a in arrays:        # a loop, not all(generator): asked on every element-wise call
        if a.dtype != _F16:
            return False
    return True


def _dense_order(a):
    """Axis order that makes ``a`` C-contiguous (e.g. (0, 2, 3, 1) for a channels-last NCHW
    view), or None when its elements do not fill one block of memory."""
    if a.flags.c_contiguous:
        return tuple(range(a.ndim))
    order = tuple(sorted(range(a.ndim), key=lambda axis: -abs(a.strides[axis])))
    return order if a.transpose(order).flags.c_contiguous else None


def _convert(a, kernel, dtype):
    """``a`` converted by ``kernel`` in its own memory order, or by ``astype`` (same bits;
    a value beyond float16's range becomes inf either way, without NumPy's warning, which
    the kernel path never gives: the callers that must not overflow check for inf)."""
    order = _dense_order(a) if kernel is not None and a.size >= _MIN_KERNEL_SIZE else None
    if order is None:
        with np.errstate(over="ignore"):
            return a.astype(dtype)
    out = kernel(a.transpose(order))
    return out.transpose(sorted(range(a.ndim), key=order.__getitem__))


def widen(a):
    """``a`` (float16) as float32, in ``a``'s memory layout: exact, a change of representation.

    >>> widen(np.array([1.5, -2.0], np.float16)).tolist()
    [1.5, -2.0]
    """
    kernels = _kernels()
    return _convert(a, kernels and kernels.fp16_unpack, _F32)


def narrow(a):
    """``a`` (float32) rounded once to float16 (nearest even, as ``astype``); keeps its layout.

    >>> narrow(np.array([1.0 + 2.0 ** -11, 70000.0], np.float32)).tolist()
    [1.0, inf]
    """
    kernels = _kernels()
    return _convert(a, kernels and a.dtype == _F32 and kernels.fp16_pack or None, _F16)


def convert(a, dtype):
    """``a.astype(dtype, copy=False)``, through the F16C kernels for float32 <-> float16 on
    the host (same bits; NumPy's own conversion loop is about 30x slower). Model-zoo
    networks cast every layer's input and weights to float16 and back, so ``Cast`` and the
    engine's cast of a gradient to its input's dtype take this path.

    >>> convert(np.array([1.0, 2.5], np.float32), np.float16).dtype
    dtype('float16')
    """
    dtype = np.dtype(dtype)
    if type(a) is np.ndarray and a.dtype != dtype:
        if a.dtype == _F32 and dtype == _F16:
            return narrow(a)
        if a.dtype == _F16 and dtype == _F32:
            return widen(a)
    return a.astype(dtype, copy=False)


def elementwise(fn, *arrays):
    """``fn(*arrays)``; when they are host float16 arrays, computed on float32 copies and
    rounded once to float16. For one arithmetic operation these are NumPy's own float16
    bits (its float16 loops convert each element to float32, compute and round), 10-30x
    faster; a reduction accumulates in float32, as CPU frameworks do.

    >>> a = np.array([1.0, 2.0], np.float16)
    >>> elementwise(lambda x, y: x + y, a, a).tolist(), elementwise(np.add, a, a).dtype
    ([2.0, 4.0], dtype('float16'))
    """
    for a in arrays:        # a loop, not all(generator): asked on every element-wise call
        if type(a) is not np.ndarray or a.dtype != _F16:
            return fn(*arrays)
    if max(a.size for a in arrays) < _MIN_KERNEL_SIZE:
        return fn(*arrays)
    out = fn(*(widen(a) for a in arrays))
    return narrow(np.ascontiguousarray(out)) if out.dtype == _F32 else out


def reference_matmul(a, b):
    """The float16 product's reference: float32 accumulation (NumPy), rounded once.

    >>> a = np.full((1, 4096), 1.0, np.float16); b = np.full((4096, 1), 1.0, np.float16)
    >>> float(reference_matmul(a, b)[0, 0])      # float16 accumulation would stop at 2048
    4096.0
    """
    return np.matmul(np.asarray(a, np.float32), np.asarray(b, np.float32)).astype(np.float16)


def run_in_float32(fn, *arrays, write_back=(0,)):
    """Call ``fn`` on float32 copies of float16 host arrays; round the results back once.

    For in-place elementwise updates (optimizer steps) on float16 parameters: NumPy's float16
    loops convert each element on its own and run 20-30x slower than float32's. ``fn``
    receives the arrays widened to float32 (arrays of other dtypes unchanged), and the
    positions in ``write_back`` are copied back into the caller's arrays, each rounded once
    to float16 (so a multi-operation update rounds once, not after every operation).
    Returns ``fn``'s result.

    >>> p = np.array([1.0, 2.0], np.float16); g = np.array([0.5, 0.25], np.float16)
    >>> def sgd(p32, g32):
    ...     p32 -= 0.1 * g32
    >>> run_in_float32(sgd, p, g)
    >>> p.tolist()
    [0.9501953125, 1.974609375]
    """
    wide = [widen(a) if a.dtype == _F16 else a for a in arrays]
    result = fn(*wide)
    for index in write_back:
        if arrays[index].dtype == _F16:
            np.copyto(arrays[index], narrow(wide[index]))
    return result
