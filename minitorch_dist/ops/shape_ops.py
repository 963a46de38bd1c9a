"""Shape primitives: reshape, transpose, squeeze, expand_dims, broadcast, concat, stack, split.

Reshape-like primitives return views of their input where the array module allows it (they
sit in the hot path of every CNN step), so their cost does not depend on the tensor size.
Their outputs share memory with the input: no primitive may write into an input array.
Settings given to a constructor (``ops.Squeeze(axis)``) travel to ``forward`` as keyword
attributes, so the functional forms can share one instance per primitive.
"""
import math

from .axes import normalize_axis
from .primitive import Primitive

__all__ = ["Reshape", "Transpose", "Squeeze", "ExpandDims", "BroadcastTo", "Concat", "Stack",
           "Split", "Flatten",
           "reshape", "transpose", "squeeze", "expand_dims", "broadcast_to", "concat", "stack",
           "split", "flatten"]


def _as_tuple(value):
    """An int or a sequence of ints as a tuple of ints."""
    if isinstance(value, tuple):
        return value
    if hasattr(value, "__index__"):
        return (int(value),)
    return tuple(int(v) for v in value)


def _tensors(args):
    """``op((a, b))`` and ``op(a, b)`` both mean the inputs ``a, b``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return args


class _ViewOfInput(Primitive):
    """A primitive whose output holds the input's elements in the same order: the gradient
    is the output gradient reshaped back to the input's shape."""

    def backward(self, ctx, g):
        return (g.reshape(ctx.in_shape),)


class Reshape(_ViewOfInput):
    """The same elements in a new shape; one dimension may be -1 (inferred).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.Reshape()(ms.Tensor([1.0, 2.0, 3.0, 4.0]), (2, -1)).shape
    (2, 2)
    """

    def __call__(self, x, shape):
        return self.apply(x, shape=_as_tuple(shape))

    def forward(self, ctx, x, shape):
        ctx.in_shape = x.shape
        try:
            return x.reshape(shape)
        except ValueError as err:
            raise ValueError(f"{self.name}: cannot reshape a tensor of shape {x.shape} ({x.size} elements) "
                             f"into shape {shape}: {err}") from None


class Flatten(_ViewOfInput):
    """Keep axis 0 and merge the others: shape ``(N, ...)`` becomes ``(N, -1)``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.Flatten()(ms.Tensor([[[1.0], [2.0]]])).shape
    (1, 2)
    """

    def forward(self, ctx, x):
        if x.ndim == 0:
            raise ValueError(f"{self.name} needs a tensor with at least one axis, got a scalar")
        ctx.in_shape = x.shape
        return x.reshape(x.shape[0], math.prod(x.shape[1:]))


class Transpose(Primitive):
    """Permute the axes: output axis ``i`` is input axis ``perm[i]``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.Transpose()(ms.Tensor([[1.0, 2.0, 3.0]]), (1, 0)).shape
    (3, 1)
    """

    def __call__(self, x, perm=None):
        return self.apply(x, perm=None if perm is None else _as_tuple(perm))

    def forward(self, ctx, x, perm):
        if perm is None:
            perm = tuple(range(x.ndim - 1, -1, -1))
        if len(perm) != x.ndim:
            raise ValueError(f"{self.name}: perm {perm} has {len(perm)} entries for a tensor of shape "
                             f"{x.shape} with {x.ndim} axes")
        try:
            out = x.transpose(perm)
        except ValueError:
            raise ValueError(f"{self.name}: perm {perm} is not a permutation of the axes of a tensor "
                             f"of shape {x.shape}") from None
        ctx.perm = perm
        return out

    def backward(self, ctx, g):
        perm = ctx.perm
        inverse = [0] * len(perm)
        for out_axis, in_axis in enumerate(perm):
            inverse[in_axis % len(perm)] = out_axis
        return (g.transpose(inverse),)


class Squeeze(_ViewOfInput):
    """Remove size-1 axes: those listed in ``axis``, or all of them when ``axis=()``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.Squeeze(0)(ms.Tensor([[1.0, 2.0]])).shape
    (2,)
    """

    def __init__(self, axis=()):
        self.axis = () if axis is None else _as_tuple(axis)

    def __call__(self, x):
        return self.apply(x, axis=self.axis)

    def forward(self, ctx, x, axis):
        shape = x.shape
        ctx.in_shape = shape
        if not axis:
            return x.reshape(tuple(n for n in shape if n != 1))
        drop = set()
        for a in axis:
            a = normalize_axis(a, x.ndim, self.name, shape)
            if shape[a] != 1:
                raise ValueError(f"{self.name}: cannot squeeze axis {a} of size {shape[a]} in a tensor "
                                 f"of shape {shape}; only size-1 axes can be removed")
            drop.add(a)
        return x.reshape(tuple(n for i, n in enumerate(shape) if i not in drop))


class ExpandDims(_ViewOfInput):
    """Insert a size-1 axis at position ``axis`` (negative counts from the end of the result).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.ExpandDims()(ms.Tensor([1.0, 2.0]), -1).shape
    (2, 1)
    """

    def __call__(self, x, axis):
        return self.apply(x, axis=int(axis))

    def forward(self, ctx, x, axis):
        shape = x.shape
        ctx.in_shape = shape
        a = normalize_axis(axis, x.ndim + 1, self.name, shape)
        return x.reshape(shape[:a] + (1,) + shape[a:])


class BroadcastTo(Primitive):
    """Broadcast to ``shape`` with NumPy's rules; -1 in ``shape`` keeps the input's size.

    The output is a read-only view; backward returns the output-shaped gradient and the
    engine sums it down to the input's shape.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.BroadcastTo((2, -1))(ms.Tensor([1.0, 2.0, 3.0])).shape
    (2, 3)
    """

    def __init__(self, shape):
        self.shape = _as_tuple(shape)

    def __call__(self, x):
        return self.apply(x, shape=self.shape)

    def forward(self, ctx, x, shape):
        lead = len(shape) - x.ndim
        if lead < 0:
            raise ValueError(f"{self.name}: cannot broadcast a tensor of shape {x.shape} to the shorter "
                             f"shape {shape}")
        if -1 in shape:
            shape = tuple(x.shape[i - lead] if n == -1 and i >= lead else n for i, n in enumerate(shape))
            if -1 in shape:
                raise ValueError(f"{self.name}: -1 in target shape {shape} is only allowed where the "
                                 f"input (shape {x.shape}) has an axis")
        try:
            return ctx.xp.broadcast_to(x, shape)
        except ValueError:
            raise ValueError(f"{self.name}: cannot broadcast a tensor of shape {x.shape} to shape "
                             f"{shape}") from None

    def backward(self, ctx, g):
        return (g,)


class Concat(Primitive):
    """Join tensors along an existing axis: ``ops.Concat(axis)((a, b, c))``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.Concat(1)((ms.Tensor([[1.0]]), ms.Tensor([[2.0, 3.0]]))).asnumpy().tolist()
    [[1.0, 2.0, 3.0]]
    """

    def __init__(self, axis=0):
        self.axis = int(axis)

    def __call__(self, *tensors):
        return self.apply(*_tensors(tensors), axis=self.axis)

    def forward(self, ctx, *arrays, axis):
        if not arrays:
            raise ValueError(f"{self.name} needs at least one tensor")
        first = arrays[0]
        a = normalize_axis(axis, first.ndim, self.name, first.shape)
        for x in arrays[1:]:
            if x.ndim != first.ndim or x.shape[:a] != first.shape[:a] or x.shape[a + 1:] != first.shape[a + 1:]:
                raise ValueError(f"{self.name}: tensors must have equal shapes except along axis {axis}, "
                                 f"got shapes {[tuple(y.shape) for y in arrays]}")
        ctx.axis = a
        ctx.sizes = [x.shape[a] for x in arrays]
        return ctx.xp.concatenate(arrays, axis=a)

    def backward(self, ctx, g):
        lead = (slice(None),) * ctx.axis
        grads, start = [], 0
        for size, wanted in zip(ctx.sizes, ctx.needs_input_grad):
            grads.append(g[lead + (slice(start, start + size),)] if wanted else None)
            start += size
        return tuple(grads)


class Stack(Primitive):
    """Join equally shaped tensors along a new axis: ``ops.Stack(axis)((a, b))``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> ops.Stack(-1)((ms.Tensor([1.0, 2.0]), ms.Tensor([3.0, 4.0]))).asnumpy().tolist()
    [[1.0, 3.0], [2.0, 4.0]]
    """

    def __init__(self, axis=0):
        self.axis = int(axis)

    def __call__(self, *tensors):
        return self.apply(*_tensors(tensors), axis=self.axis)

    def forward(self, ctx, *arrays, axis):
        if not arrays:
            raise ValueError(f"{self.name} needs at least one tensor")
        first = arrays[0]
        if any(x.shape != first.shape for x in arrays[1:]):
            raise ValueError(f"{self.name}: all tensors must have the same shape, "
                             f"got shapes {[tuple(y.shape) for y in arrays]}")
        ctx.axis = normalize_axis(axis, first.ndim + 1, self.name, first.shape)
        return ctx.xp.stack(arrays, axis=ctx.axis)

    def backward(self, ctx, g):
        lead = (slice(None),) * ctx.axis
        return tuple(g[lead + (i,)] if wanted else None for i, wanted in enumerate(ctx.needs_input_grad))


class Split(Primitive):
    """Cut a tensor along ``axis`` into ``output_num`` equal parts (a tuple of tensors).

    The functional :func:`split` also takes a part size or a list of sizes.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> [t.shape for t in ops.Split(1, 2)(ms.Tensor([[1.0, 2.0, 3.0, 4.0]]))]
    [(1, 2), (1, 2)]
    """

    def __init__(self, axis=0, output_num=1):
        self.axis = int(axis)
        self.output_num = int(output_num)

    def __call__(self, x):
        return self.apply(x, axis=self.axis, output_num=self.output_num)

    def _sizes(self, n, output_num, part_size, sizes):
        if sizes is not None:
            if sum(sizes) != n or any(s < 0 for s in sizes):
                raise ValueError(f"{self.name}: section sizes {list(sizes)} must be non-negative and add "
                                 f"up to the axis size {n}")
            return sizes
        if part_size is not None:
            if part_size <= 0:
                raise ValueError(f"{self.name}: part size must be positive, got {part_size}")
            return [part_size] * (n // part_size) + ([n % part_size] if n % part_size else [])
        if output_num <= 0 or n % output_num:
            raise ValueError(f"{self.name}: axis of size {n} cannot be split into {output_num} equal parts")
        return [n // output_num] * output_num

    def forward(self, ctx, x, axis, output_num=1, part_size=None, sizes=None):
        a = normalize_axis(axis, x.ndim, self.name, x.shape)
        lead = (slice(None),) * a
        parts, start = [], 0
        for size in self._sizes(x.shape[a], output_num, part_size, sizes):
            parts.append(x[lead + (slice(start, start + size),)])
            start += size
        ctx.axis = a
        return tuple(parts)

    def backward(self, ctx, *grads):
        if not ctx.needs_input_grad[0]:
            return (None,)
        return (ctx.xp.concatenate(grads, axis=ctx.axis),)


# Functional forms share one instance per primitive, so they appear once in the placement report.
_reshape, _transpose, _squeeze, _expand_dims = Reshape(), Transpose(), Squeeze(), ExpandDims()
_broadcast_to, _concat, _stack, _split, _flatten = BroadcastTo(()), Concat(), Stack(), Split(), Flatten()


def reshape(x, shape):
    """``x`` with a new shape (a view when possible); one entry may be -1."""
    return _reshape.apply(x, shape=_as_tuple(shape))


def transpose(x, axes=None):
    """``x`` with its axes permuted by ``axes`` (reversed when None)."""
    return _transpose.apply(x, perm=None if axes is None else _as_tuple(axes))


def squeeze(x, axis=None):
    """``x`` without the size-1 axes listed in ``axis`` (all of them when None)."""
    return _squeeze.apply(x, axis=() if axis is None else _as_tuple(axis))


def expand_dims(x, axis):
    """``x`` with a new size-1 axis at position ``axis``."""
    return _expand_dims.apply(x, axis=int(axis))


def broadcast_to(x, shape):
    """``x`` broadcast to ``shape`` (-1 keeps the input's size)."""
    return _broadcast_to.apply(x, shape=_as_tuple(shape))


def concat(tensors, axis=0):
    """Join a sequence of tensors along an existing axis."""
    return _concat.apply(*tensors, axis=int(axis))


def stack(tensors, axis=0):
    """Join a sequence of equally shaped tensors along a new axis."""
    return _stack.apply(*tensors, axis=int(axis))


def split(x, split_size_or_sections, axis=0):
    """Cut ``x`` along ``axis`` into a tuple of tensors (MindSpore 2 / PyTorch convention).

    ``split_size_or_sections`` is either an int, the size of each part (the last part is
    smaller when the axis size is not a multiple), or a list of part sizes adding up to the
    axis size. For ``n`` equal parts use ``ops.Split(axis, n)``.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> [t.shape for t in ops.split(ms.Tensor([1.0, 2.0, 3.0, 4.0, 5.0]), 2)]
    [(2,), (2,), (1,)]
    >>> [t.shape for t in ops.split(ms.Tensor([1.0, 2.0, 3.0]), [1, 2])]
    [(1,), (2,)]
    """
    if hasattr(split_size_or_sections, "__index__"):
        return _split.apply(x, axis=int(axis), part_size=int(split_size_or_sections))
    return _split.apply(x, axis=int(axis), sizes=[int(s) for s in split_size_or_sections])


def flatten(x):
    """``x`` reshaped to ``(N, -1)``, keeping the first axis."""
    return _flatten(x)
