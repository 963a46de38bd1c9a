"""Memory offload: MindSpore's ``set_context(memory_offload="ON")`` and
``set_offload_context(offload_config={...})``.

With offload on, what a device would hold between the forward and the backward of a step
moves to host memory and comes back when it is needed:

* **saved activations**: a cell without sub-cells (a layer) runs its forward recorded as
  usual, then every array its primitives saved for backward on a device is copied to the
  host and the device copy dropped; the layer's tape node brings them back just before its
  backward runs, one layer at a time. The values are the same arrays' copies, so gradients
  are bit-identical; device memory holds the activations of one layer during backward
  instead of all of them;
* **optimizer states**: an optimizer updates device parameters on the host and keeps its
  state there (``optimizer.target = "CPU"``'s path: the parameter and its gradient cross
  the bus, the state never does). ``offload_param="cpu"`` (the default) asks for it.

``offload_config`` keys (MindSpore's): ``offload_param`` ("cpu"; "disk" is refused),
``offload_path`` (str, used by "disk" only), ``auto_offload`` (bool, default True: layers'
activations offloaded too; False: optimizer states only), ``offload_cpu_size`` and
``offload_disk_size`` (sizes such as "512GB"), and the runtime tuning of Ascend's offload
(``enable_aio``, ``aio_block_size``, ``aio_queue_depth``, ``enable_pinned_mem``,
``host_mem_block_size``, ``offload_checkpoint``), checked and noted once. Unknown keys are
errors. On a job without a device (CPU only) activations and states already live in host
memory: offload is noted once and changes nothing. The switch and the configuration live in
``offload_config.py`` (``set_context`` reaches them without importing the engine).
"""
from .autograd import Node, _topological_nodes, enable_grad, is_grad_enabled, run_backward
from .backend import get_device
from .offload_config import (OffloadState, _note, get_offload_context, offload_on,
                             reset_offload_context, set_offload_context)
from .ops.primitive import Context, Primitive
from .tensor import Tensor

__all__ = ["set_offload_context", "get_offload_context", "reset_offload_context",
           "offload_on", "offloaded_call", "OffloadState"]

# ---- saved activations ------------------------------------------------------------------
def _to_host(ctx, host):
    """Copy every device array ``ctx`` holds to the host; return what to restore."""
    device = ctx.device
    moved = {}
    for name, value in list(ctx.__dict__.items()) + [("saved", ctx.saved)]:
        if isinstance(value, tuple) and any(isinstance(v, device.xp.ndarray) for v in value):
            moved[name] = tuple(host.copy_from(v, device) if isinstance(v, device.xp.ndarray)
                                else v for v in value)
        elif isinstance(value, device.xp.ndarray) and value.ndim:
            moved[name] = host.copy_from(value, device)
    for name, value in moved.items():
        setattr(ctx, name, value)
    return list(moved)


def _to_device(ctx, names, host):
    device = ctx.device
    for name in names:
        value = getattr(ctx, name)
        if isinstance(value, tuple):
            value = tuple(device.copy_from(v, host) if hasattr(v, "ndim") and v.ndim else v
                          for v in value)
        else:
            value = device.copy_from(value, host)
        setattr(ctx, name, value)


class _Offloaded(Primitive):
    """The tape node of a layer whose activations wait on the host."""

    differentiable = True
    instance_name = "offload"

    def backward(self, ctx, *out_grads):
        host = get_device("CPU")
        for node, names in ctx.moved:
            _to_device(node.ctx, names, host)
        roots = [(o, g) for o, g in zip(ctx.outputs, out_grads) if o.requires_grad]
        found = run_backward([o for o, _ in roots], [g for _, g in roots], targets=ctx.targets) \
            if roots else [None] * len(ctx.targets)
        return tuple(found)


_NODE_PRIM = _Offloaded()


def offloaded_call(call, cell, inputs, kwargs):
    """``call(*inputs, **kwargs)`` for layer ``cell`` with its saved activations on the host
    until its backward (see the module docstring); a plain call where nothing needs it."""
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    params = list(cell.trainable_params())
    if not is_grad_enabled() or not any(t.requires_grad for t in tensors + params):
        return call(*inputs, **kwargs)
    if all(t.device.is_host for t in tensors + params):
        _note("host_only", "memory_offload='ON': activations already live in host memory "
                           "here (no device), nothing to move")
        return call(*inputs, **kwargs)
    leaves = {id(t): Tensor._make(t.data, t.device, t.requires_grad) for t in tensors}
    with enable_grad():
        out = call(*[leaves.get(id(x), x) if isinstance(x, Tensor) else x for x in inputs],
                   **kwargs)
    outs = out if isinstance(out, tuple) else (out,)
    if not outs or not all(isinstance(o, Tensor) for o in outs):
        raise TypeError(f"memory offload: {type(cell).__name__} must return a Tensor or a "
                        f"tuple of Tensors, got {type(out).__name__}")
    host = get_device("CPU")
    moved = []
    for node in _topological_nodes([o for o in outs if o.requires_grad]):
        if node.ctx is not None and not node.ctx.device.is_host:
            moved.append((node, _to_host(node.ctx, host)))
    for leaf in leaves.values():         # its values now wait on the host, where needed
        leaf.data = _no_memory(leaf)
    inputs_for_grad = tuple(tensors) + tuple(p for p in params if id(p) not in leaves)
    ctx = Context(outs[0].device)
    # the backward needs the outputs' graph, not their values (the next layer holds those)
    ctx.moved = moved
    ctx.outputs = [Tensor._make(_no_memory(o), o.device, o.requires_grad, o.grad_fn,
                                o._out_index) for o in outs]
    ctx.targets = [leaves.get(id(t), t) for t in inputs_for_grad]
    ctx.needs_input_grad = tuple(t.requires_grad for t in inputs_for_grad)
    meta = tuple((o.shape, o.dtype) for o in outs) if isinstance(out, tuple) else None
    node = Node(_NODE_PRIM, ctx, inputs_for_grad, meta)
    made = tuple(Tensor._make(o.data, o.device, o.dtype.kind == "f",
                              node if o.dtype.kind == "f" else None, i) for i, o in enumerate(outs))
    return made if isinstance(out, tuple) else made[0]


def _no_memory(tensor):
    """A read-only stand-in with ``tensor``'s shape and dtype and no memory."""
    xp = tensor.device.xp
    return xp.broadcast_to(xp.zeros((), tensor.data.dtype), tensor.shape)
