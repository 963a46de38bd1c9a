"""Matrix products: MatMul (2-D, MindSpore's transpose flags) and BatchMatMul (batched).

float16 operands on the host are multiplied with float32 accumulation and the product is
rounded once to float16, as CPU frameworks do (``backend/half.py``); forward and both
backward products alike.
"""
from ..backend import half, threads
from .primitive import Primitive

__all__ = ["MatMul", "BatchMatMul", "matmul", "batch_matmul"]


def _mm(xp, a, b, out=None):
    """``xp.matmul(a, b)`` on the threads that pay for its size (``backend/threads.py``)."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    flops = m * k * n
    if a.ndim > 2 or b.ndim > 2:     # times the batch (2-D operands have a batch of one)
        flops *= max(a.size // max(m * k, 1), b.size // max(k * n, 1), 1)
    # product_threads would change nothing here (one thread in force, or a product big enough
    # for all of them): skip its context manager, some 70 Python bytecodes a product.
    # get_num_threads first: it applies the thread policy before the first product.
    if threads.get_num_threads() <= 1 or flops >= threads.SMALL_PRODUCT_FLOPS:
        return xp.matmul(a, b, out=out)
    with threads.product_threads(flops):
        return xp.matmul(a, b, out=out)


def _mm_into(xp, a, b, slot):
    """``a @ b`` times the slot's scale, computed straight into the slot's array (a gradient
    bucket's memory, ``Context.grad_slots``); None where it does not fit (the caller then
    computes the product as usual). The scale, a power of two, multiplies the smallest of
    the two operands and the product (a batch's gradient is usually smaller than the weight's,
    but not always): exact either way, so the bits are those of the product, scaled."""
    array, scale = slot
    if a.ndim != 2 or b.ndim != 2 or array.shape != (a.shape[0], b.shape[1]) or \
            not (array.dtype == a.dtype == b.dtype) or type(array) is not type(a):
        return None     # another shape or dtype, or memory of another device's array module
    if scale != 1:
        smallest = min(a.size, b.size, array.size)
        if array.size == smallest:
            _mm(xp, a, b, out=array)
            return xp.multiply(array, scale, out=array)
        if a.size == smallest:
            a = a * scale
        else:
            b = b * scale
    return _mm(xp, a, b, out=array)


class BatchMatMul(Primitive):
    """``op(a) @ op(b)`` over the last two axes, leading axes broadcast.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> a = ms.Tensor([[[1.0, 2.0]]]); b = ms.Tensor([[[3.0], [4.0]]])
    >>> ops.BatchMatMul()(a, b).asnumpy().tolist()
    [[[11.0]]]
    """

    split_backward = True     # each operand's gradient is its own product
    writes_gradient_slots = True    # weight gradients straight into bucket slots

    min_ndim = 2
    # MindSpore's 2D/3D tensor parallel for Layout strategies (parallel/sharding/rules/layout_plan.py)
    settable_attrs = ("enable_nd_tp",)
    enable_nd_tp = False

    def __init__(self, transpose_a=False, transpose_b=False):
        self.transpose_a = bool(transpose_a)
        self.transpose_b = bool(transpose_b)

    def _check(self, a, b):
        if a.ndim < self.min_ndim or b.ndim < self.min_ndim:
            raise ValueError(f"{self.name} expects inputs with at least {self.min_ndim} dimensions, "
                             f"got shapes {a.shape} and {b.shape}")
        k_a = a.shape[-2] if self.transpose_a else a.shape[-1]
        k_b = b.shape[-1] if self.transpose_b else b.shape[-2]
        if k_a != k_b:
            raise ValueError(f"{self.name}: inner dimensions differ: a{'ᵀ' if self.transpose_a else ''} "
                             f"of shape {a.shape} and b{'ᵀ' if self.transpose_b else ''} of shape {b.shape} "
                             f"({k_a} != {k_b})")
        for n_a, n_b in zip(reversed(a.shape[:-2]), reversed(b.shape[:-2])):
            if n_a != n_b and n_a != 1 and n_b != 1:
                raise ValueError(f"{self.name}: batch dimensions {a.shape[:-2]} and {b.shape[:-2]} do not "
                                 f"broadcast (a of shape {a.shape}, b of shape {b.shape})")

    def forward(self, ctx, a, b):
        self._check(a, b)
        xp = ctx.xp
        ctx.half = half.is_host_half(xp, a, b)
        if ctx.half:    # float32 copies serve the forward and both backward products
            a, b = half.widen(a), half.widen(b)
        ctx.saved = (a, b)      # save_for_backward, inline
        # the array's own swapaxes method (xp.swapaxes is NumPy's Python wrapper around it)
        out = _mm(xp, a.swapaxes(-1, -2) if self.transpose_a else a,
                  b.swapaxes(-1, -2) if self.transpose_b else b)
        return half.narrow(out) if ctx.half else out

    def backward(self, ctx, g):
        # C = A'B' with A' = op(A), B' = op(B): dA' = G B'^T, dB' = A'^T G, transposed back if op did.
        a, b = ctx.saved
        xp = ctx.xp
        ta, tb = self.transpose_a, self.transpose_b
        if ctx.half:
            g = half.widen(g)
        ga = gb = None
        needs = ctx.needs_input_grad    # transposes inline: no helper frame per operand
        if ctx.grad_slots is not None:  # bucket memory offered for some gradients
            ga, gb = self._into_slots(ctx, g)
        if needs[0] and ga is None:
            ga = _mm(xp, b.swapaxes(-1, -2) if tb else b, g.swapaxes(-1, -2)) if ta else \
                _mm(xp, g, b if tb else b.swapaxes(-1, -2))
        if needs[1] and gb is None:
            gb = _mm(xp, g.swapaxes(-1, -2), a.swapaxes(-1, -2) if ta else a) if tb else \
                _mm(xp, a if ta else a.swapaxes(-1, -2), g)
        if ctx.half:    # each gradient rounded once to the inputs' float16
            ga = None if ga is None else half.narrow(ga)
            gb = None if gb is None else half.narrow(gb)
        return ga, gb

    def _into_slots(self, ctx, g):
        """``(dA, dB)``, each computed into its slot of ``ctx.grad_slots`` where it has one
        that fits (``_mm_into``), else None (``backward`` computes it as usual)."""
        (a, b), xp, slots = ctx.saved, ctx.xp, ctx.grad_slots
        ta, tb = self.transpose_a, self.transpose_b
        ga = gb = None
        if 0 in slots and ctx.needs_input_grad[0]:
            ga = _mm_into(xp, b.T if tb else b, g.T, slots[0]) if ta else \
                _mm_into(xp, g, b if tb else b.T, slots[0])
        if 1 in slots and ctx.needs_input_grad[1]:
            gb = _mm_into(xp, g.T, a.T if ta else a, slots[1]) if tb else \
                _mm_into(xp, a if ta else a.T, g, slots[1])
        return ga, gb


class MatMul(BatchMatMul):
    """``op(a) @ op(b)`` for 2-D tensors, with ``transpose_a``/``transpose_b`` flags."""

    def _check(self, a, b):
        if a.ndim != 2 or b.ndim != 2:
            raise ValueError(f"{self.name} expects two 2-D tensors, got shapes {a.shape} and {b.shape}; "
                             "use BatchMatMul for batches")
        # no batch axes to compare: BatchMatMul's check runs (for its message) only on a mismatch
        if a.shape[self.transpose_a ^ 1] != b.shape[self.transpose_b]:
            super()._check(a, b)


_instances = {}


def _cached(cls, transpose_a, transpose_b):
    key = (cls, bool(transpose_a), bool(transpose_b))
    if key not in _instances:
        _instances[key] = cls(transpose_a, transpose_b)
    return _instances[key]


def matmul(a, b, transpose_a=False, transpose_b=False):
    """Matrix product with NumPy's rules for 1-D operands and broadcast batch axes."""
    from .shape_ops import expand_dims, squeeze
    from ..tensor import Tensor
    prim = _cached(BatchMatMul, transpose_a, transpose_b)
    a_vec = isinstance(a, Tensor) and a.ndim == 1
    b_vec = isinstance(b, Tensor) and b.ndim == 1
    if a_vec or b_vec:
        # checked here so that the error shows the caller's shapes, not the expanded ones
        k_a = a.shape[0] if a_vec else a.shape[-2 if transpose_a else -1]
        k_b = b.shape[0] if b_vec else b.shape[-1 if transpose_b else -2]
        if k_a != k_b:
            raise ValueError(f"{prim.name}: inner dimensions differ: a of shape {a.shape} and b of "
                             f"shape {b.shape} ({k_a} != {k_b})")
    if a_vec:   # a vector is a row of op(a), whatever the transpose flag says
        a = expand_dims(a, -1 if transpose_a else 0)
    if b_vec:
        b = expand_dims(b, 0 if transpose_b else -1)
    out = prim(a, b)
    if a_vec:
        out = squeeze(out, -2)
    if b_vec:
        out = squeeze(out, -1)
    return out


def batch_matmul(a, b, transpose_a=False, transpose_b=False):
    """Batched ``op(a) @ op(b)`` over the last two axes (a shared :class:`BatchMatMul`)."""
    return _cached(BatchMatMul, transpose_a, transpose_b)(a, b)
