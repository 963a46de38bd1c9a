"""Choosing every node's strategy: the user's, the default, or sharding propagation.

* In SEMI_AUTO_PARALLEL a node without ``shard`` runs data parallel (``default_strategy``).
* In AUTO_PARALLEL with ``search_mode="sharding_propagation"`` the user shards a few key
  operators and their strategies spread along the graph's edges, breadth first from the
  annotated nodes: each unannotated neighbour takes the candidate strategy whose input and
  output layouts cost the least redistribution against its already decided neighbours
  (bytes one rank sends, ``plan_cost``). Ties go to the candidate that uses more devices (less
  computation per rank), then to the one that keeps the neighbour's own split of the tensor
  (so a ReLU after ``MatMul((2, 4), (4, 1))`` stays ``(2, 4)``, as in MindSpore), then to
  the first candidate. Nodes no annotation reaches are decided the same way in call order,
  against the dataset's layouts: with no annotation at all this is a greedy search.
"""
from collections import deque

from .layout import TensorLayout
from .layout_api import Layout
from .redistribution import plan_cost, plan_redistribution
from .rules import ShardPlan, ShardingError, candidates, default_strategy, plan as plan_node, rule_for

__all__ = ["assign_strategies", "input_layout", "output_layout"]


def input_layout(shard_plan, position, shape):
    blocks = dict(shard_plan.input_row_blocks).get(position, ())
    return TensorLayout(shard_plan.device_matrix, shard_plan.input_maps[position], shape,
                        row_blocks=blocks)


def output_layout(shard_plan, index, shape):
    return TensorLayout(shard_plan.device_matrix, shard_plan.output_maps[index], shape)


def _itemsize(dtype):
    import numpy as np
    return np.dtype(dtype or "float32").itemsize


class _Chooser:
    """Holds the decided plans and scores candidates against them."""

    def __init__(self, graph, world, input_layouts):
        self.graph = graph
        self.world = world
        self.input_layouts = input_layouts
        self.plans = {}
        self.pins = _parameter_pins(graph)

    def meets_pins(self, node, shard_plan):
        """The first pinned parameter input ``shard_plan`` slices otherwise, or None."""
        for position, (name, counts) in self.pins.get(node.index, {}).items():
            if shard_plan.splits(shard_plan.input_maps[position]) != counts:
                return name, counts, shard_plan.splits(shard_plan.input_maps[position])
        return None

    def check_pins(self, node, shard_plan):
        miss = self.meets_pins(node, shard_plan)
        if miss is not None:
            name, counts, got = miss
            raise ShardingError(f"{node.name}: parameter_plan slices parameter {name!r} {counts}, "
                                f"but the primitive's strategy {node.strategy} slices it {got}")

    def plan_for(self, node, strategy):
        if not _has_rule(node.prim):
            return replicated_plan(node, strategy, self.world)
        return plan_node(node.prim, strategy, node.in_shapes, node.inputs, node.attrs,
                         self.world, out_strategy=node.out_strategy)

    def candidates(self, node):
        if not _has_rule(node.prim):
            return [None]
        return candidates(node.prim, node.in_shapes, node.inputs, node.attrs, self.world)

    def default(self, node):
        if not _has_rule(node.prim):
            return None
        return default_strategy(node.prim, node.in_shapes, node.inputs, node.attrs, self.world)

    def edge_cost(self, node, shard_plan):
        """Bytes this rank sends to feed ``node`` under ``shard_plan`` from its decided
        producers (and graph inputs), plus to feed its decided consumers."""
        cost = 0
        for i in node.tensor_positions():
            src = node.inputs[i]
            have = None
            if src.kind == "input":
                have = self.input_layouts[src.index]
            elif src.kind == "node" and src.node in self.plans:
                have = output_layout(self.plans[src.node], src.index, src.shape)
            if have is not None:
                want = input_layout(shard_plan, i, node.in_shapes[i])
                cost += plan_cost(plan_redistribution(have, want), _itemsize(src.dtype))
        for k, shape in enumerate(node.out_shapes):
            have = output_layout(shard_plan, k, shape)
            for consumer, position in node.consumers:
                if consumer in self.plans and self.graph.nodes[consumer].inputs[position].index == k:
                    want = input_layout(self.plans[consumer], position,
                                        self.graph.nodes[consumer].in_shapes[position])
                    cost += plan_cost(plan_redistribution(have, want), _itemsize(node.out_dtypes[k]))
        return cost

    def neighbour_splits(self, node):
        """Per input position fed by a decided producer: that producer's own first input
        strategy (its "shape of work"), which a tie keeps."""
        splits = {}
        for i in node.tensor_positions():
            src = node.inputs[i]
            if src.kind == "node" and src.node in self.plans:
                producer = self.graph.nodes[src.node]
                first = _counts(producer.strategy[0]) if producer.strategy else None
                if first is not None and len(first) == len(node.in_shapes[i]):
                    splits[i] = first
        return splits

    def choose(self, node):
        preferred = self.neighbour_splits(node)
        best, best_key = None, None
        for order, strategy in enumerate(self.candidates(node)):
            try:
                shard_plan = self.plan_for(node, strategy)
            except ValueError:
                continue
            if self.meets_pins(node, shard_plan) is not None:
                continue
            devices = _devices_used(shard_plan)
            # a primitive without a sharding rule has the one candidate None (run whole)
            keeps = 0 if strategy is None else sum(
                1 for i, s in preferred.items()
                if i < len(strategy) and strategy[i] is not None and tuple(strategy[i]) == s)
            key = (self.edge_cost(node, shard_plan), -devices, -keeps, order)
            if best_key is None or key < best_key:
                best, best_key = (strategy, shard_plan), key
        if best is None:
            pinned = {name: counts for name, counts in self.pins.get(node.index, {}).values()}
            raise ValueError(f"{node.name}: no valid strategy for shapes {node.in_shapes} on "
                             f"{self.world} devices" +
                             (f" that slices the parameters as parameter_plan asks ({pinned})"
                              if pinned else ""))
        return best


def _parameter_pins(graph):
    """node index -> {input position: (parameter name, split counts)}: the first use of each
    parameter a ``parameter_plan`` (``Cell.shard``) slices."""
    pins = {}
    for name, uses in graph.param_uses().items():
        counts = getattr(graph.params[name], "parameter_plan", None)
        if counts is not None:
            node_index, position = uses[0]
            pins.setdefault(node_index, {})[position] = (name, tuple(counts))
    return pins


def _counts(entry):
    """One input's split counts, from a tuple of counts or a ``Layout``."""
    if isinstance(entry, Layout):
        return entry.split_counts()
    return None if entry is None else tuple(entry)


def _has_rule(prim):
    try:
        rule_for(prim)
    except ShardingError:
        return False
    return True


def replicated_plan(node, strategy, world):
    """A primitive without a sharding rule (a convolution, a pooling, ...) still runs: every
    rank computes all of it on whole inputs (gathered first), unless the user asked for a
    split, which is an error naming the primitive."""
    if strategy is not None and any(n != 1 for s in strategy for n in s):
        raise ShardingError(f"{node.name}: {node.type_name} has no sharding rule, so it can only "
                            f"run unsplit (strategy of all ones); got {strategy}")
    return ShardPlan((world,), tuple(None if s is None else (-1,) * len(s) for s in node.in_shapes),
                     tuple((-1,) * len(s) for s in node.out_shapes))


def _devices_used(shard_plan):
    """Devices doing distinct work: the device matrix without the axes no tensor is split
    over (the repeated-calculation axis, where devices hold copies)."""
    used_axes = {a for maps in (shard_plan.input_maps, shard_plan.output_maps)
                 for m in maps if m is not None for a in m if a >= 0}
    size = len(shard_plan.device_matrix)
    devices = 1
    for axis in used_axes:
        devices *= shard_plan.device_matrix[size - 1 - axis]
    return devices


def _neighbours(graph, node):
    for i in node.tensor_positions():
        src = node.inputs[i]
        if src.kind == "node":
            yield src.node
    for consumer, _ in node.consumers:
        yield consumer


def assign_strategies(graph, world, input_layouts, propagate):
    """Fill ``node.strategy`` for every node and return ``{node index: ShardPlan}``.

    ``propagate``: True for sharding propagation, False for SEMI_AUTO_PARALLEL's data-parallel
    default. User strategies are validated first (a bad one raises, naming the primitive)."""
    chooser = _Chooser(graph, world, input_layouts)
    annotated = [n for n in graph.nodes if n.given]
    for node in annotated:
        chooser.plans[node.index] = chooser.plan_for(node, node.strategy)
        chooser.check_pins(node, chooser.plans[node.index])
    if not propagate:
        for node in graph.nodes:
            if not node.given:
                node.strategy = chooser.default(node)
                chooser.plans[node.index] = chooser.plan_for(node, node.strategy)
                if chooser.meets_pins(node, chooser.plans[node.index]) is not None:
                    node.strategy, chooser.plans[node.index] = chooser.choose(node)
        return chooser.plans
    queue = deque(n.index for n in annotated)
    while queue:
        node = graph.nodes[queue.popleft()]
        for other in _neighbours(graph, node):
            if other in chooser.plans:
                continue
            neighbour = graph.nodes[other]
            neighbour.strategy, chooser.plans[other] = chooser.choose(neighbour)
            queue.append(other)
    for node in graph.nodes:            # what no annotation reached, in call order
        if node.index not in chooser.plans:
            node.strategy, chooser.plans[node.index] = chooser.choose(node)
    return chooser.plans
