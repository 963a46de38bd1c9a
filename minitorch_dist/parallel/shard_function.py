"""``Cell.shard`` and ``ms.shard``: a cell or function run with its inputs laid out as asked.

``block.shard(in_strategy=((1, 8),), parameter_plan={"block.dense2.weight": (8, 1)})``
returns a ``ShardFunction``, a Cell that calls ``block``. Under SEMI_AUTO_PARALLEL /
AUTO_PARALLEL it takes part in the sharded program like any network code:

* each tensor input passes through a ``LayoutConstraint``, an identity primitive carrying the
  input's strategy (split counts or a ``Layout``): the executor redistributes the input to
  that layout, and sharding propagation spreads it to the unannotated primitives inside;
* ``out_strategy`` does the same to the outputs;
* ``parameter_plan`` pins each named parameter's layout: propagation only chooses, for the
  primitive that first uses it, strategies that slice it so (an annotated primitive that
  disagrees is refused, naming both).

Names in ``parameter_plan`` are parameter names (``block1.dense2.weight``), optionally with
MindSpore's ``self.`` prefix, or names relative to the cell; a name that matches no
parameter is refused when ``shard`` is called. ``device`` and ``level`` are documented by
MindSpore as not in use: they are checked and noted once.
"""
import logging

from ..nn.cell import Cell
from ..ops.primitive import Primitive
from ..tensor import Tensor
from .sharding.layout_api import Layout
from .sharding.rules import register
from .sharding.rules.elementwise import UnaryRule

__all__ = ["ShardFunction", "LayoutConstraint", "shard"]

logger = logging.getLogger("minitorch_dist")
_DEVICES = ("Ascend", "GPU", "CPU")
_noted = set()


class LayoutConstraint(Primitive):
    """Identity; its strategy is the layout the tensor passing through must have."""

    def __init__(self, entry):
        self.shard((entry,))

    def forward(self, ctx, x):
        return x

    def backward(self, ctx, grad):
        return (grad,)


class _ConstraintRule(UnaryRule):
    types = (LayoutConstraint,)


register(_ConstraintRule())


def _check_entries(strategy, what):
    if strategy is None:
        return None
    if not isinstance(strategy, (tuple, list)):
        raise TypeError(f"shard: {what} must be a tuple with one strategy per tensor "
                        f"(a tuple of split counts, a Layout, or None), got {strategy!r}")
    for entry in strategy:
        if entry is None or isinstance(entry, Layout):
            continue
        if not isinstance(entry, (tuple, list)) or not all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in entry):
            raise TypeError(f"shard: {what} entry {entry!r} must be a tuple of positive split "
                            f"counts, a Layout or None (in {what}={strategy!r})")
    return tuple(strategy)


def _note_once(what, value, why):
    if (what, value) not in _noted:
        _noted.add((what, value))
        logger.warning("shard(%s=%r) is accepted and has no effect: %s", what, value, why)


def _check_device_level(device, level):
    if device not in _DEVICES:
        raise ValueError(f"shard: device must be one of {_DEVICES}, got {device!r}")
    if device != "Ascend":
        _note_once("device", device, "MindSpore documents it as not in use; the primitives run "
                                     "where set_context(device_target=...) places them")
    if not isinstance(level, int) or isinstance(level, bool) or level not in (0, 1, 2):
        raise ValueError(f"shard: level must be 0, 1 or 2, got {level!r}")
    if level:
        _note_once("level", level, "MindSpore documents it as not in use")


def _parameter_names(cell):
    """Every way a parameter of ``cell`` may be named -> the parameter."""
    names = {}
    for relative, param in cell.parameters_and_names():
        names[relative] = param
        names[param.name] = param
    return names


def _resolve_plan(cell, parameter_plan):
    if parameter_plan is None:
        return {}
    if not isinstance(parameter_plan, dict):
        raise TypeError(f"shard: parameter_plan must be a dict of parameter name -> strategy, "
                        f"got {type(parameter_plan).__name__}")
    if not isinstance(cell, Cell):
        raise TypeError("shard: parameter_plan needs a Cell (a function holds no parameters); "
                        f"got {cell!r}")
    names = _parameter_names(cell)
    plans = {}
    for key, strategy in parameter_plan.items():
        name = key[len("self."):] if isinstance(key, str) and key.startswith("self.") else key
        param = names.get(name)
        if param is None:
            raise ValueError(f"shard: parameter_plan names {key!r}, which is not a parameter of "
                             f"{type(cell).__name__}; its parameters are "
                             f"{sorted(p.name for p in names.values())}")
        _check_entries((strategy,), f"parameter_plan[{key!r}]")
        counts = strategy.split_counts() if isinstance(strategy, Layout) else tuple(strategy)
        if len(counts) != len(param.shape) or any(n % c for n, c in zip(param.shape, counts)):
            raise ValueError(f"shard: parameter_plan[{key!r}] = {strategy!r} does not fit the "
                             f"parameter's shape {tuple(param.shape)}: one split count per "
                             f"dimension, each dividing it")
        plans[param] = counts
    return plans


class ShardFunction(Cell):
    """``fn`` run with its inputs and outputs laid out as asked (module docstring)."""

    def __init__(self, fn, in_strategy, out_strategy=None, parameter_plan=None,
                 device="Ascend", level=0):
        super().__init__()
        if not callable(fn):
            raise TypeError(f"shard: fn must be a Cell or a function, got {fn!r}")
        _check_device_level(device, level)
        if in_strategy is None:
            raise ValueError("shard: in_strategy is required (one strategy per tensor input)")
        self.in_strategy = _check_entries(in_strategy, "in_strategy")
        self.out_strategy = _check_entries(out_strategy, "out_strategy")
        for param, counts in _resolve_plan(fn, parameter_plan).items():
            param.parameter_plan = counts        # read by sharding propagation
        # not a sub-cell: the block belongs to its network already, under its own name
        object.__setattr__(self, "fn", fn)
        self._inputs = [None if e is None else LayoutConstraint(e) for e in self.in_strategy]
        self._outputs = [None if e is None else LayoutConstraint(e)
                         for e in (self.out_strategy or ())]

    def construct(self, *inputs):
        tensors = [i for i, x in enumerate(inputs) if isinstance(x, Tensor)]
        if len(tensors) != len(self._inputs):
            raise ValueError(f"shard: in_strategy has {len(self._inputs)} entries but the call "
                             f"has {len(tensors)} tensor input(s); give one per tensor")
        inputs = list(inputs)
        for i, constraint in zip(tensors, self._inputs):
            if constraint is not None:
                inputs[i] = constraint(inputs[i])
        out = self.fn(*inputs)
        if not self._outputs:
            return out
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(self._outputs):
            raise ValueError(f"shard: out_strategy has {len(self._outputs)} entries but the "
                             f"function returned {len(outs)} output(s)")
        outs = tuple(o if c is None else c(o) for o, c in zip(outs, self._outputs))
        return outs if isinstance(out, tuple) else outs[0]


def shard(fn, in_strategy, out_strategy=None, parameter_plan=None, device="Ascend", level=0):
    """MindSpore's ``ms.shard``: ``fn`` (a Cell or function) as a ``ShardFunction``."""
    return ShardFunction(fn, in_strategy, out_strategy, parameter_plan, device, level)
