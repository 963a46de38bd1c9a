"""The dynamic tape and the reverse-mode engine.

Every differentiable primitive call records a :class:`Node` holding the primitive, the
context its forward saved, and links to its inputs. ``backward`` walks the nodes in reverse
topological order, calls each primitive's ``backward`` and hands every input the gradient
fitted to its shape: broadcast axes summed away and the dtype cast back. That fitting lives
here, once, so a primitive's backward can return the gradient of its broadcast result.
Callers that need to watch the pass (data-parallel buckets, pipeline stages) do it through a
``BackwardObserver`` (``backward_observer.py``), so the loop itself stays the textbook one.
"""
import functools
import weakref
from time import perf_counter

from .backend import half
from .backward_observer import BackwardObserver, FinalGradients
from .thread_state import ThreadState
from .row_tensor import RowTensor

_state = ThreadState(enabled=True, saved=())      # per thread: ranks run as threads in tests


def is_grad_enabled():
    return _state.enabled


class _GradMode:
    """Context manager and decorator that sets whether operations are recorded."""

    mode = True

    def __enter__(self):
        _state.saved = _state.saved + (_state.enabled,)
        _state.enabled = self.mode

    def __exit__(self, *exc):   # a per-thread stack: one instance may be entered by many threads
        _state.enabled = _state.saved[-1]
        _state.saved = _state.saved[:-1]

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Run without recording a tape (no gradients flow, no memory kept for backward).

    >>> import minitorch_dist as ms
    >>> x = ms.Tensor([1.0], requires_grad=True)
    >>> with ms.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """
    mode = False


class enable_grad(_GradMode):
    mode = True


class Node:
    """One recorded primitive call: what backward needs to send gradients to the inputs.

    ``inputs`` gives the input tensors (None for constants). A leaf is held as it is; an
    intermediate (a tensor with a ``grad_fn``) is held through an :class:`InputLink`, so its
    values are freed as soon as nothing else uses them, and an input that is gone reads as
    its link. What a backward needs of its inputs' values, its forward saved in ``ctx``.
    """

    __slots__ = ("prim", "ctx", "_links", "out_meta")

    def __init__(self, prim, ctx, inputs, out_meta=None):
        self.prim = prim
        self.ctx = ctx
        self._links = tuple(t if t is None or t.grad_fn is None else InputLink(t) for t in inputs)
        self.out_meta = out_meta    # (shape, dtype) per output for multi-output primitives

    @property
    def inputs(self):
        """The inputs: each tensor, or its link once the tensor itself is gone."""
        return tuple(_live(t) for t in self._links)

    @property
    def n_outputs(self):
        return 1 if self.out_meta is None else len(self.out_meta)


class InputLink:
    """A node's link to an intermediate input: its producer and what fitting a gradient to it
    needs (shape, dtype, device), without its values.

    Holding the tensor would keep every activation of a network alive until the whole graph
    is dropped: a conv stack's forward then held 4 activations a layer where backward reads 2
    (PyTorch's nodes link to their producers in the same way). While the tensor lives, the
    link gives it back (a gradient target is found by identity); once it is gone, the link
    stands in for it and matches no target.
    """

    __slots__ = ("tensor", "grad_fn", "_out_index", "requires_grad", "shape", "dtype", "device")

    def __init__(self, tensor):
        self.tensor = weakref.ref(tensor)
        self.grad_fn, self._out_index = tensor.grad_fn, tensor._out_index
        self.requires_grad = tensor.requires_grad
        self.shape, self.dtype, self.device = tensor.shape, tensor.dtype, tensor.device


def _live(item):
    """A node input as stored, resolved: the tensor, its link if the tensor is gone, or None."""
    if type(item) is InputLink:
        tensor = item.tensor()
        return item if tensor is None else tensor
    return item


def unbroadcast(grad, shape):
    """Sum ``grad`` down to ``shape``, undoing NumPy broadcasting."""
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    if extra < 0:
        # fewer axes than the input: only a size-preserving reshape is a fit; anything else is
        # left as is so that the caller reports the primitive that produced it
        return grad.reshape(shape) if grad.size == _size(shape) else grad
    axes = tuple(range(extra)) + tuple(
        i + extra for i, n in enumerate(shape) if n == 1 and grad.shape[i + extra] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    if extra:
        grad = grad.reshape(grad.shape[extra:])
    return grad


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _fit(grad, tensor, prim):
    """Shape and dtype of ``grad`` made equal to ``tensor``'s; a mismatch is a primitive bug."""
    if isinstance(grad, RowTensor):
        if tuple(grad.dense_shape) != tensor.shape:
            raise RuntimeError(f"{prim.name}: sparse gradient of shape {grad.dense_shape} "
                               f"for an input of shape {tensor.shape}")
        return grad
    xp = tensor.device.xp
    if not isinstance(grad, xp.ndarray):
        grad = xp.asarray(grad)   # NumPy turns 0-d results into scalars; gradients stay arrays
    if grad.shape != tensor.shape:
        grad = unbroadcast(grad, tensor.shape)
        if grad.shape != tensor.shape:
            raise RuntimeError(f"{prim.name}.backward returned a gradient of shape {grad.shape} "
                               f"for an input of shape {tensor.shape}")
    if grad.dtype != tensor.dtype:
        grad = half.convert(grad, tensor.dtype)
    return grad


def _accumulate(total, grad):
    if total is None:
        return grad
    if isinstance(total, RowTensor) or isinstance(grad, RowTensor):
        return RowTensor.add(total, grad)
    return total + grad


def _topological_nodes(roots):
    """Nodes reachable from ``roots``, each listed after every node that consumes it."""
    order, seen = [], set()
    for root in roots:
        if root.grad_fn is None or root.grad_fn in seen:
            continue
        stack = [(root.grad_fn, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if node in seen:
                continue
            seen.add(node)
            stack.append((node, True))
            for inp in node.inputs:
                if inp is not None and inp.grad_fn is not None and inp.grad_fn not in seen:
                    stack.append((inp.grad_fn, False))
    order.reverse()
    return order


def run_backward(roots, root_grads, targets=None, retain_graph=False, observer=None):
    """Back-propagate ``root_grads`` (arrays) from ``roots`` (tensors).

    With ``targets`` (a list of tensors), return their gradients (arrays, RowTensors or None)
    and leave every ``.grad`` untouched; only the nodes with a target below them run. Without,
    accumulate into the ``.grad`` of every leaf tensor that requires grad. The gradients
    handed out own their memory (a copy is made where one array would be handed out twice).

    ``observer`` (a ``BackwardObserver``, see ``backward_observer.py``) watches or steers the
    pass: data-parallel buckets take each target's gradient as soon as it is final, and a
    pipeline stage holds its weight gradients back until its input gradient is sent.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> w = ms.Tensor(np.array([3.0], np.float32), requires_grad=True)
    >>> run_backward([w * w], [np.ones(1, np.float32)], targets=[w])[0].tolist()
    [6.0]
    """
    observer = _NO_OBSERVER if observer is None else observer
    pending = {}   # (node, output index) -> gradient
    leaves = {}    # id(tensor) -> [tensor, gradient], for leaves (or the targets)
    held = []      # (node, its output gradients, input positions held back)
    target_ids = None if targets is None else {id(t) for t in targets}

    def deliver(tensor, grad):
        node = tensor.grad_fn
        if node is None or (target_ids is not None and id(tensor) in target_ids):
            entry = leaves.get(id(tensor))
            if entry is None:
                leaves[id(tensor)] = [tensor, grad]
            else:
                entry[1] = _accumulate(entry[1], grad)
            if node is None:
                return
        key = (node, tensor._out_index)
        pending[key] = _accumulate(pending.get(key), grad)

    for root, grad in zip(roots, root_grads):
        if root.requires_grad:
            deliver(root, _fit(grad, root, _RootPrim))

    nodes = _topological_nodes(roots)
    # With targets, only nodes with a target below them run (a gradient of the wide weights
    # alone skips the deep network's backward, as PyTorch's autograd.grad does).
    useful = None if target_ids is None else _nodes_reaching(nodes, target_ids)
    finals = FinalGradients(observer, nodes, targets, leaves)

    for index, node in enumerate(nodes):
        if node.ctx is None:
            raise RuntimeError("trying to backward through the graph a second time; pass "
                               "retain_graph=True to the first backward if you need to")
        if useful is not None and node not in useful:
            if not retain_graph:
                node.ctx = None
            continue
        out_grads = _output_gradients(node, pending)
        if out_grads is not None:
            hold = tuple(observer.deferred_inputs(node))
            if hold:
                held.append((node, out_grads, hold))
                finals.hold(node, hold)
            skip = hold + _inputs_off_path(node, target_ids, useful)
            _call_backward(node, out_grads, deliver, skip=skip)
            if not retain_graph and not hold:
                node.ctx = None
        finals.after(index)

    if held:
        observer.before_deferred()
    for node, out_grads, hold in held:
        _call_backward(node, out_grads, deliver, only=hold)
        if not retain_graph:
            node.ctx = None
    finals.report_rest()
    return _hand_out(leaves, targets, root_grads, finals.taken)


def _hand_out(leaves, targets, root_grads, taken):
    """The targets' gradients, or None after accumulating into every leaf's ``.grad``.

    The gradients handed out must own their memory: optimizers and reducers update them in
    place, and Add's backward (for one) gives the same array to both of its inputs. Those an
    observer replaced (``taken``) are its own memory and are handed out as they are."""
    claimed = {id(_memory_owner(g)): g for g in root_grads if not isinstance(g, RowTensor)}
    for tid, entry in leaves.items():
        if tid not in taken:
            entry[1] = _own(entry[1], claimed, entry[0].device.xp)
    if targets is not None:
        return [leaves[id(t)][1] if id(t) in leaves else None for t in targets]
    for tensor, grad in leaves.values():
        tensor._accumulate_grad(grad)
    return None


def _output_gradients(node, pending):
    """The gradients of ``node``'s outputs taken from ``pending`` (zeros for an output that got
    none), or None when no output got one (the node is skipped)."""
    if node.out_meta is None:
        grad = pending.pop((node, 0), None)
        if grad is None:
            return None
        if not isinstance(grad, (node.ctx.xp.ndarray, RowTensor)):
            grad = node.ctx.xp.asarray(grad)   # a sum of 0-d arrays is a NumPy scalar
        return (grad,)
    out_grads = [pending.pop((node, i), None) for i in range(len(node.out_meta))]
    if all(g is None for g in out_grads):
        return None
    xp = node.ctx.xp
    return tuple(xp.zeros(shape, dtype) if g is None else
                 g if isinstance(g, (xp.ndarray, RowTensor)) else xp.asarray(g)
                 for g, (shape, dtype) in zip(out_grads, node.out_meta))


def _nodes_reaching(nodes, target_ids):
    """The nodes (of ``nodes``, consumers first) from which some target is reached, and
    those whose backward always runs (pipeline send/recv), with every node on the way."""
    useful = set()
    for node in reversed(nodes):          # producers first
        if node.prim.backward_always_runs:
            useful.add(node)
            continue
        for inp in node.inputs:
            if inp is not None and (id(inp) in target_ids or inp.grad_fn in useful):
                useful.add(node)
                break
    return useful


def _inputs_off_path(node, target_ids, useful):
    """Positions of ``node``'s inputs whose gradient reaches no target: not computed (none
    without targets, or for a node whose backward always runs)."""
    if useful is None or node.prim.backward_always_runs:
        return ()
    return tuple(i for i, t in enumerate(node.inputs)
                 if t is not None and id(t) not in target_ids and t.grad_fn not in useful)


def _call_backward(node, out_grads, deliver, skip=(), only=None):
    """Run ``node``'s backward and deliver its input gradients: all of them, all but the
    positions in ``skip``, or ``only`` those (``needs_input_grad`` is narrowed to match, so
    a split primitive computes just what is asked)."""
    ctx, prim = node.ctx, node.prim
    keep = [i not in skip if only is None else i in only for i in range(len(node.inputs))]
    narrowed = bool(skip) or only is not None
    if narrowed:
        wanted = ctx.needs_input_grad
        ctx.needs_input_grad = tuple(w and k for w, k in zip(wanted, keep))
    start = perf_counter()
    try:
        in_grads = prim.backward(ctx, *out_grads)
    finally:
        if narrowed:
            ctx.needs_input_grad = wanted
    prim.backward_time += perf_counter() - start
    if not isinstance(in_grads, tuple):
        in_grads = (in_grads,)
    if len(in_grads) != len(node.inputs):
        raise RuntimeError(f"{prim.name}.backward returned {len(in_grads)} gradients for "
                           f"{len(node.inputs)} inputs")
    for tensor, grad, k in zip(node.inputs, in_grads, keep):
        if k and grad is not None and tensor is not None and tensor.requires_grad:
            deliver(tensor, _fit(grad, tensor, prim))


def _memory_owner(array):
    return array if array.base is None else array.base


def _own(grad, claimed, xp):
    """``grad``, or a copy of it when its memory is already handed out or it is read-only."""
    if isinstance(grad, RowTensor):
        return grad
    if not isinstance(grad, xp.ndarray):
        return xp.array(grad)      # a NumPy scalar (from 0-d arithmetic) becomes a fresh array
    owner = _memory_owner(grad)
    if id(owner) in claimed or not getattr(grad.flags, "writeable", True):
        return grad.copy()
    claimed[id(owner)] = owner   # keeps owner alive, so its id cannot be reused meanwhile
    return grad


class _RootPrim:
    name = "backward"


_NO_OBSERVER = BackwardObserver()
