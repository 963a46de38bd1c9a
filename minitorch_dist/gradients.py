"""Functional differentiation with MindSpore's semantics: ``value_and_grad`` and ``grad``."""
from .autograd import enable_grad, run_backward
from .extension import extension
from .row_tensor import RowTensor
from .tensor import Tensor


def _positions(grad_position):
    if grad_position is None:
        return None
    if isinstance(grad_position, int):
        return (grad_position,)
    if isinstance(grad_position, (tuple, list)) and all(isinstance(p, int) for p in grad_position):
        return tuple(grad_position)
    raise TypeError(f"grad_position must be None, an int or a tuple of ints, got {grad_position!r}")


def _weights(weights):
    if weights is None:
        return ()
    if isinstance(weights, Tensor):
        return (weights,)
    weights = tuple(weights)
    for w in weights:
        if not isinstance(w, Tensor):
            raise TypeError(f"weights must be Parameters/Tensors, got an element of type {type(w).__name__}")
    return weights


def _as_tensor_grad(g, like):
    if g is None:
        return Tensor._make(like.device.xp.zeros(like.shape, like.dtype), like.device)
    return g if isinstance(g, RowTensor) else Tensor._make(g, like.device)


def _ones_like(roots):
    """The seed gradient of each root: ones of its shape and dtype, on its device."""
    seeds = []
    for r in roots:
        data = r.data       # a tensor's shape and dtype are its array's
        seeds.append(r.device.xp.ones(data.shape, data.dtype))
    return seeds


def _detached(out):
    """The outputs as plain values: a returned loss must not keep the step's graph alive."""
    if isinstance(out, Tensor):
        return Tensor._make(out.data, out.device)
    if type(out) in (tuple, list):    # plain containers only (a namedtuple is passed through)
        return type(out)(_detached(o) for o in out)
    return out


def value_and_grad(fn, grad_position=0, weights=None, has_aux=False):
    """Wrap ``fn`` so that it returns ``(outputs, gradients)``.

    * ``grad_position``: which positional inputs to differentiate (int or tuple), or None.
    * ``weights``: parameters to differentiate (e.g. ``optimizer.parameters``), or None.
    * ``has_aux``: ``fn`` returns several outputs; only the first is differentiated.

    Gradients are for the positions, the weights, or ``(position_grads, weight_grads)``
    when both are asked for. ``.grad`` of the weights is left untouched.

    >>> import minitorch_dist as ms
    >>> f = ms.value_and_grad(lambda x: (x * x).sum())
    >>> value, g = f(ms.Tensor([1.0, 3.0]))
    >>> float(value.asnumpy()), g.asnumpy().tolist()
    (10.0, [2.0, 6.0])
    """
    positions = _positions(grad_position)
    params = _weights(weights)
    if positions is None and not params:
        raise ValueError("value_and_grad needs grad_position or weights (both are None: nothing to "
                         "differentiate)")

    def wrapper(*args):
        args = list(args)
        for p in positions or ():
            if not -len(args) <= p < len(args):
                raise ValueError(f"grad_position {p} is out of range for {len(args)} positional inputs")
            x = args[p] if isinstance(args[p], Tensor) else Tensor(args[p])
            args[p] = Tensor._make(x.data, x.device).requires_grad_(True)
        ext = extension()
        scope = ext.gradient_scope(fn, params)
        with enable_grad(), scope:
            out = ext.call_differentiated(fn, args)
        if has_aux:
            if not isinstance(out, (tuple, list)) or len(out) < 2:
                raise ValueError("has_aux=True needs fn to return a tuple of at least two outputs; "
                                 "the first is differentiated")
            roots = [out[0]]
        else:
            roots = list(out) if isinstance(out, (tuple, list)) else [out]
        for r in roots:
            if not isinstance(r, Tensor):
                raise TypeError(f"value_and_grad: fn must return Tensors, got {type(r).__name__}")
        live = [r for r in roots if r.requires_grad]
        inputs = [args[p] for p in positions or ()]
        targets = inputs + list(params)
        found = run_backward(live, _ones_like(live), targets=targets) if live else \
            [None] * len(targets)
        found = scope.finish(targets, found)
        grads = []      # _as_tensor_grad's common case inline: an array wrapped as it is
        for g, t in zip(found, targets):
            grads.append(Tensor._make(g, t.device) if g is not None and not isinstance(g, RowTensor)
                         else _as_tensor_grad(g, t))
        input_grads = grads[:len(inputs)]
        weight_grads = tuple(grads[len(inputs):])
        if positions is not None and isinstance(grad_position, int):
            input_grads = input_grads[0]
        else:
            input_grads = tuple(input_grads)
        if positions is None:
            result = weight_grads
        elif not params:
            result = input_grads
        else:
            result = (input_grads, weight_grads)
        return _detached(out), result

    return wrapper


def grad(fn, grad_position=0, weights=None, has_aux=False):
    """Like ``value_and_grad`` but returns only the gradients (and the aux outputs if has_aux).

    >>> import minitorch_dist as ms
    >>> ms.grad(lambda x: (x ** 3).sum())(ms.Tensor([2.0])).asnumpy().tolist()
    [12.0]
    """
    inner = value_and_grad(fn, grad_position, weights, has_aux)

    def wrapper(*args):
        out, grads = inner(*args)
        return (grads, tuple(out[1:])) if has_aux else grads

    return wrapper
