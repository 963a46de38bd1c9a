"""What a sharded primitive is: a plan of layouts and communication, and the rule that makes it.

A *strategy* gives, for each tensor input of a primitive call, how many equal slices each
dimension is cut into: ``MatMul().shard(((2, 4), (4, 1)))``. A rule turns that into a
``ShardPlan``, MindSpore's picture of an operator:

* a **device matrix**: the world's ranks arranged as an n-dimensional grid, one axis per
  dimension of the operator's work (MatMul's ``[a, b, c]`` for rows, contraction, columns),
  plus a leading **repeated-calculation** axis when the strategy uses fewer devices than
  the world (those ranks compute the same slice);
* a **tensor map** per input and output: for each tensor dimension, the device-matrix axis
  it is split over, **counted from the right** (0 is the last axis), or -1 when every rank
  holds all of it. A rank's slice of a dimension mapped to axis ``k`` is its coordinate
  along that axis. An entry may also be a tuple of axes (major first): the dimension is
  split over all of them, as MatMul's ReduceScatter output is;
* the **forward communication** the operator itself does after computing on its slices
  (MatMul's AllReduce over the contraction axis) as ``CommStep``s;
* ``local_inputs``: how the call's non-tensor arguments change on a rank (a Reshape's
  target shape becomes the local one; a row-split Gather shifts the ids by the rank's
  first row), and, rarely, ``local_output``: a fix-up of the local result before the
  communication (the row-split Gather zeroes the ids another rank owns).

Ranks are laid out row-major over the device matrix: rank r's coordinates are r written in
the mixed radix of the matrix, the last axis fastest.

>>> plan = ShardPlan((2, 4, 1), ((2, 1), (1, 0)), ((2, 0),), (CommStep("all_reduce", (1,)),))
>>> plan.coordinates(5), plan.local_shape((2, 1), (16, 32))
((1, 1, 0), (8, 8))
"""
import math
import numbers
from dataclasses import dataclass, field

from ..layout import rank_coordinates
from .errors import ShardingError

__all__ = ["CommStep", "ShardPlan", "Rule", "Call", "Grid", "register", "rule_for",
           "supported_primitives", "coordinates", "keep_inputs", "dim_split"]

ALL_REDUCE, REDUCE_SCATTER = "all_reduce", "reduce_scatter"
_OPS = ("sum", "mean", "max", "min")


@dataclass(frozen=True)
class CommStep:
    """One collective the operator performs on its local result.

    ``kind``: "all_reduce" or "reduce_scatter"; ``axes``: the device-matrix axes (from the
    right) whose ranks form each group; ``output``: which output it applies to; ``dim``: the
    tensor dimension a reduce_scatter cuts (None for all_reduce); ``op``: "sum", "mean",
    "max" or "min". A "mean" over equal slices is the exact mean of the whole.
    """

    kind: str
    axes: tuple
    output: int = 0
    dim: int = None
    op: str = "sum"

    def __post_init__(self):
        if self.kind not in (ALL_REDUCE, REDUCE_SCATTER):
            raise ValueError(f"CommStep kind must be {ALL_REDUCE!r} or {REDUCE_SCATTER!r}, got {self.kind!r}")
        if self.op not in _OPS:
            raise ValueError(f"CommStep op must be one of {_OPS}, got {self.op!r}")

    def __str__(self):
        name = "AllReduce" if self.kind == ALL_REDUCE else f"ReduceScatter(dim {self.dim})"
        return f"{name}({self.op}) over device-matrix axes {self.axes} on output {self.output}"


def keep_inputs(inputs, attrs, coords):
    """The default ``local_inputs``: every argument stays as it is."""
    return list(inputs), dict(attrs)


def coordinates(device_matrix, rank):
    """Rank -> its index along each device-matrix axis, left to right (row-major).

    >>> coordinates((2, 4, 1), 6)
    (1, 2, 0)
    """
    return rank_coordinates(device_matrix, rank)


def dim_split(device_matrix, entry):
    """How many ways a tensor-map entry splits its dimension (-1: 1; a tuple: the product)."""
    axes = entry if isinstance(entry, tuple) else (entry,)
    n = len(device_matrix)
    return math.prod(device_matrix[n - 1 - a] for a in axes if a >= 0)


@dataclass(frozen=True)
class ShardPlan:
    """How one primitive call runs on local slices (see the module docstring).

    ``local_inputs(inputs, attrs, coords) -> (inputs, attrs)`` takes the call's arguments as
    a rank holds them (tensors already its slices) and the rank's coordinates; it returns
    what to pass to the primitive. ``local_output(outputs, inputs, attrs, coords)``, when not
    None, rewrites the local result (``outputs`` as the primitive returned it, ``inputs`` and
    ``attrs`` as given to ``local_inputs``) before ``forward_comm`` runs.
    """

    device_matrix: tuple
    input_maps: tuple
    output_maps: tuple
    forward_comm: tuple = ()
    local_inputs: object = field(default=keep_inputs, compare=False, repr=False)
    local_output: object = field(default=None, compare=False, repr=False)
    # ((input position, dimension 0's block sizes), ...) where the blocks differ in size
    input_row_blocks: tuple = ()

    @property
    def world(self):
        return math.prod(self.device_matrix)

    def coordinates(self, rank):
        return coordinates(self.device_matrix, rank)

    def splits(self, tensor_map):
        """Split count per dimension of a tensor with ``tensor_map``."""
        return tuple(dim_split(self.device_matrix, e) for e in tensor_map)

    def local_shape(self, tensor_map, shape):
        return tuple(n // s for n, s in zip(shape, self.splits(tensor_map)))

    def local_args(self, inputs, attrs, coords):
        return self.local_inputs(inputs, attrs, coords)


class Call:
    """One primitive call as the rules see it: ``in_shapes`` has the full shape of each
    tensor input and None elsewhere; ``inputs``/``attrs`` are the call's values."""

    def __init__(self, prim, in_shapes, inputs, attrs):
        self.prim = prim
        self.in_shapes = tuple(None if s is None else tuple(int(n) for n in s) for s in in_shapes)
        self.inputs = tuple(inputs) if inputs is not None else (None,) * len(self.in_shapes)
        self.attrs = dict(attrs or {})
        self.positions = [i for i, s in enumerate(self.in_shapes) if s is not None]
        self.shapes = [self.in_shapes[i] for i in self.positions]

    @property
    def name(self):
        return self.prim.name

    @property
    def kind(self):
        return type(self.prim).__name__

    def error(self, message):
        return ShardingError(f"{self.name}: {message}")

    def value(self, key, position=None, default=None):
        """A non-tensor argument: keyword ``key``, else positional ``position``, else default."""
        if key in self.attrs and self.attrs[key] is not None:
            return self.attrs[key]
        if position is not None and position < len(self.inputs) and self.in_shapes[position] is None \
                and self.inputs[position] is not None:
            return self.inputs[position]
        return default

    def need_tensors(self, count, what):
        if len(self.positions) != count:
            raise self.error(f"expects {count} tensor input(s) ({what}), got {len(self.positions)} "
                             f"(shapes {self.in_shapes})")


class Grid:
    """The device matrix of one operator: one axis per dimension of its work, in order,
    then a trailing repeated axis for the devices the strategy leaves over (MindSpore's
    default placement, ``repeated_num_in_dev_matrix_right_``). On the right, the repeated
    copies are neighbouring ranks, so an operator that uses fewer devices keeps the row
    blocks of one that uses them all: no data moves between them."""

    def __init__(self, call, splits, world, strategy):
        self.splits = tuple(int(s) for s in splits)
        used = math.prod(self.splits)
        if used > world:
            raise call.error(f"strategy {strategy} uses {used} devices but the world has only "
                             f"{world}; the product of the split counts must not exceed the world")
        if world % used:
            raise call.error(f"strategy {strategy} uses {used} devices, which does not divide the "
                             f"world of {world}; the product of the split counts must divide it")
        repeated = world // used
        self.shift = 1 if repeated > 1 or not self.splits else 0
        self.device_matrix = self.splits + ((repeated,) if self.shift else ())

    def axis(self, k):
        """The device-matrix axis (from the right) of work dimension ``k``."""
        return len(self.splits) - 1 - k + self.shift

    def split_axes(self, ks):
        """The axes of the work dimensions ``ks`` that are really split (> 1)."""
        return tuple(sorted((self.axis(k) for k in ks if self.splits[k] > 1), reverse=True))


class Rule:
    """The sharding of one family of primitives. Subclasses set ``types`` and write:

    * ``op_dims(call)``: the sizes of the operator's work dimensions (what a device-matrix
      axis can split: MatMul's rows, contraction and columns);
    * ``strategy_from(call, splits)``: the in_strategy that splits those dimensions so;
    * ``build(call, strategy, world, out_strategy)``: the ``ShardPlan`` (validating);
    * ``batch_op_dim(call)``: the work dimension data parallelism splits (None: none).
    """

    types = ()
    supports_out_strategy = False

    def check_call(self, call):
        """Reject calls the rule does not understand (wrong number of tensors, ...)."""

    def strategy_shapes(self, call):
        """What each in_strategy tuple splits, one shape per tuple: the tensor inputs' shapes,
        or None for them. A rule whose strategy splits something else returns
        ``(shapes, label)`` with a word for them in messages (Tile: its output's positions)."""
        return None

    def op_dims(self, call):
        raise NotImplementedError

    def strategy_from(self, call, splits):
        raise NotImplementedError

    def batch_op_dim(self, call):
        return 0 if self.op_dims(call) else None

    def build(self, call, strategy, world, out_strategy):
        raise NotImplementedError


_RULES = {}


def register(rule):
    """Serve every class in ``rule.types`` (and their subclasses) with ``rule``."""
    for cls in rule.types:
        _RULES[cls] = rule
    return rule


def rule_for(prim):
    """The rule for ``prim``'s class, found along its MRO; ShardingError if there is none."""
    for cls in type(prim).__mro__:
        rule = _RULES.get(cls)
        if rule is not None:
            return rule
    name = getattr(prim, "name", type(prim).__name__)
    raise ShardingError(f"{name}: {type(prim).__name__} has no sharding rule; operator sharding "
                        f"supports {', '.join(supported_primitives())}")


def supported_primitives():
    return sorted({cls.__name__ for cls in _RULES})


def is_count(n):
    return isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1


class OneTensorRule(Rule):
    """A rule of primitives with one tensor input whose work dimensions are its dimensions
    (unary elementwise, reductions, shape changes)."""

    def check_call(self, call):
        call.need_tensors(1, "x")

    def op_dims(self, call):
        return call.shapes[0]

    def strategy_from(self, call, splits):
        return (tuple(splits),)
