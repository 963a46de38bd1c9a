"""MatMul and BatchMatMul on slices: split rows, contraction and columns.

For ``MatMul().shard(((a, b), (b, c)))`` on ``x (M, K) @ w (K, N)`` the device matrix is
``[a, b, c]``: x is split ``a`` ways on rows and ``b`` ways on K (map ``[2, 1]``), w ``b``
ways on K and ``c`` ways on N (map ``[1, 0]``). Each rank multiplies its ``(M/a, K/b)``
block by its ``(K/b, N/c)`` block, which is only a *partial sum* of its ``(M/a, N/c)``
output block when ``b > 1``: an AllReduce(sum) over the ``b`` axis finishes it, and the
output has map ``[2, 0]`` (replicated along the ``b`` axis).

``out_strategy=((a * b, c),)`` asks for a ReduceScatter instead of the AllReduce: rank j of
each ``b`` group keeps the fully summed rows ``j`` of its ``M/a`` rows, so output rows are
split ``a * b`` ways over the ``a`` and ``b`` axes together (map ``[(2, 1), 0]``, ``a``
major). It moves the same bytes as the AllReduce's first half and leaves no copies.

The contraction dimension must be split the same way on both sides; with ``transpose_a``
or ``transpose_b`` the strategy still follows each input's stored dimensions. BatchMatMul
adds the (broadcast) batch dimensions in front: a batch dimension is split alike in both
inputs, and an input whose batch dimension is 1 (broadcast) keeps it whole.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> p = plan(ops.MatMul(), ((2, 4), (4, 1)), [(16, 32), (32, 16)], [None, None], {}, 8,
...          out_strategy=((8, 1),))
>>> p.output_maps, [str(s) for s in p.forward_comm]
((((2, 1), 0),), ['ReduceScatter(dim 0)(sum) over device-matrix axes (1,) on output 0'])
"""
from ....ops.matmul import BatchMatMul, MatMul
from .base import ALL_REDUCE, REDUCE_SCATTER, CommStep, Grid, Rule, ShardPlan, register

__all__ = ["MatMulRule"]


class MatMulRule(Rule):
    types = (BatchMatMul, MatMul)
    supports_out_strategy = True

    # ---- the call ---------------------------------------------------------------------
    @staticmethod
    def _flags(call):
        return bool(getattr(call.prim, "transpose_a", False)), bool(getattr(call.prim, "transpose_b", False))

    @staticmethod
    def _out_batch(a, b):
        lead_a, lead_b = a[:-2], b[:-2]
        n = max(len(lead_a), len(lead_b))
        lead_a = (1,) * (n - len(lead_a)) + lead_a
        lead_b = (1,) * (n - len(lead_b)) + lead_b
        return tuple(max(x, y) for x, y in zip(lead_a, lead_b))

    def check_call(self, call):
        call.need_tensors(2, "a and b")
        a, b = call.shapes
        if isinstance(call.prim, MatMul) and (len(a) != 2 or len(b) != 2):
            raise call.error(f"expects two 2-D tensors, got shapes {a} and {b}")
        if len(a) < 2 or len(b) < 2:
            raise call.error(f"expects tensors with at least 2 dimensions, got shapes {a} and {b}")
        ta, tb = self._flags(call)
        k_a = a[-2] if ta else a[-1]
        k_b = b[-1] if tb else b[-2]
        if k_a != k_b:
            raise call.error(f"inner dimensions differ: a of shape {a} and b of shape {b} "
                             f"({k_a} != {k_b}; transpose_a={ta}, transpose_b={tb})")
        for x, y in zip(reversed(a[:-2]), reversed(b[:-2])):
            if x != y and 1 not in (x, y):
                raise call.error(f"batch dimensions of {a} and {b} do not broadcast")

    def _dims(self, call):
        """(out batch shape, M, K, N)."""
        (a, b), (ta, tb) = call.shapes, self._flags(call)
        return (self._out_batch(a, b), a[-1] if ta else a[-2], a[-2] if ta else a[-1],
                b[-2] if tb else b[-1])

    def op_dims(self, call):
        batch, m, k, n = self._dims(call)
        return batch + (m, k, n)

    def strategy_from(self, call, splits):
        batch, _, _, _ = self._dims(call)
        nb = len(batch)
        sb, (m, k, n) = splits[:nb], splits[nb:]
        ta, tb = self._flags(call)
        a, b = call.shapes
        return (self._batch_part(a, batch, sb) + ((k, m) if ta else (m, k)),
                self._batch_part(b, batch, sb) + ((n, k) if tb else (k, n)))

    @staticmethod
    def _batch_part(shape, batch, splits):
        lead = len(batch) - (len(shape) - 2)
        return tuple(splits[lead + d] if shape[d] == batch[lead + d] else 1
                     for d in range(len(shape) - 2))

    def batch_op_dim(self, call):
        return 0   # the first batch dimension, or M for a 2-D product

    # ---- the plan ---------------------------------------------------------------------
    def build(self, call, strategy, world, out_strategy):
        (a, b), (sa, sb), (ta, tb) = call.shapes, strategy, self._flags(call)
        batch, M, K, N = self._dims(call)
        nb = len(batch)
        m, k_a = (sa[-1], sa[-2]) if ta else (sa[-2], sa[-1])
        k_b, n = (sb[-1], sb[-2]) if tb else (sb[-2], sb[-1])
        if k_a != k_b:
            raise call.error(
                f"strategies of relevant dimensions are not equal: in_strategy {strategy} splits "
                f"the contracting dimension (size {K}) of input a {k_a} ways (its dimension "
                f"{len(a) - 2 if ta else len(a) - 1}) but of input b {k_b} ways (its dimension "
                f"{len(b) - 1 if tb else len(b) - 2}); split it the same way in both")
        split_batch = []
        for j, size in enumerate(batch):
            seen = {}
            for name, shape, s in (("a", a, sa), ("b", b, sb)):
                d = j - (nb - (len(shape) - 2))
                if d >= 0 and shape[d] == size:
                    seen[name] = (d, s[d])
            counts = {c for _, c in seen.values()}
            if len(counts) > 1:
                raise call.error(
                    f"strategies of relevant dimensions are not equal: in_strategy {strategy} splits "
                    f"batch dimension {j} (size {size}) of input a {seen['a'][1]} ways (its dimension "
                    f"{seen['a'][0]}) but of input b {seen['b'][1]} ways (its dimension {seen['b'][0]})")
            split_batch.append(counts.pop() if counts else 1)
        grid = Grid(call, tuple(split_batch) + (m, k_a, n), world, strategy)
        ax_m, ax_k, ax_n = grid.axis(nb), grid.axis(nb + 1), grid.axis(nb + 2)

        def batch_map(shape):
            lead = nb - (len(shape) - 2)
            return tuple(grid.axis(lead + d) if shape[d] == batch[lead + d] else -1
                         for d in range(len(shape) - 2))

        map_a = batch_map(a) + ((ax_k, ax_m) if ta else (ax_m, ax_k))
        map_b = batch_map(b) + ((ax_n, ax_k) if tb else (ax_k, ax_n))
        out_map = tuple(grid.axis(j) for j in range(nb)) + (ax_m, ax_n)
        comm = (CommStep(ALL_REDUCE, (ax_k,)),) if k_a > 1 else ()
        natural = tuple(split_batch) + (m, n)
        if out_strategy is not None and out_strategy != (natural,):
            scattered = (m * k_a, n)
            if isinstance(call.prim, MatMul) and len(out_strategy) == 1 and out_strategy[0] == scattered:
                if M % (m * k_a):
                    raise call.error(f"out_strategy {out_strategy}: output dimension 0 of size {M} "
                                     f"cannot be reduce-scattered into {m * k_a} equal slices")
                rows = tuple(x for x, size in ((ax_m, m), (ax_k, k_a)) if size > 1)
                out_map = (rows if len(rows) > 1 else rows[0], ax_n)
                comm = (CommStep(REDUCE_SCATTER, (ax_k,), dim=0),)
            else:
                options = f"({natural},) (AllReduce)"
                if isinstance(call.prim, MatMul) and k_a > 1:
                    options += f" or ({scattered},) (ReduceScatter over the contracting axis)"
                raise call.error(f"out_strategy {out_strategy} does not fit in_strategy {strategy}: "
                                 f"the output strategy must be {options}")
        return ShardPlan(grid.device_matrix, (map_a, map_b), (out_map,), comm)


register(MatMulRule())
