"""IR dumps of a sharded network, in the spirit of MindSpore's ``save_graphs=2`` files.

``save_graphs_path/rank_k/step_parallel_begin_0000.ir``: the traced graph before sharding,
every primitive with its instance name, its strategy (``given`` by ``shard`` or
``propagated``) and its full shapes.

``save_graphs_path/rank_k/18_execute_0000.ir``: what rank k really ran in its first step:
each primitive on its local shapes, and the communication inserted around it (the
redistributions feeding an input, the operator's own AllReduce or ReduceScatter) with the
ranks of each group. Both files are plain text; ``docs/sharding.md`` explains how to read them.
"""
import os

import numpy as np

from ...context import get_context
from ...tensor import Tensor
from .layout_api import strategy_text

__all__ = ["dump_begin", "dump_execute", "ExecuteListing", "format_begin"]

_EXECUTE_PASS = 18     # MindSpore's pass number of the execute dump, kept for familiarity


def _tensor_type(shape, dtype):
    name = np.dtype(dtype or "float32").name
    return f"<Tensor[{name[0].upper()}{name[1:]}], {tuple(shape)}>"


def _strategy_text(strategy):
    return strategy_text(strategy)


def _prim_attrs(prim):
    attrs = {k: v for k, v in vars(prim).items()
             if not k.startswith("_") and isinstance(v, (bool, int, float, str, tuple, type(None)))
             and k not in ("calls", "forward_time", "backward_time", "bytes_in", "bytes_out",
                           "instance_name", "in_strategy", "out_strategy")}
    attrs["in_strategy"] = _strategy_text(prim.in_strategy)
    attrs["out_strategy"] = _strategy_text(prim.out_strategy)
    return "{" + ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}"
                           for k, v in attrs.items()) + "}"


def format_begin(graph):
    lines = [f"# step_parallel_begin: {len(graph.nodes)} primitives, full shapes",
             "# (the shapes of one process; each rank holds only its slices: the local shapes "
             "are in *_execute_*.ir)",
             "# strategy: given (Primitive.shard) or propagated (sharding propagation / default)"]
    for node in graph.nodes:
        args = ", ".join(s.describe() if s is not None and hasattr(s, "describe") else repr(s)
                         for s in node.inputs)
        ins = ", ".join(_tensor_type(s, node.inputs[i].dtype)
                        for i, s in enumerate(node.in_shapes) if s is not None)
        outs = ", ".join(_tensor_type(s, d) for s, d in zip(node.out_shapes, node.out_dtypes))
        how = "given" if node.given else "propagated"
        lines.append(f"%{node.index}(out) = {node.type_name}({args}) {{instance name: {node.name}}} "
                     f"primitive_attrs: {_prim_attrs(node.prim)} "
                     f"{{in_strategy: {_strategy_text(node.strategy)}}}  # {how}")
        lines.append(f"    : ({ins}) -> ({outs})")
        lines.append(f"    # scope: ({node.scope})")
    return "\n".join(lines) + "\n"


class ExecuteListing:
    """Collects one rank's program as it runs (the executor calls the three methods)."""

    def __init__(self, rank):
        self.rank = rank
        self.lines = [f"# execute: rank {rank}'s program, local shapes, inserted communication"]
        self.count = 0
        self.names = {}     # id(tensor) -> %k

    def name(self, tensor, text):
        """Give a known tensor (an input, a parameter) its own name in the listing."""
        self.names[id(tensor)] = text

    def _name(self, tensor):
        key = id(tensor)
        if key not in self.names:
            self.names[key] = f"%{self.count}"
            self.count += 1
        return self.names[key]

    def _arg(self, value):
        return self._name(value) if isinstance(value, Tensor) else repr(value)

    def _type(self, tensors):
        return ", ".join(_tensor_type(t.shape, t.data.dtype) for t in tensors if isinstance(t, Tensor))

    def redistribution(self, node, position, steps, before, after):
        plan = "; ".join(str(s) for s in steps)
        arg = self._arg(before)          # arguments are named before results
        self.lines.append(f"{self._name(after)} = Redistribution({arg}) "
                          f"{{instance name: redistribution_op_{node.name}_input{position}}} "
                          f"steps: [{plan}]")
        self.lines.append(f"    : ({self._type([before])}) -> ({self._type([after])})")

    def primitive(self, node, inputs, out):
        outs = out if isinstance(out, tuple) else (out,)
        args = ", ".join(self._arg(x) for x in inputs)
        names = ", ".join(self._name(o) for o in outs)
        self.lines.append(f"{names} = {node.type_name}({args}) {{instance name: {node.name}}} "
                          f"{{in_strategy: {_strategy_text(node.strategy)}}}")
        self.lines.append(f"    : ({self._type(inputs)}) -> ({self._type(outs)})")
        self.lines.append(f"    # scope: ({node.scope})")

    def collective(self, node, step, ranks, before, after):
        kind = "AllReduce" if step.kind == "all_reduce" else "ReduceScatter"
        arg = self._arg(before)
        self.lines.append(f"{self._name(after)} = {kind}({arg}) "
                          f"{{instance name: forward_op_{node.name}}} primitive_attrs: "
                          f"{{op: {step.op}, rank_list: {tuple(ranks)}, group_size: {len(ranks)}}}")
        self.lines.append(f"    : ({self._type([before])}) -> ({self._type([after])})")

    def text(self):
        return "\n".join(self.lines) + "\n"


def _rank_dir(rank):
    path = os.path.join(get_context("save_graphs_path") or ".", f"rank_{rank}")
    os.makedirs(path, exist_ok=True)
    return path


def dump_begin(graph, plans, rank):
    if not get_context("save_graphs"):
        return None
    path = os.path.join(_rank_dir(rank), "step_parallel_begin_0000.ir")
    with open(path, "w") as f:
        f.write(format_begin(graph))
    return path


def dump_execute(listing, rank, step):
    """Written for the first step only: the program is the same every step."""
    if step:
        return None
    path = os.path.join(_rank_dir(rank), f"{_EXECUTE_PASS}_execute_0000.ir")
    with open(path, "w") as f:
        f.write(listing.text())
    return path
