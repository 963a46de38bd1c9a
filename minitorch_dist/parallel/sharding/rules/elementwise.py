"""Elementwise primitives: every output element needs only the input elements at its place.

Unary (ReLU, Exp, Cast, ...): any strategy works; each rank maps its slice and the output
keeps the input's layout. The device matrix is the strategy itself.

Binary with broadcasting (Add, Mul, comparisons, ...): the inputs are aligned from the
right, as NumPy broadcasts them, and the device matrix has one axis per *output* dimension.
An input dimension of the output's size must be split like every other input's matching
dimension (MindSpore: "strategies of relevant dimensions are not equal" otherwise); a
broadcast dimension (size 1) cannot be split and is held whole by every rank. So a bias
Add ``((a, b), (b,))`` gives the bias the output's column split and repeats it over rows.

Dropout draws its mask locally: ranks that hold copies of one slice (a repeated axis) draw
different masks, which is still dropout with the right rate but not the one-process mask.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> p = plan(ops.Add(), ((2, 4), (4,)), [(8, 16), (16,)], [None, None], {}, 8)
>>> p.device_matrix, p.input_maps, p.output_maps
((2, 4), ((1, 0), (0,)), ((1, 0),))
"""
import numpy as np

from ....ops import activation, arithmetic, control, elementwise, trigonometric
from ....ops.cast import Cast
from ....ops.dropout import Dropout
from .base import Grid, OneTensorRule, Rule, ShardPlan, register

__all__ = ["UnaryRule", "BinaryRule", "broadcast_layout"]


class UnaryRule(OneTensorRule):
    types = (activation.ReLU, activation.Sigmoid, activation.Tanh, activation.GeLU,
             elementwise.Exp, elementwise.Log, elementwise.Sqrt, elementwise.Rsqrt,
             elementwise.Abs, elementwise.Square, elementwise.Sign, arithmetic.Neg,
             trigonometric.Sin, trigonometric.Cos, trigonometric.Erf, trigonometric.Log1p,
             control.StopGradient, Cast, Dropout)

    def build(self, call, strategy, world, out_strategy):
        grid = Grid(call, strategy[0], world, strategy)
        tensor_map = tuple(grid.axis(d) for d in range(len(strategy[0])))
        return ShardPlan(grid.device_matrix, _maps_at(call, {call.positions[0]: tensor_map}),
                         (tensor_map,))


def _maps_at(call, maps):
    """One entry per positional input: the tensor map for tensors, None for the others."""
    return tuple(maps.get(i) for i in range(len(call.in_shapes)))


def check_constants(call):
    """A constant array argument (not a Tensor) is not sliced, so it may not add dimensions
    or sizes the tensors' layouts do not cover: only scalars are allowed."""
    for i, value in enumerate(call.inputs):
        if call.in_shapes[i] is None and value is not None and np.ndim(value) > 0:
            raise call.error(f"input {i} is a constant array of shape {np.shape(value)}; sharded "
                             "elementwise primitives take scalars or Tensors (wrap it in a Tensor "
                             "so that it gets a layout)")


def broadcast_shape(call, shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise call.error(f"input shapes {tuple(shapes)} do not broadcast") from None


def broadcast_layout(call, strategy, world, out_shape=None):
    """(grid, input maps by position, output map) for tensor inputs broadcast together.

    ``strategy[i]`` splits tensor input i. Each output dimension gets one device-matrix
    axis; an input dimension of the output's size is mapped to it (its split count must
    agree with the others'), a broadcast one (size 1) is left whole (-1)."""
    shapes = call.shapes
    out_shape = broadcast_shape(call, shapes) if out_shape is None else tuple(out_shape)
    n = len(out_shape)
    splits = []
    for j, size in enumerate(out_shape):
        seen = []
        for i, shape in enumerate(shapes):
            d = j - (n - len(shape))
            if d >= 0 and shape[d] == size:
                seen.append((i, d, strategy[i][d]))
        counts = {c for _, _, c in seen}
        if len(counts) > 1:
            detail = ", ".join(f"input {i} splits its dimension {d} {c} ways" for i, d, c in seen)
            raise call.error(f"strategies of relevant dimensions are not equal: output dimension {j} "
                             f"(size {size}) comes from inputs split differently ({detail}); "
                             f"in_strategy {strategy} must split it the same way in every input")
        splits.append(counts.pop() if counts else 1)
    grid = Grid(call, tuple(splits), world, strategy)
    maps = {}
    for pos, shape in zip(call.positions, shapes):
        lead = n - len(shape)
        maps[pos] = tuple(grid.axis(lead + d) if shape[d] == out_shape[lead + d] else -1
                          for d in range(len(shape)))
    return grid, _maps_at(call, maps), tuple(grid.axis(j) for j in range(n))


def broadcast_strategy(call, splits, out_shape=None):
    """The in_strategy that splits the broadcast output's dimensions by ``splits``."""
    shapes = call.shapes
    out_shape = broadcast_shape(call, shapes) if out_shape is None else tuple(out_shape)
    n = len(out_shape)
    return tuple(tuple(splits[n - len(shape) + d] if shape[d] == out_shape[n - len(shape) + d] else 1
                       for d in range(len(shape))) for shape in shapes)


class BinaryRule(Rule):
    types = (arithmetic.Add, arithmetic.Sub, arithmetic.Mul, arithmetic.Div, arithmetic.Pow,
             arithmetic.Maximum, arithmetic.Minimum, arithmetic.Equal, arithmetic.NotEqual,
             arithmetic.Less, arithmetic.LessEqual, arithmetic.Greater, arithmetic.GreaterEqual)

    def check_call(self, call):
        if not 1 <= len(call.positions) <= 2:
            raise call.error(f"expects one or two tensor inputs, got shapes {call.in_shapes}")
        check_constants(call)
        broadcast_shape(call, call.shapes)

    def op_dims(self, call):
        return broadcast_shape(call, call.shapes)

    def strategy_from(self, call, splits):
        return broadcast_strategy(call, splits)

    def build(self, call, strategy, world, out_strategy):
        grid, in_maps, out_map = broadcast_layout(call, strategy, world)
        return ShardPlan(grid.device_matrix, in_maps, (out_map,))


register(UnaryRule())
register(BinaryRule())
