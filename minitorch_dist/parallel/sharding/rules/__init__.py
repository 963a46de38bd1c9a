"""Sharding rules: how each primitive runs on local slices under a strategy.

A rule is a pure function of a primitive call (its full input shapes, non-tensor
arguments and attributes), a strategy and the world size; it returns a ``ShardPlan``
(device matrix, tensor maps, the operator's own forward communication, and how the local
call's arguments change) and does no communication itself. Sharding propagation picks
among ``candidates``; the per-rank executor runs ``local_call``/``run_local`` and then
the plan's ``forward_comm``. ``base`` explains the vocabulary; each family has a module:

* ``matmul``: MatMul, BatchMatMul (AllReduce or, with out_strategy, ReduceScatter);
* ``elementwise``: unary maps and broadcasting binary arithmetic and comparisons;
* ``reduction``: ReduceSum/Mean/Max/Min (AllReduce over split reduced axes), Argmax/Argmin,
  ArgMaxWithValue;
* ``softmax``: Softmax, LogSoftmax (axis whole); ``loss``: the loss primitives;
* ``shape``: Reshape, Flatten, Transpose, ExpandDims, Squeeze, BroadcastTo, Concat, Stack, Split;
* ``gather``: Gather and EmbeddingLookup (ids split, or table rows split with masking);
* ``axis_ops``: CumSum, L2Normalize, TopK (their axis whole) and Select;
* ``tile``: Tile (the strategy splits the multiples' positions); ``unique``: Unique (whole);
* ``nd_indexing``: GatherNd (indices' leading dims split, x whole);
* ``layer_norm``: LayerNorm (the normalised axes whole, gamma/beta split like x);
* ``bias_add``: BiasAdd (the bias split like x's channel axis);
* ``one_hot``: OneHot (the indices split like the output's rows, the depth axis whole).
"""
from .errors import ShardingError
from .base import (CommStep, ShardPlan, Rule, coordinates, dim_split, keep_inputs, register,
                   rule_for, supported_primitives)
from .planning import candidates, check_strategy, default_strategy, local_call, plan, run_local
from . import matmul, elementwise, reduction, softmax, loss, shape, gather, axis_ops  # noqa: F401,E501  (register)
from . import tile, unique, nd_indexing, layer_norm  # noqa: F401  (register)
from . import bias_add, batch_norm, conv, one_hot  # noqa: F401  (register)

__all__ = ["ShardingError", "CommStep", "ShardPlan", "Rule", "plan", "candidates",
           "default_strategy", "rule_for", "register", "supported_primitives", "local_call",
           "run_local", "coordinates", "dim_split", "keep_inputs", "check_strategy"]
