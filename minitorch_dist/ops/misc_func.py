"""The rest of MindSpore's functional list: comparison aliases (``ge``, ``gt``, ...),
``isclose``, sums of several tensors (``addn``), ``lerp``/``addcmul``/``addcdiv``, gradient
clipping, parameter updates (``assign``, ``scatter_*``), window functions, the functional
transforms (``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``vmap``) and the functions this
framework refuses with a clear error (``deformable_conv2d``, sparse CSR/COO, ...).

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> ops.addn([ms.Tensor([1.0]), ms.Tensor([2.0])]).asnumpy().tolist()
[3.0]
>>> ops.jacrev(lambda x: x * x)(ms.Tensor([1.0, 2.0])).asnumpy().tolist()
[[2.0, 0.0], [0.0, 4.0]]
"""
import numpy as np

from ..gradients import grad as _grad
from ..tensor import Tensor
from .array_func import _F, _constant, _host

__all__ = ["ge", "gt", "le", "lt", "ne", "eq", "isclose", "allclose",
           "approximate_equal", "same_type_shape", "is_tensor", "is_floating_point",
           "is_complex", "numel", "addn", "accumulate_n", "lerp", "addcmul", "addcdiv", "addmm",
           "addmv", "addbmm", "baddbmm", "mv", "clip_by_global_norm", "clip_by_norm", "assign",
           "assign_add", "assign_sub", "scatter_update", "scatter_add", "scatter_sub",
           "scatter_mul", "scatter_div", "scatter_max", "scatter_min", "scatter_nd_add",
           "scatter_nd_sub", "scatter_nd_mul", "scatter_nd_div", "scatter_nd_max",
           "scatter_nd_min", "scatter_nd_update", "blackman_window", "hamming_window",
           "hann_window", "bartlett_window", "kaiser_window", "vjp", "jvp", "jacrev", "jacfwd",
           "vmap", "print_", "deformable_conv2d", "ctc_greedy_decoder",
           "crop_and_resize", "grid_sample", "affine_grid", "col2im", "uniform_candidate_sampler",
           "dense_to_sparse_coo", "dense_to_sparse_csr", "csr_add", "csr_softmax", "csr_to_coo",
           "sparse_add", "sparse_segment_mean", "derivative", "jet", "unique_with_pad",
           "conv3d", "avg_pool3d", "max_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
           "ctc_loss"]


# ---- comparisons ------------------------------------------------------------------------
def ge(x, y): return _F().greater_equal(x, y)
def gt(x, y): return _F().greater(x, y)
def le(x, y): return _F().less_equal(x, y)
def lt(x, y): return _F().less(x, y)
def ne(x, y): return _F().not_equal(x, y)
def eq(x, y): return _F().equal(x, y)


greater_ = gt
equal_ = eq


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):   # noqa: A002
    return _constant(np.isclose(_host(input), _host(other), rtol, atol, equal_nan), input)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):   # noqa: A002
    return bool(np.allclose(_host(input), _host(other), rtol, atol, equal_nan))


def approximate_equal(x, y, tolerance=1e-5):
    return _constant(np.abs(_host(x) - _host(y)) < tolerance, x)


def same_type_shape(input_x, input_y):   # noqa: A002
    if input_x.dtype != input_y.dtype or input_x.shape != input_y.shape:
        raise TypeError(f"same_type_shape: {input_x.dtype}{list(input_x.shape)} and "
                        f"{input_y.dtype}{list(input_y.shape)} differ")
    return input_x


def is_tensor(obj):
    return isinstance(obj, Tensor)


def is_floating_point(input):   # noqa: A002
    return input.dtype.kind == "f"


def is_complex(input):   # noqa: A002
    return input.dtype.kind == "c"


def numel(input):   # noqa: A002
    return input.size


def square_(x):
    return x * x


# ---- sums and blends --------------------------------------------------------------------
def addn(x):
    if not isinstance(x, (tuple, list)) or not x:
        raise TypeError("addn: expected a non-empty tuple or list of tensors")
    out = x[0]
    for t in x[1:]:
        out = out + t
    return out


accumulate_n = addn


def lerp(input, end, weight):   # noqa: A002
    return input + weight * (end - input)


def addcmul(input, tensor1, tensor2, value=1):   # noqa: A002
    return input + value * tensor1 * tensor2


def addcdiv(input, tensor1, tensor2, value=1):   # noqa: A002
    return input + value * tensor1 / tensor2


def addmm(input, mat1, mat2, *, beta=1, alpha=1):   # noqa: A002
    return beta * input + alpha * _F().matmul(mat1, mat2)


def addmv(input, mat, vec, *, beta=1, alpha=1):   # noqa: A002
    return beta * input + alpha * _F().matmul(mat, vec)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):   # noqa: A002
    return beta * input + alpha * _F().sum(_F().matmul(batch1, batch2), 0)


def baddbmm(input, batch1, batch2, beta=1, alpha=1):   # noqa: A002
    return beta * input + alpha * _F().matmul(batch1, batch2)


def mv(mat, vec):
    return _F().matmul(mat, vec)


# ---- clipping ---------------------------------------------------------------------------
def clip_by_global_norm(x, clip_norm=1.0, use_norm=None):
    """Scale every tensor of ``x`` by ``clip_norm / max(global_norm, clip_norm)``."""
    tensors = tuple(x)
    total = use_norm if use_norm is not None else _F().sqrt(addn([_F().sum(t * t) for t in tensors]))
    scale = clip_norm / _F().maximum(total, clip_norm)
    return tuple(t * scale for t in tensors)


def clip_by_norm(x, max_norm, norm_type=2.0, error_if_nonfinite=False):
    tensors = (x,) if isinstance(x, Tensor) else tuple(x)
    total = _F().vector_norm(_F().stack([_F().vector_norm(t, norm_type) for t in tensors]), norm_type)
    scale = _F().clamp(max_norm / (total + 1e-6), None, 1.0)
    out = tuple(t * scale for t in tensors)
    return out[0] if isinstance(x, Tensor) else out


# ---- parameter updates (in place, like MindSpore's Assign family) ------------------------
def _write(variable, values):
    if not isinstance(variable, Tensor):
        raise TypeError(f"expected a Parameter or Tensor to update, got {type(variable).__name__}")
    variable.set_data(Tensor(np.asarray(values, dtype=variable.dtype)))
    return variable


def assign(variable, value):
    return _write(variable, _host(value) if isinstance(value, Tensor) else value)


def assign_add(variable, value):
    return _write(variable, _host(variable) + _host(value))


def assign_sub(variable, value):
    return _write(variable, _host(variable) - _host(value))


def _scatter(op, input_x, indices, updates):
    data, idx, upd = _host(input_x), _host(indices), _host(updates)
    if op is None:
        data[idx] = upd
    else:
        op.at(data, idx, upd)
    return _write(input_x, data)


def scatter_update(input_x, indices, updates): return _scatter(None, input_x, indices, updates)   # noqa: A002
def scatter_add(input_x, indices, updates): return _scatter(np.add, input_x, indices, updates)   # noqa: A002
def scatter_sub(input_x, indices, updates): return _scatter(np.subtract, input_x, indices, updates)   # noqa: A002
def scatter_mul(input_x, indices, updates): return _scatter(np.multiply, input_x, indices, updates)   # noqa: A002
def scatter_div(input_x, indices, updates): return _scatter(np.divide, input_x, indices, updates)   # noqa: A002
def scatter_max(input_x, indices, updates): return _scatter(np.maximum, input_x, indices, updates)   # noqa: A002
def scatter_min(input_x, indices, updates): return _scatter(np.minimum, input_x, indices, updates)   # noqa: A002


def _scatter_nd(op, input_x, indices, updates):
    where = tuple(np.moveaxis(_host(indices), -1, 0))
    data, upd = _host(input_x), _host(updates)
    if op is None:
        data[where] = upd
    else:
        op.at(data, where, upd)
    return _write(input_x, data)


def scatter_nd_update(input_x, indices, updates): return _scatter_nd(None, input_x, indices, updates)   # noqa: A002
def scatter_nd_add(input_x, indices, updates): return _scatter_nd(np.add, input_x, indices, updates)   # noqa: A002
def scatter_nd_sub(input_x, indices, updates): return _scatter_nd(np.subtract, input_x, indices, updates)   # noqa: A002
def scatter_nd_mul(input_x, indices, updates): return _scatter_nd(np.multiply, input_x, indices, updates)   # noqa: A002
def scatter_nd_div(input_x, indices, updates): return _scatter_nd(np.divide, input_x, indices, updates)   # noqa: A002
def scatter_nd_max(input_x, indices, updates): return _scatter_nd(np.maximum, input_x, indices, updates)   # noqa: A002
def scatter_nd_min(input_x, indices, updates): return _scatter_nd(np.minimum, input_x, indices, updates)   # noqa: A002


# ---- windows ----------------------------------------------------------------------------
def _window(values, dtype):
    return _constant(values.astype(np.float32 if dtype is None else np.dtype(dtype)))


def _periodic(fn, n, periodic):
    return fn(n + 1)[:-1] if periodic and n > 1 else fn(n)


def blackman_window(window_length, periodic=True, *, dtype=None):
    return _window(_periodic(np.blackman, int(window_length), periodic), dtype)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None):
    def fn(n):
        return alpha - beta * np.cos(2 * np.pi * np.arange(n) / max(n - 1, 1))
    return _window(_periodic(fn, int(window_length), periodic), dtype)


def hann_window(window_length, periodic=True, *, dtype=None):
    return _window(_periodic(np.hanning, int(window_length), periodic), dtype)


def bartlett_window(window_length, periodic=True, *, dtype=None):
    return _window(_periodic(np.bartlett, int(window_length), periodic), dtype)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None):
    return _window(_periodic(lambda n: np.kaiser(n, beta), int(window_length), periodic), dtype)


# ---- functional transforms --------------------------------------------------------------
def vjp(fn, *inputs, has_aux=False):
    """``(outputs, vjp_fn)``: ``vjp_fn(v)`` gives ``v^T d fn / d inputs``."""
    outputs = fn(*inputs)
    main = outputs[0] if has_aux else outputs

    def vjp_fn(v):
        def weighted(*xs):
            out = fn(*xs)
            return _F().sum((out[0] if has_aux else out) * v)
        g = _grad(weighted, tuple(range(len(inputs))))(*inputs)
        return g if isinstance(g, tuple) else (g,)
    return (main, vjp_fn) if not has_aux else (main, vjp_fn, outputs[1])


def jacrev(fn, grad_position=0, has_aux=False):
    """The Jacobian of ``fn`` at the input ``grad_position``, one reverse pass per output."""
    def jacobian(*inputs):
        out = fn(*inputs)
        out = out[0] if has_aux else out
        rows = []
        for k in range(out.size):
            def one(*xs, k=k):
                o = fn(*xs)
                return (o[0] if has_aux else o).reshape(-1)[k]
            rows.append(_grad(one, grad_position)(*inputs))
        x = inputs[grad_position]
        return _F().stack(rows, 0).reshape(out.shape + x.shape)
    return jacobian


jacfwd = jacrev


def jvp(fn, inputs, v, has_aux=False):
    """``(fn(inputs), J v)`` from the Jacobian (fine for the small inputs it is used on)."""
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    v = (v,) if isinstance(v, Tensor) else tuple(v)
    out = fn(*inputs)
    total = None
    for pos, (x, t) in enumerate(zip(inputs, v)):
        jac = jacrev(fn, pos, has_aux)(*inputs)
        main = out[0] if has_aux else out
        part = _F().matmul(jac.reshape(main.size, x.size), t.reshape(-1)).reshape(main.shape)
        total = part if total is None else total + part
    return (out, total) if not has_aux else (out[0], total, out[1])


def vmap(fn, in_axes=0, out_axes=0):
    """Map ``fn`` over an axis of its inputs (a Python loop and a stack)."""
    def mapped(*inputs):
        axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(inputs)
        sizes = {x.shape[a] for x, a in zip(inputs, axes) if a is not None}
        if len(sizes) != 1:
            raise ValueError(f"vmap: the mapped axes must have one size, got {sorted(sizes)}")
        results = []
        for i in range(sizes.pop()):
            args = [x if a is None else _F().squeeze(_F().narrow(x, a % x.ndim, i, 1), a)
                    for x, a in zip(inputs, axes)]
            results.append(fn(*args))
        if isinstance(results[0], tuple):
            return tuple(_F().stack([r[k] for r in results], out_axes) for k in range(len(results[0])))
        return _F().stack(results, out_axes)
    return mapped


def print_(*input_x):   # noqa: A002
    print(*[str(x) for x in input_x])


def dropout_(x, p=0.5, training=True):
    return _F().dropout(x, p, training)


# ---- refused: no counterpart in this framework -------------------------------------------
def _refuse(name, why):
    def refused(*args, **kwargs):
        raise NotImplementedError(f"ops.{name} is not implemented in minitorch_dist: {why}")
    refused.__name__ = name
    refused.__doc__ = f"Refused: {why}."
    return refused


_SPARSE = "there are no COO/CSR sparse tensor types here (RowTensor covers sparse gradients)"
deformable_conv2d = _refuse("deformable_conv2d", "deformable convolution has no kernel here")
ctc_greedy_decoder = _refuse("ctc_greedy_decoder", "CTC decoding has no kernel here")
ctc_loss = _refuse("ctc_loss", "CTC loss has no kernel here")
crop_and_resize = _refuse("crop_and_resize", "bilinear crop-and-resize has no kernel here")
grid_sample = _refuse("grid_sample", "bilinear grid sampling has no kernel here")
affine_grid = _refuse("affine_grid", "grid generation for grid_sample is not provided")
col2im = _refuse("col2im", "use ops.conv2d (its im2col/col2im run inside the convolution)")
uniform_candidate_sampler = _refuse("uniform_candidate_sampler", "candidate sampling is not provided")
dense_to_sparse_coo = _refuse("dense_to_sparse_coo", _SPARSE)
dense_to_sparse_csr = _refuse("dense_to_sparse_csr", _SPARSE)
csr_add = _refuse("csr_add", _SPARSE)
csr_softmax = _refuse("csr_softmax", _SPARSE)
csr_to_coo = _refuse("csr_to_coo", _SPARSE)
sparse_add = _refuse("sparse_add", _SPARSE)
sparse_segment_mean = _refuse("sparse_segment_mean", _SPARSE)
derivative = _refuse("derivative", "higher-order forward derivatives are not provided; use ops.grad")
jet = _refuse("jet", "Taylor-mode differentiation is not provided; use ops.grad")
unique_with_pad = _refuse("unique_with_pad", "use ops.unique (this padding form is Ascend's)")
conv3d = _refuse("conv3d", "3-d convolution has no kernel here (2-d: ops.conv2d, 1-d: ops.conv1d)")
avg_pool3d = _refuse("avg_pool3d", "3-d pooling has no kernel here (2-d: ops.avg_pool2d)")
max_pool3d = _refuse("max_pool3d", "3-d pooling has no kernel here (2-d: ops.max_pool2d)")
adaptive_avg_pool3d = _refuse("adaptive_avg_pool3d", "3-d pooling has no kernel here")
adaptive_max_pool3d = _refuse("adaptive_max_pool3d", "3-d pooling has no kernel here")
