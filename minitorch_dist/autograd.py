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

import numpy as np

from . import kernels
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
        links = []          # a loop, not a comprehension: no frame of its own per node
        for t in inputs:
            if t is not None and t.grad_fn is not None:
                link = _new_link(InputLink)     # made here: no __init__ frame per link
                link.tensor = weakref.ref(t)
                link.grad_fn, link._out_index = t.grad_fn, t._out_index
                link.requires_grad = t.requires_grad
                data = t.data   # the array's own shape and dtype: no property call per link
                link.shape, link.dtype, link.device = data.shape, data.dtype, t.device
                t = link
            links.append(t)
        self._links = tuple(links)
        self.out_meta = out_meta    # (shape, dtype) per output for multi-output primitives

    @property
    def inputs(self):
        """The inputs: each tensor, or its link once the tensor itself is gone."""
        # _live inlined, in a loop rather than a comprehension: this runs once per node and
        # backward pass
        resolved = []
        for t in self._links:
            resolved.append(t if type(t) is not InputLink or (live := t.tensor()) is None else live)
        return tuple(resolved)

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
    # Node.__init__ makes and fills each link (``tensor`` is a weak reference to the tensor)


_new_link = object.__new__


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
    if extra == 1 and grad.ndim == 2 and shape[0] == grad.shape[1] and \
            type(grad) is np.ndarray and grad.dtype.char in "fd":
        return kernels.sum_rows(grad)   # a bias gradient: one pass in C++ where built
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
    xp = tensor.device.xp
    # a tensor's shape and dtype are its array's: read there, not through two property calls
    meta = tensor if type(tensor) is InputLink else tensor.data
    shape = meta.shape
    if not isinstance(grad, xp.ndarray):
        if isinstance(grad, RowTensor):
            if tuple(grad.dense_shape) != shape:
                raise RuntimeError(f"{prim.name}: sparse gradient of shape {grad.dense_shape} "
                                   f"for an input of shape {shape}")
            return grad
        grad = xp.asarray(grad)   # NumPy turns 0-d results into scalars; gradients stay arrays
    if grad.shape != shape:
        grad = unbroadcast(grad, shape)
        if grad.shape != shape:
            raise RuntimeError(f"{prim.name}.backward returned a gradient of shape {grad.shape} "
                               f"for an input of shape {shape}")
    if grad.dtype != meta.dtype:
        grad = half.convert(grad, meta.dtype)
    return grad


def _accumulate(total, grad):
    if total is None:
        return grad
    if isinstance(total, RowTensor) or isinstance(grad, RowTensor):
        return RowTensor.add(total, grad)
    return total + grad


def _topological_nodes(roots):
    """Nodes reachable from ``roots``, each listed after every node that consumes it."""
    return _topological_order(roots)[0]


def _topological_order(roots):
    """``(nodes, inputs, leaf_ids)``: the nodes of ``_topological_nodes`` and, position by
    position, each node's inputs resolved once (``Node.inputs``), for the pass to reuse; and
    the ids of the leaf inputs (no ``grad_fn``) that require a gradient. In C++ where the
    extension is built (``cpp/engine.cpp``), else ``_python_topological_order``."""
    if _native is not None:
        return _native.topological_order(roots, InputLink)
    return _python_topological_order(roots)


def _python_topological_order(roots):
    """``_topological_order``'s Python twin."""
    order, order_inputs, seen, leaf_ids = [], [], set(), set()
    for root in roots:
        if root.grad_fn is None or root.grad_fn in seen:
            continue
        stack = [(root.grad_fn, None)]
        while stack:
            node, inputs = stack.pop()
            if inputs is not None:        # every consumer's subtree is done: list it
                order.append(node)
                order_inputs.append(inputs)
                continue
            if node in seen:
                continue
            seen.add(node)
            inputs = node.inputs
            stack.append((node, inputs))
            for inp in inputs:
                if inp is None:
                    continue
                producer = inp.grad_fn
                if producer is None:
                    if inp.requires_grad:
                        leaf_ids.add(id(inp))
                elif producer not in seen:
                    stack.append((producer, None))
    order.reverse()
    order_inputs.reverse()
    return order, order_inputs, leaf_ids


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
    held = []      # (node, its inputs, its output gradients, input positions held back)
    target_ids = None if targets is None else {id(t) for t in targets}

    for root, grad in zip(roots, root_grads):
        if root.requires_grad:
            _deliver(root, _fit(grad, root, _RootPrim), pending, leaves, target_ids)

    nodes, node_inputs, leaf_ids = _topological_order(roots)
    # With targets, only nodes with a target below them run (a gradient of the wide weights
    # alone skips the deep network's backward, as PyTorch's autograd.grad does). A node is
    # recorded only above an input that wants a gradient, so every node has such a leaf
    # below it: when all those leaves are targets (value_and_grad over every weight),
    # nothing is pruned and the pruning walk is skipped.
    useful, off_path = (None, None) if target_ids is None or leaf_ids <= target_ids else \
        _nodes_reaching(nodes, node_inputs, target_ids)
    watching = observer is not _NO_OBSERVER
    if not watching and useful is None and _native is not None:    # the common pass, in C++
        _native.backward_nodes(nodes, node_inputs, pending, leaves, target_ids, retain_graph,
                               _native_helpers)
        return _hand_out(leaves, targets, root_grads, ())
    finals = FinalGradients(observer, nodes, targets, leaves)

    for index, node in enumerate(nodes):
        inputs, node_inputs[index] = node_inputs[index], None    # held no longer than here
        if node.ctx is None:
            raise RuntimeError("trying to backward through the graph a second time; pass "
                               "retain_graph=True to the first backward if you need to")
        if useful is not None and node not in useful:
            if not retain_graph:
                node.ctx = None
            continue
        if node.out_meta is None:   # _output_gradients' single-output case, inline
            out_grads = pending.pop((node, 0), None)
            if out_grads is not None:
                if type(out_grads) is not node.ctx.xp.ndarray:    # a scalar, a RowTensor
                    out_grads = _output_gradients(node, {(node, 0): out_grads})
                else:
                    out_grads = (out_grads,)
        else:
            out_grads = _output_gradients(node, pending)
        if out_grads is not None:
            hold = tuple(observer.deferred_inputs(node)) if watching else ()
            if hold:
                held.append((node, inputs, out_grads, hold))
                finals.hold(node, hold)
            skip = hold + off_path.get(node, ()) if useful is not None else hold
            if watching and finals.slotting and not hold:   # gradients into the observer's memory
                _call_into_slots(finals, node, inputs, out_grads, pending, leaves, target_ids,
                                 skip)
            else:
                _call_backward(node, inputs, out_grads, pending, leaves, target_ids, skip=skip)
            if not retain_graph and not hold:
                node.ctx = None
        if finals.final_after:      # some target's gradient may be final now
            finals.after(index)

    if held:
        observer.before_deferred()
    for node, inputs, out_grads, hold in held:
        _call_backward(node, inputs, out_grads, pending, leaves, target_ids, only=hold)
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
        if tid in taken:
            continue
        grad = entry[1]
        if type(grad) is np.ndarray and grad.base is None and id(grad) not in claimed and \
                grad.flags.writeable and entry[0].device.xp is np:  # _own's common case
            claimed[id(grad)] = grad
        else:
            entry[1] = _own(grad, claimed, entry[0].device.xp)
    if targets is not None:
        grads = []      # a loop, not a comprehension: one look-up per target, no frame
        for t in targets:
            entry = leaves.get(id(t))
            grads.append(None if entry is None else entry[1])
        return grads
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


def _nodes_reaching(nodes, node_inputs, target_ids):
    """``(useful, off_path)``. ``useful``: the nodes (of ``nodes``, consumers first;
    ``node_inputs`` their resolved inputs) from which some target is reached, and those
    whose backward always runs (pipeline send/recv), with every node on the way.
    ``off_path``: for a useful node, the positions of its inputs that want a gradient
    (``needs_input_grad``) which reaches no target, so it is not computed (an input that
    wants none is left out: there is nothing to narrow). One pass, producers first: an
    input's producer is settled before its consumer is looked at."""
    useful, off_path = set(), {}
    for node, inputs in zip(reversed(nodes), reversed(node_inputs)):     # producers first
        if node.prim.backward_always_runs:
            useful.add(node)
            continue
        needs = getattr(node.ctx, "needs_input_grad", None)   # a hand-made context may lack it
        reaching, skip = False, []
        for i, inp in enumerate(inputs):
            if inp is None:
                continue
            if id(inp) in target_ids or inp.grad_fn in useful:
                reaching = True
            elif needs is None or needs[i]:
                skip.append(i)
        if reaching:
            useful.add(node)
            if skip:
                off_path[node] = tuple(skip)
    return useful, off_path


def _call_backward(node, inputs, out_grads, pending, leaves, target_ids, skip=(), only=None):
    """Run ``node``'s backward and deliver its input gradients (``inputs``: ``node.inputs``
    resolved): all of them, all but the positions in ``skip``, or ``only`` those
    (``needs_input_grad`` is narrowed to match, so a split primitive computes just what is
    asked). ``pending``, ``leaves`` and ``target_ids`` are ``run_backward``'s, where each
    gradient is delivered (``_deliver``)."""
    ctx, prim = node.ctx, node.prim
    narrowed = bool(skip) or only is not None
    if narrowed:
        keep = [i not in skip if only is None else i in only for i in range(len(inputs))]
        wanted = ctx.needs_input_grad
        ctx.needs_input_grad = tuple(w and k for w, k in zip(wanted, keep))
        start = perf_counter()
        try:
            in_grads = prim.backward(ctx, *out_grads)
        finally:
            ctx.needs_input_grad = wanted
    else:               # the common case: every input that wants a gradient gets one
        start = perf_counter()
        in_grads = prim.backward(ctx, *out_grads)
    prim.backward_time += perf_counter() - start
    if not isinstance(in_grads, tuple):
        in_grads = (in_grads,)
    if len(in_grads) != len(inputs):
        raise RuntimeError(f"{prim.name}.backward returned {len(in_grads)} gradients for "
                           f"{len(inputs)} inputs")
    if narrowed:
        in_grads = [g if k else None for g, k in zip(in_grads, keep)]
    for tensor, grad in zip(inputs, in_grads):
        if grad is None or tensor is None or not tensor.requires_grad:
            continue
        # the common case inline: a host array of the input's shape and dtype needs no _fit
        meta = tensor if type(tensor) is InputLink else tensor.data
        if type(grad) is not np.ndarray or grad.shape != meta.shape or \
                grad.dtype is not meta.dtype or tensor.device.xp is not np:
            grad = _fit(grad, tensor, prim)
        _deliver(tensor, grad, pending, leaves, target_ids)


def _call_into_slots(finals, node, inputs, out_grads, pending, leaves, target_ids, skip):
    """``_call_backward`` with the observer's slots for this node's gradients, if it offers
    any, in ``ctx.grad_slots`` for this call only (``BackwardObserver.gradient_slot``)."""
    slots = finals.slots(node, inputs)
    if slots is None:
        _call_backward(node, inputs, out_grads, pending, leaves, target_ids, skip=skip)
        return
    node.ctx.grad_slots = slots
    try:
        _call_backward(node, inputs, out_grads, pending, leaves, target_ids, skip=skip)
    finally:
        node.ctx.grad_slots = None


def _deliver(tensor, grad, pending, leaves, target_ids):
    """Add ``grad`` to ``tensor``'s: into ``leaves`` for a leaf or a target, and into
    ``pending`` (by producer and output index) for an intermediate, whose node runs later."""
    producer = tensor.grad_fn
    if producer is None or target_ids is not None and id(tensor) in target_ids:
        entry = leaves.get(id(tensor))
        if entry is None:
            leaves[id(tensor)] = [tensor, grad]
        else:
            entry[1] = _accumulate(entry[1], grad)
        if producer is None:
            return
    key = (producer, tensor._out_index)
    total = pending.get(key)
    pending[key] = grad if total is None else _accumulate(total, grad)


def _memory_owner(array):
    return array if array.base is None else array.base


def _own(grad, claimed, xp):
    """``grad``, or a copy of it when its memory is already handed out or it is read-only."""
    if isinstance(grad, RowTensor):
        return grad
    if not isinstance(grad, xp.ndarray):
        return xp.array(grad)      # a NumPy scalar (from 0-d arithmetic) becomes a fresh array
    owner = grad if grad.base is None else grad.base     # _memory_owner, inlined
    if id(owner) in claimed or not getattr(grad.flags, "writeable", True):
        return grad.copy()
    claimed[id(owner)] = owner   # keeps owner alive, so its id cannot be reused meanwhile
    return grad


class _RootPrim:
    name = "backward"


_NO_OBSERVER = BackwardObserver()

# The engine's two hot loops in C++ (cpp/engine.cpp), each step the same as its Python twin
# here; None without the extension (or with MINITORCH_DIST_NO_CPP=1): the twins run.
_native = kernels.native._C if kernels.HAVE_CPP and \
    hasattr(kernels.native._C, "backward_nodes") else None
_native_helpers = (np, np.ndarray, InputLink, _fit, _accumulate, _output_gradients)
