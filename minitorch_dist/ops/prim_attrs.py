"""``Primitive.add_prim_attr(name, value)``: what each MindSpore primitive attribute does here.

MindSpore attaches attributes to a primitive for its graph compiler. Model-zoo code sets
several (upstream Wide&Deep: ``cross_batch`` on its loss reductions, ``skip_redistribution``
on a reshape, ``field_size`` on a MatMul). Each one here either acts, or is recorded with a
one-time note that says why it changes nothing, so that no attribute is dropped in silence:

* ``primitive_target``: ``set_device`` (acts);
* an attribute the primitive already has (``transpose_a``, ``keep_dims``, ...), or one it
  lists in ``settable_attrs`` (Gather's ``manual_split``): set (acts);
* the compiler hints in ``HINTS``: recorded in ``prim.attrs``, noted once per name;
* anything else: recorded, noted once per name as unknown to this framework.
"""
import logging

__all__ = ["add_prim_attr", "HINTS"]

# name -> why it changes nothing here.
HINTS = {
    "cross_batch": "MindSpore then skips the all-reduce of a batch-split reduction, so each rank "
                   "reports its own part; here the reduction covers the whole batch, which trains "
                   "the same and prints the global value on every rank",
    "skip_redistribution": "MindSpore then reshapes the local slice as it is; here a reshape "
                           "redistributes when its layout needs it, so results equal one process",
    "field_size": "it guides MindSpore's layout of a column-sliced embedding's MatMul; layouts "
                  "here follow the strategies alone",
    "fusion": "communication fusion here is set by all_reduce_fusion_config and the buckets",
    "recompute": "recomputation is not implemented; activations are kept",
    "side_effect_mem": "eager execution keeps program order",
    "side_effect_io": "eager execution keeps program order",
    "parallel_optimizer": "optimizer states stay whole (enable_parallel_optimizer is off here)",
}

_noted = set()


def add_prim_attr(prim, name, value):
    if not isinstance(name, str) or not name:
        raise TypeError(f"{prim.name}.add_prim_attr: name must be a non-empty str, got {name!r}")
    if name == "primitive_target":
        return prim.set_device(value)
    if not name.startswith("_") and (name in vars(prim) or name in prim.settable_attrs):
        setattr(prim, name, value)
        return prim
    attrs = prim.__dict__.setdefault("attrs", {})
    attrs[name] = value
    key = (type(prim).__name__, name)
    if key not in _noted:
        _noted.add(key)
        why = HINTS.get(name, "this framework does not use it")
        logging.getLogger("minitorch_dist").warning(
            "%s.add_prim_attr(%r, ...) is recorded and has no effect: %s", type(prim).__name__,
            name, why)
    return prim
