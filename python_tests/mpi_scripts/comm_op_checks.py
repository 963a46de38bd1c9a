"""The differentiable collectives against closed forms, forward and backward, on any group.

Shared by ``test_comm_ops.py`` (ranks as threads) and ``check_comm_ops.py`` (MPI ranks).
Rank r's input and its loss weights come from seeds that depend on r only, so every rank
can rebuild all ranks' data and check its own result without further communication.
Rank r's loss is ``sum(w_r * op(x_r))``; the gradient checked is that of the total loss
(the sum over ranks), which is what the backward collectives compute.
"""
import numpy as np

import minitorch_dist as ms
from minitorch_dist.parallel.comm import collectives as comm_ops

SHAPE = (4, 4, 8)          # every axis divisible by group sizes 1, 2 and 4
CASES = (
    ("all_reduce", {"op": "sum"}), ("all_reduce", {"op": "mean"}),
    ("all_reduce", {"op": "max"}), ("all_reduce", {"op": "min"}),
    ("all_gather", {"axis": 0}), ("all_gather", {"axis": 1}), ("all_gather", {"axis": -1}),
    ("reduce_scatter", {"axis": 0, "op": "sum"}), ("reduce_scatter", {"axis": 2, "op": "mean"}),
    ("reduce_scatter", {"axis": -2, "op": "sum"}),
    ("all_to_all", {"split_axis": 0, "concat_axis": 0}),
    ("all_to_all", {"split_axis": 0, "concat_axis": 2}),
    ("all_to_all", {"split_axis": 2, "concat_axis": 1}),
    ("all_to_all", {"split_axis": -1, "concat_axis": -1}),
    ("broadcast", {"root": 0}), ("broadcast", {"root": -1}),   # -1: the last rank
)
CLASSES = {"all_reduce": comm_ops.AllReduce, "all_gather": comm_ops.AllGather,
           "reduce_scatter": comm_ops.ReduceScatter, "all_to_all": comm_ops.AllToAll,
           "broadcast": comm_ops.Broadcast}
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12}


def rank_input(rank, shape=SHAPE, dtype=np.float64):
    return np.random.default_rng(1000 + rank).normal(size=shape).astype(dtype)


def rank_weight(rank, shape, dtype=np.float64):
    return np.random.default_rng(2000 + rank).uniform(0.5, 1.5, shape).astype(dtype)


def in_order(arrays):
    """The sum in rank order, as the communicators reduce."""
    total = arrays[0].copy()
    for other in arrays[1:]:
        total += other
    return total


def expected(name, settings, xs, ws, rank):
    """(output, gradient of the total loss) of rank ``rank`` from every rank's data."""
    n = len(xs)
    if name == "all_reduce":
        op = settings["op"]
        if op in ("sum", "mean"):
            scale = 1 / n if op == "mean" else 1
            return in_order(xs) * scale, in_order(ws) * scale
        y = np.max(xs, axis=0) if op == "max" else np.min(xs, axis=0)
        ties = in_order([(x == y).astype(y.dtype) for x in xs])
        return y, in_order(ws) * (xs[rank] == y) / ties
    if name == "all_gather":
        axis = settings["axis"]
        return (np.concatenate(xs, axis),
                in_order([np.split(w, n, axis)[rank] for w in ws]))
    if name == "reduce_scatter":
        axis, scale = settings["axis"], 1 / n if settings["op"] == "mean" else 1
        return np.split(in_order(xs), n, axis)[rank] * scale, np.concatenate(ws, axis) * scale
    if name == "all_to_all":
        split, concat = settings["split_axis"], settings["concat_axis"]
        return (np.concatenate([np.split(x, n, split)[rank] for x in xs], concat),
                np.concatenate([np.split(w, n, concat)[rank] for w in ws], split))
    root = settings["root"] % n
    return xs[root], in_order(ws) if rank == root else np.zeros_like(xs[rank])


def settings_for(settings, size):
    """Settings with a negative root turned into a rank of a group of ``size``."""
    if settings.get("root", 0) < 0:
        return dict(settings, root=settings["root"] % size)
    return settings


def run_op(name, settings, x, group, functional):
    """The collective on tensor ``x``: the class form, or the functional form."""
    if functional:
        return getattr(comm_ops, name)(x, group=group, **settings)
    return CLASSES[name](group=group, **settings)(x)


def check_case(comm, name, settings, dtype, group, functional=False):
    """Forward and backward of one collective on this rank against the closed forms.

    ``comm`` is this rank's communicator; ``group`` is what the primitive is given (``comm``
    itself, a group name, or None for the world)."""
    settings = settings_for(settings, comm.size)
    xs = [rank_input(r, dtype=dtype) for r in range(comm.size)]
    x = ms.Tensor(xs[comm.rank], requires_grad=True)
    y = run_op(name, settings, x, group, functional)
    ws = [rank_weight(r, y.shape, dtype) for r in range(comm.size)]
    (y * ms.Tensor(ws[comm.rank])).sum().backward()
    want_y, want_g = expected(name, settings, xs, ws, comm.rank)
    what = (name, settings, np.dtype(dtype).name, "functional" if functional else "class")
    rtol = TOLERANCE[dtype]
    assert y.dtype == dtype and x.grad.dtype == dtype, what
    assert y.shape == want_y.shape, (what, y.shape, want_y.shape)
    np.testing.assert_allclose(y.asnumpy(), want_y, rtol=rtol, atol=rtol, err_msg=str(what))
    np.testing.assert_allclose(x.grad.asnumpy(), want_g, rtol=rtol, atol=rtol, err_msg=str(what))


def check_all(comm, group):
    """Every case in float32 (functional forms) and float64 (classes); returns the count."""
    count = 0
    for name, settings in CASES:
        for dtype, functional in ((np.float32, True), (np.float64, False)):
            check_case(comm, name, settings, dtype, group, functional)
            count += 1
    return count
