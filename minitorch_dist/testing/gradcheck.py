"""Gradient checking by central differences in float64.

``check_gradients(fn, *arrays)`` compares the autograd gradient of
``sum(fn(*tensors) * w)`` (``w`` a fixed random cotangent, so every output element matters)
with central differences, input by input, and raises ``GradientCheckError`` naming the
input and the worst element when they disagree.
"""
import numpy as np


class GradientCheckError(AssertionError):
    pass


def _scalar_objective(fn, tensors, weights):
    out = fn(*tensors)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    total = 0.0
    for o, w in zip(outs, weights):
        total = total + float((o.asnumpy().astype(np.float64) * w).sum())
    return total


def numerical_gradients(fn, arrays, weights, eps=1e-6, wrt=None):
    """Central-difference gradients of ``sum(fn(*arrays) * weights)`` for inputs ``wrt``."""
    from ..tensor import Tensor
    grads = []
    for i, a in enumerate(arrays):
        if (wrt is not None and i not in wrt) or a.dtype.kind != "f":
            grads.append(None)
            continue
        g = np.zeros_like(a, dtype=np.float64)
        flat = a.reshape(-1)  # a is a contiguous copy, so this is a view we may perturb
        for j in range(flat.size):
            old = flat[j]
            flat[j] = old + eps
            plus = _scalar_objective(fn, [Tensor(x) for x in arrays], weights)
            flat[j] = old - eps
            minus = _scalar_objective(fn, [Tensor(x) for x in arrays], weights)
            flat[j] = old
            g.reshape(-1)[j] = (plus - minus) / (2 * eps)
        grads.append(g)
    return grads


def check_gradients(fn, *arrays, eps=1e-6, atol=1e-5, rtol=1e-3, wrt=None, seed=0, device=None):
    """Assert that autograd's gradients of ``fn`` match central differences.

    ``arrays`` are NumPy inputs (converted to float64 when floating); ``fn`` takes Tensors
    and returns a Tensor or a tuple of Tensors. ``wrt`` limits the check to some inputs.

    >>> import numpy as np
    >>> check_gradients(lambda x: x * x, np.array([1.0, 2.0]))
    """
    from ..tensor import Tensor
    from ..autograd import run_backward
    arrays = [np.array(a, dtype=np.float64) if np.asarray(a).dtype.kind == "f" else np.array(a)
              for a in arrays]
    rng = np.random.default_rng(seed)
    tensors = [Tensor(a, device=device, requires_grad=a.dtype.kind == "f" and (wrt is None or i in wrt))
               for i, a in enumerate(arrays)]
    out = fn(*tensors)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    weights = [rng.uniform(0.5, 1.5, size=o.shape) * rng.choice([-1, 1], size=o.shape) for o in outs]
    live = [(o, w) for o, w in zip(outs, weights) if o.requires_grad]
    if not live:
        raise GradientCheckError("no output of fn requires grad: nothing to check")
    targets = [t for t in tensors if t.requires_grad]
    analytic = run_backward([o for o, _ in live],
                            [o.device.xp.asarray(w, dtype=o.dtype) for o, w in live], targets=targets)
    analytic = dict(zip([id(t) for t in targets], analytic))
    numeric = numerical_gradients(fn, arrays, weights, eps=eps,
                                  wrt=[i for i, t in enumerate(tensors) if t.requires_grad])
    for i, (t, num) in enumerate(zip(tensors, numeric)):
        if num is None:
            continue
        got = analytic[id(t)]
        if got is None:
            got = np.zeros_like(num)
        elif hasattr(got, "to_dense"):
            got = got.to_dense().asnumpy()
        else:
            got = t.device.host_array(got)
        got = np.asarray(got, dtype=np.float64)
        if got.shape != num.shape:
            raise GradientCheckError(f"input {i}: gradient shape {got.shape} != input shape {num.shape}")
        if not np.allclose(got, num, atol=atol, rtol=rtol):
            err = np.abs(got - num) - rtol * np.abs(num)
            j = np.unravel_index(np.argmax(err), num.shape)
            raise GradientCheckError(f"input {i}: autograd gives {got[j]:.8g} at index {j}, "
                                     f"central differences give {num[j]:.8g}")
