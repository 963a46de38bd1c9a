"""BatchNorm on slices: each rank normalises its slice with its own statistics.

``BatchNorm(is_training, epsilon, momentum)(x, gamma, beta, moving_mean, moving_variance)``
normalises ``x`` (N, C) or (N, C, ...) per channel. MindSpore's rule (``BatchNormInfo``):

* ``x`` splits on any dimension; the four (C,) tensors follow ``x``'s channel split;
* the device matrix is ``x``'s strategy; ``y`` has ``x``'s layout;
* in training with the batch (or a spatial dimension) split, MindSpore inserts a forward
  AllReduce of the statistics only on Ascend, where it swaps in ``SyncBatchNorm``; on GPU
  and CPU each rank normalises with its slice's mean and variance and no collective runs.

There is no Ascend here, so the GPU/CPU behaviour is the one served: per-rank statistics,
no communication (a ResNet step under AUTO_PARALLEL data parallel no longer gathers the
batch at every BatchNorm). One process normalises with the whole batch's statistics, so a
split batch gives other outputs than one process, as on MindSpore's GPUs; each rank's moving
statistics follow its own slices (they differ between ranks, as each MindSpore rank's do).
gamma's and beta's gradients are partial on each rank; their mirrors sum them.

>>> from minitorch_dist import ops
>>> from minitorch_dist.parallel.sharding.rules import plan
>>> p = plan(ops.BatchNorm(), ((4, 1, 1, 1), (1,), (1,), (1,), (1,)),
...          [(8, 3, 4, 4)] + [(3,)] * 4, [None] * 5, {}, 4)
>>> p.input_maps[0], p.output_maps, p.forward_comm
((3, 2, 1, 0), ((3, 2, 1, 0),), ())
"""
from ....ops import normalization
from .base import Grid, Rule, ShardPlan, register
from .elementwise import _maps_at

__all__ = ["BatchNormRule"]


class BatchNormRule(Rule):
    types = (normalization.BatchNorm,)

    def check_call(self, call):
        call.need_tensors(5, "x, gamma, beta, moving_mean, moving_variance")
        x = call.shapes[0]
        if len(x) < 2 or any(s != (x[1],) for s in call.shapes[1:]):
            raise call.error(f"gamma, beta and the moving statistics must have shape (C,) for x "
                             f"(N, C, ...), got x {x} and {call.shapes[1:]}")

    def op_dims(self, call):
        return call.shapes[0]

    def strategy_from(self, call, splits):
        splits = tuple(splits)
        return (splits,) + ((splits[1],),) * 4

    def build(self, call, strategy, world, out_strategy):
        x_split, others = strategy[0], strategy[1:]
        if any(tuple(s) != (x_split[1],) for s in others):
            raise call.error(f"in_strategy {strategy}: gamma, beta, moving_mean and "
                             f"moving_variance must each be split like x's channels, "
                             f"({x_split[1]},)")
        grid = Grid(call, x_split, world, strategy)
        x_map = tuple(grid.axis(d) for d in range(len(x_split)))
        channel = (x_map[1],)
        maps = dict(zip(call.positions, (x_map,) + (channel,) * 4))
        return ShardPlan(grid.device_matrix, _maps_at(call, maps), (x_map,))


register(BatchNormRule())
