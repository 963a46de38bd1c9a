"""Linear algebra: ``einsum``, determinants, inverse, Cholesky, solve, SVD, distances.

``Einsum``'s backward is an einsum itself: the gradient of operand ``i`` contracts the
output gradient with the other operands onto ``i``'s subscripts. The matrix functions use
the textbook identities (d det(A) = det(A) A^-T, d A^-1 = -A^-T G A^-T, ...).

>>> import minitorch_dist as ms
>>> from minitorch_dist import ops
>>> ops.einsum("ij,j->i", ms.Tensor([[1.0, 2.0]]), ms.Tensor([3.0, 4.0])).asnumpy().tolist()
[11.0]
>>> round(ops.matrix_determinant(ms.Tensor([[2.0, 1.0], [1.0, 3.0]])).item(), 4)
5.0
"""
import numpy as np

from .array_func import _F, _constant, _host
from .elementwise import as_float
from .primitive import Primitive

__all__ = ["Einsum", "MatrixDeterminant", "MatrixInverse", "Cholesky", "einsum",
           "matrix_determinant", "det", "log_matrix_determinant", "slogdet", "matrix_inverse",
           "inverse", "cholesky", "cholesky_inverse", "matrix_solve", "solve", "svd", "pinv",
           "matrix_power", "cdist", "pdist", "cosine_similarity", "normalize", "matrix_exp",
           "qr", "eigvals"]


class Einsum(Primitive):
    """``Einsum(equation)(*operands)`` (explicit ``->`` form, no repeated subscript within
    one operand); the gradient of each operand is an einsum of the others."""

    def __init__(self, equation):
        equation = equation.replace(" ", "")
        if "->" not in equation:
            inputs = equation.split(",")
            letters = sorted(c for c in set("".join(inputs)) if "".join(inputs).count(c) == 1)
            equation = equation + "->" + "".join(letters)
        self.equation = equation
        self.inputs, self.output = equation.split("->")[0].split(","), equation.split("->")[1]
        if "." in equation:
            raise ValueError(f"Einsum: ellipsis ('...') is not supported here, got {equation!r}")

    def forward(self, ctx, *operands):
        if len(operands) != len(self.inputs):
            raise ValueError(f"{self.name}: equation {self.equation!r} needs {len(self.inputs)} "
                             f"operands, got {len(operands)}")
        operands = [as_float(o) for o in operands]
        ctx.save_for_backward(*operands)
        return ctx.xp.einsum(self.equation, *operands)

    def backward(self, ctx, g):
        xp, ops = ctx.xp, ctx.saved
        grads = []
        for i, (subs, x) in enumerate(zip(self.inputs, ops)):
            others = [s for j, s in enumerate(self.inputs) if j != i]
            arrays = [o for j, o in enumerate(ops) if j != i]
            # subscripts of x that appear nowhere else are summed out: broadcast them back
            eq = ",".join([self.output] + others) + "->" + "".join(
                c for c in subs if c in self.output or any(c in s for s in others))
            partial = xp.einsum(eq, g, *arrays)
            kept = "".join(c for c in subs if c in self.output or any(c in s for s in others))
            expand = tuple(subs.index(c) for c in subs if c not in kept)
            shaped = xp.expand_dims(partial, expand) if expand else partial
            grads.append(xp.broadcast_to(shaped, x.shape).copy())
        return tuple(grads)


def einsum(equation, *operands):
    return Einsum(equation)(*operands)


class MatrixDeterminant(Primitive):
    def forward(self, ctx, x):
        x = as_float(x)
        out = ctx.xp.linalg.det(x)
        ctx.save_for_backward(x, out)
        return out

    def backward(self, ctx, g):
        x, out = ctx.saved
        inv_t = ctx.xp.swapaxes(ctx.xp.linalg.inv(x), -1, -2)
        return ((g * out)[..., None, None] * inv_t,)


class MatrixInverse(Primitive):
    def __init__(self, adjoint=False):
        if adjoint:
            raise ValueError("MatrixInverse: adjoint=True is not supported here")

    def forward(self, ctx, x):
        out = ctx.xp.linalg.inv(as_float(x))
        ctx.save_for_backward(out)
        return out

    def backward(self, ctx, g):
        (out,) = ctx.saved
        out_t = ctx.xp.swapaxes(out, -1, -2)
        return (-(out_t @ g @ out_t),)


class Cholesky(Primitive):
    """The lower Cholesky factor; the gradient follows Murray (2016)."""

    def __init__(self, upper=False):
        self.upper = bool(upper)

    def forward(self, ctx, x):
        low = ctx.xp.linalg.cholesky(as_float(x))
        ctx.save_for_backward(low)
        return ctx.xp.swapaxes(low, -1, -2) if self.upper else low

    def backward(self, ctx, g):
        xp = ctx.xp
        (low,) = ctx.saved
        if self.upper:
            g = xp.swapaxes(g, -1, -2)
        phi = xp.swapaxes(low, -1, -2) @ g
        phi = xp.tril(phi) - 0.5 * xp.eye(phi.shape[-1]) * phi
        inv = xp.linalg.inv(low)
        s = xp.swapaxes(inv, -1, -2) @ phi @ inv
        return ((s + xp.swapaxes(s, -1, -2)) / 2,)


def matrix_determinant(x):
    return MatrixDeterminant()(x)


det = matrix_determinant


def log_matrix_determinant(x):
    sign, logdet = np.linalg.slogdet(_host(x))
    return _constant(sign.astype(x.dtype), x), _F().log(_F().abs(matrix_determinant(x)))


def slogdet(x):
    return log_matrix_determinant(x)


def matrix_inverse(x, adjoint=False):
    return MatrixInverse(adjoint)(x)


inverse = matrix_inverse


def cholesky(input_x, upper=False):   # noqa: A002
    return Cholesky(upper)(input_x)


def cholesky_inverse(input_x, upper=False):   # noqa: A002
    factor = _F().swapaxes(input_x, -1, -2) if upper else input_x
    return matrix_inverse(_F().matmul(factor, _F().swapaxes(factor, -1, -2)))


def matrix_solve(matrix, rhs, adjoint=False):
    a = _F().swapaxes(matrix, -1, -2) if adjoint else matrix
    return _F().matmul(matrix_inverse(a), rhs)


def solve(A, B):
    return matrix_solve(A, B)


def svd(input, full_matrices=False, compute_uv=True):   # noqa: A002
    """(s, u, v) as MindSpore orders them (not differentiable here)."""
    u, s, vh = np.linalg.svd(_host(input), full_matrices=full_matrices)
    if not compute_uv:
        return _constant(s, input)
    return (_constant(s, input), _constant(u, input),
            _constant(np.swapaxes(vh, -1, -2).copy(), input))


def pinv(x, rtol=None):
    return _constant(np.linalg.pinv(_host(x)).astype(x.dtype), x)


def matrix_power(input, n):   # noqa: A002
    if n < 0:
        input, n = matrix_inverse(input), -n
    out = _F().broadcast_to(_constant(np.eye(input.shape[-1], dtype=input.dtype), input), input.shape)
    for _ in range(n):
        out = _F().matmul(out, input)
    return out


def matrix_exp(input):   # noqa: A002
    """exp(A) by scaling and squaring of a Taylor series (differentiable through matmul)."""
    norm = float(np.abs(_host(input)).sum(-1).max()) if input.size else 0.0
    squarings = max(0, int(np.ceil(np.log2(norm))) + 1) if norm > 0.5 else 0
    a = input / (2 ** squarings)
    eye = _F().broadcast_to(_constant(np.eye(input.shape[-1], dtype=input.dtype), input), input.shape)
    out, term = eye, eye
    for k in range(1, 18):
        term = _F().matmul(term, a) / k
        out = out + term
    for _ in range(squarings):
        out = _F().matmul(out, out)
    return out


def qr(input, mode="reduced"):   # noqa: A002
    q, r = np.linalg.qr(_host(input), mode=mode)
    return _constant(q, input), _constant(r, input)


def eigvals(A):
    return _constant(np.linalg.eigvals(_host(A)), A)


def cdist(x1, x2, p=2.0):
    d = _F().expand_dims(x1, -2) - _F().expand_dims(x2, -3)
    if p == 2.0:
        return _F().sqrt(_F().sum(d * d, -1) + 0.0)
    return _F().vector_norm(d, p, -1)


def pdist(input, p=2.0):   # noqa: A002
    n = input.shape[0]
    full = cdist(input, input, p)
    rows, cols = np.triu_indices(n, 1)
    return full[_constant(rows, input), _constant(cols, input)]


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    dot = _F().sum(x1 * x2, dim)
    n1 = _F().sqrt(_F().sum(x1 * x1, dim))
    n2 = _F().sqrt(_F().sum(x2 * x2, dim))
    return dot / _F().maximum(n1 * n2, eps)


def normalize(input, p=2.0, dim=1, eps=1e-12):   # noqa: A002
    return input / _F().maximum(_F().vector_norm(input, p, dim, True), eps)
