"""``MicroBatchInterleaved``: MindSpore's multiple copy (``mindspore.parallel.nn``).

``MicroBatchInterleaved(network, interleave_num=2)`` cuts every Tensor input into
``interleave_num`` consecutive pieces on axis 0 (sizes ``i*n//k .. (i+1)*n//k``, so a batch
need not divide evenly), runs ``network`` on each piece and returns the **sum** of the
outputs, as MindSpore's does. For a network whose output sums over the batch (a loss with
``reduction="sum"``) that is exactly the plain network's output; for a mean loss it is
``interleave_num`` times the mean of the pieces' means (MindSpore's result too).

MindSpore uses the copies so that one copy's computation overlaps the other's model-parallel
communication in its static graph. Calls run eagerly here, one after the other, so the
copies change the order of work but overlap nothing: the wrapper gives MindSpore's values and
its smaller per-copy activations, not its speed-up.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist import nn
>>> net = nn.WithLossCell(nn.Dense(2, 1, weight_init="ones", bias_init="zeros"),
...                       nn.MSELoss(reduction="sum"))
>>> x, y = ms.Tensor(np.ones((4, 2), np.float32)), ms.Tensor(np.zeros((4, 1), np.float32))
>>> float(MicroBatchInterleaved(net, 2)(x, y).asnumpy()), float(net(x, y).asnumpy())
(16.0, 16.0)
"""
from ..nn.cell import Cell
from ..tensor import Tensor

__all__ = ["MicroBatchInterleaved"]


def _piece(x, index, count):
    n = x.shape[0]
    return x[index * n // count:(index + 1) * n // count]


class MicroBatchInterleaved(Cell):
    """Run ``network`` on ``interleave_num`` pieces of the batch and sum the outputs."""

    _name_scope = False
    # under semi/auto parallel each copy's network call is sharded on its own piece of the
    # batch: the cutting and summing around them is no network to trace
    _runs_training_step = True

    def __init__(self, network, interleave_num=2):
        super().__init__(auto_prefix=False)
        if not callable(network):
            raise TypeError(f"MicroBatchInterleaved: network must be a Cell, got "
                            f"{type(network).__name__}")
        if isinstance(interleave_num, bool) or not isinstance(interleave_num, int):
            raise TypeError(f"MicroBatchInterleaved: interleave_num must be an int, got "
                            f"{interleave_num!r}")
        if interleave_num <= 0:
            raise ValueError(f"MicroBatchInterleaved: interleave_num must be positive, got "
                             f"{interleave_num}")
        self.network = network
        self.interleave_num = interleave_num

    def construct(self, *inputs):
        for i, x in enumerate(inputs):
            if isinstance(x, Tensor) and (x.ndim == 0 or x.shape[0] < self.interleave_num):
                raise ValueError(f"MicroBatchInterleaved: input {i} has shape {x.shape}; its "
                                 f"axis 0 needs at least interleave_num={self.interleave_num} "
                                 "rows")
        total = None
        for k in range(self.interleave_num):
            piece = [_piece(x, k, self.interleave_num) if isinstance(x, Tensor) else x
                     for x in inputs]
            out = self.network(*piece)
            if isinstance(out, (tuple, list)):
                raise TypeError("MicroBatchInterleaved: the network must return one Tensor, "
                                f"got a {type(out).__name__}")
            total = out if total is None else total + out
        return total

    def extra_repr(self):
        return f"interleave_num={self.interleave_num}"
