"""SINGA's shape and indexing operators (ONNX semantics): ``Shape``, ``Cast``,
``ConstantOfShape``, ``Slice``, ``Split``, ``Gather``, ``Tile``, ``NonZero``, ``OneHot``,
``Expand``, ``Pad``, ``UpSample``, ``DepthToSpace``, ``SpaceToDepth``,
``ScatterElements`` and ``Embedding``.

>>> import numpy as np
>>> from minitorch_dist.singa import autograd, tensor
>>> x = tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
>>> tensor.to_numpy(autograd.slice(x, [0], [2], [1])).tolist()
[[0.0, 1.0], [3.0, 4.0]]
"""
import numpy as np

from .ctensor import raw
from .np_ops import NumpyOp, unbroadcast

__all__ = ["OPERATORS"]


class Shape(NumpyOp):
    """SINGA's ``Shape``: the input's shape as an int32 vector (no gradient)."""

    def _forward(self, x):
        return np.asarray(x.shape, np.int32)

    def backward(self, dy):
        """SINGA's: the shape of ``dy`` as a list (nothing flows back)."""
        return list(raw(dy).shape)


class Cast(NumpyOp):
    """SINGA's ``Cast(to)``: the values converted to ``to`` (a dtype or SINGA's code)."""

    def __init__(self, to):
        super().__init__()
        from .tensor import to_dtype
        self.to = to_dtype(to, "autograd.cast")

    def _forward(self, x):
        return x.astype(self.to)


class ConstantOfShape(NumpyOp):
    """SINGA's ``ConstantOfShape(value=0)(shape_tensor)``: a float32 tensor filled with
    ``value``, of the shape the input holds."""

    def __init__(self, value=0.0):
        super().__init__()
        self.value = float(np.asarray(value).reshape(-1)[0]) if np.ndim(value) else value

    def _forward(self, x):
        shape = tuple(int(n) for n in np.asarray(x).reshape(-1))
        return np.full(shape, self.value, np.float32)


class Slice(NumpyOp):
    """SINGA's ``Slice(starts, ends, axes=None, steps=None)``."""

    def __init__(self, starts, ends, axes=None, steps=None):
        super().__init__()
        self.starts, self.ends = list(starts), list(ends)
        self.axes = list(range(len(self.starts))) if axes is None else list(axes)
        self.steps = [1] * len(self.starts) if steps is None else list(steps)

    def _index(self, ndim):
        index = [slice(None)] * ndim
        for s, e, a, st in zip(self.starts, self.ends, self.axes, self.steps):
            index[a % ndim] = slice(s, e, st)
        return tuple(index)

    def _forward(self, x):
        self.x_shape, self.dtype = x.shape, x.dtype
        return np.ascontiguousarray(x[self._index(x.ndim)])

    def _backward(self, dy):
        dx = np.zeros(self.x_shape, dy.dtype)
        dx[self._index(len(self.x_shape))] = dy
        return dx


class Split(NumpyOp):
    """SINGA's ``Split(axis, parts, num_output=None)``: pieces of sizes ``parts`` (or
    ``num_output`` equal pieces) along ``axis``."""

    def __init__(self, axis, parts, num_output=None):
        super().__init__()
        self.axis, self.parts, self.num_output = axis, parts, num_output

    def _forward(self, x):
        parts = self.parts
        if parts is None:
            size = x.shape[self.axis] // self.num_output
            parts = [size] * self.num_output
        bounds = np.cumsum(parts)[:-1].tolist()
        return tuple(np.ascontiguousarray(p) for p in np.split(x, bounds, axis=self.axis))

    def _backward(self, *dys):
        return np.concatenate(dys, axis=self.axis)


class Gather(NumpyOp):
    """SINGA's ``Gather(axis, indices)``: ``np.take(x, indices, axis)``."""

    def __init__(self, axis, indices):
        super().__init__()
        self.axis, self.indices = axis, np.asarray(raw(indices)).astype(np.int64)

    def _forward(self, x):
        self.x_shape = x.shape
        self.idx = self.indices % x.shape[self.axis]
        return np.take(x, self.idx, axis=self.axis)

    def _backward(self, dy):
        axis = self.axis % len(self.x_shape)
        dx = np.zeros(self.x_shape, dy.dtype)
        moved = np.moveaxis(dx, axis, 0)
        grads = np.moveaxis(dy, list(range(axis, axis + self.idx.ndim)),
                            list(range(self.idx.ndim)))
        np.add.at(moved, self.idx, grads)
        return dx


class Tile(NumpyOp):
    """SINGA's ``Tile(repeats)``: ``np.tile``; the gradient sums the copies."""

    def __init__(self, repeats):
        super().__init__()
        self.repeats = [repeats] if isinstance(repeats, int) else list(repeats)

    def _forward(self, x):
        self.x_shape = x.shape
        return np.tile(x, self.repeats)

    def _backward(self, dy):
        reps = [1] * (dy.ndim - len(self.repeats)) + self.repeats
        shape = (1,) * (dy.ndim - len(self.x_shape)) + tuple(self.x_shape)
        split = []
        for r, n in zip(reps, shape):
            split += [r, n]
        return dy.reshape(split).sum(axis=tuple(range(0, 2 * dy.ndim, 2))).reshape(self.x_shape)


class NonZero(NumpyOp):
    """SINGA's ``NonZero``: the indices of the non-zero values, one row per axis."""

    def _forward(self, x):
        return np.array(np.nonzero(x)).astype(np.int32)


class OneHot(NumpyOp):
    """SINGA's ``OneHot(axis, depth, values)(indices)`` (ONNX's OneHot)."""

    def __init__(self, axis, depth, values):
        super().__init__()
        self.axis, self.depth = axis, int(np.asarray(raw(depth)).reshape(-1)[0])
        self.values = np.asarray(raw(values)).reshape(-1)

    def _forward(self, indices):
        rank = indices.ndim
        axis = self.axis + rank + 1 if self.axis < 0 else self.axis
        idx = np.mod(indices.astype(np.int64), self.depth)
        hot = np.expand_dims(idx, axis) == np.arange(self.depth).reshape(
            [-1 if i == axis else 1 for i in range(rank + 1)])
        off, on = float(self.values[0]), float(self.values[1])
        return (hot * (on - off) + off).astype(np.float32)


class Expand(NumpyOp):
    """SINGA's ``Expand(shape)``: broadcast to ``shape`` (ONNX rules)."""

    def __init__(self, shape):
        super().__init__()
        self.shape = [int(n) for n in np.asarray(raw(shape)).reshape(-1)]

    def _forward(self, x):
        self.x_shape = x.shape
        target = np.broadcast_shapes(x.shape, tuple(self.shape))
        return np.ascontiguousarray(np.broadcast_to(x, target))

    def _backward(self, dy):
        return unbroadcast(dy, self.x_shape)


class Pad(NumpyOp):
    """SINGA's ``Pad(mode, pads, constant=0.)``: ONNX pads ``[begins..., ends...]``;
    mode ``constant``, ``reflect`` or ``edge``."""

    def __init__(self, mode, pads, constant=0.0):
        super().__init__()
        if mode not in ("constant", "reflect", "edge"):
            raise ValueError(f"autograd.pad: mode must be 'constant', 'reflect' or 'edge', "
                             f"got {mode!r}")
        self.mode, self.pads, self.constant = mode, list(pads), constant

    def _forward(self, x):
        n = x.ndim
        self.width = [(self.pads[i], self.pads[i + n]) for i in range(n)]
        self.x_shape = x.shape
        if self.mode == "constant":
            return np.pad(x, self.width, mode="constant", constant_values=self.constant)
        return np.pad(x, self.width, mode=self.mode)

    def _backward(self, dy):
        index = tuple(slice(b, dy.shape[i] - e) for i, (b, e) in enumerate(self.width))
        return np.ascontiguousarray(dy[index])


class UpSample(NumpyOp):
    """SINGA's ``UpSample(mode, scales)``: nearest-neighbour, integer scale per axis."""

    def __init__(self, mode, scales):
        super().__init__()
        if mode != "nearest":
            raise ValueError(f"autograd.upsample: only mode 'nearest' exists, got {mode!r}")
        self.scales = [int(s) for s in np.asarray(raw(scales)).reshape(-1)]

    def _forward(self, x):
        self.x_shape = x.shape
        for axis, s in enumerate(self.scales):
            x = np.repeat(x, s, axis=axis)
        return x

    def _backward(self, dy):
        split = []
        for n, s in zip(self.x_shape, self.scales):
            split += [n, s]
        return dy.reshape(split).sum(axis=tuple(range(1, 2 * len(self.x_shape), 2)))


def _d2s(x, b, mode):
    n, c, h, w = x.shape
    if mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(y.reshape(n, c // (b * b), h * b, w * b))


def _s2d(x, b, mode):
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b)
    y = y.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else y.transpose(0, 1, 3, 5, 2, 4)
    return np.ascontiguousarray(y.reshape(n, c * b * b, h // b, w // b))


class DepthToSpace(NumpyOp):
    """SINGA's ``DepthToSpace(blocksize, mode='DCR')`` (ONNX)."""

    def __init__(self, blocksize, mode="DCR"):
        super().__init__()
        if mode not in ("DCR", "CRD"):
            raise ValueError(f"autograd.depth_to_space: mode must be 'DCR' or 'CRD', "
                             f"got {mode!r}")
        self.blocksize, self.mode = blocksize, mode

    def _forward(self, x):
        return _d2s(x, self.blocksize, self.mode)

    def _backward(self, dy):
        return _s2d(dy, self.blocksize, self.mode)


class SpaceToDepth(DepthToSpace):
    """SINGA's ``SpaceToDepth(blocksize, mode='DCR')`` (ONNX)."""

    def _forward(self, x):
        return _s2d(x, self.blocksize, self.mode)

    def _backward(self, dy):
        return _d2s(dy, self.blocksize, self.mode)


class ScatterElements(NumpyOp):
    """SINGA's ``ScatterElements(indices, updates, axis=0)(x)`` (ONNX)."""

    def __init__(self, indices, updates, axis=0):
        super().__init__()
        self.indices = np.asarray(raw(indices)).astype(np.int64)
        self.updates = np.asarray(raw(updates))
        self.axis = axis

    def _forward(self, x):
        y = x.copy()
        idx = self.indices % x.shape[self.axis]
        np.put_along_axis(y, idx, self.updates.astype(x.dtype), axis=self.axis)
        self.idx = idx
        return y

    def _backward(self, dy):
        dx = dy.copy()
        np.put_along_axis(dx, self.idx, 0, axis=self.axis)
        return dx


class Embedding(NumpyOp):
    """SINGA's ``Embedding()(x, w)``: rows of ``w`` picked by the integer ids in ``x``."""

    def _forward(self, x, w):
        self.ids = np.asarray(x).astype(np.int64)
        self.w_shape = w.shape
        return w[self.ids]

    def _backward(self, dy):
        dw = np.zeros(self.w_shape, dy.dtype)
        np.add.at(dw, self.ids.reshape(-1), dy.reshape(-1, self.w_shape[-1]))
        return np.zeros(self.ids.shape, dy.dtype), dw


OPERATORS = {c.__name__: c for c in (
    Shape, Cast, ConstantOfShape, Slice, Split, Gather, Tile, NonZero, OneHot, Expand, Pad,
    UpSample, DepthToSpace, SpaceToDepth, ScatterElements, Embedding)}
