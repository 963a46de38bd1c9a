"""Differentiable collectives: all-reduce, all-gather, reduce-scatter, all-to-all, broadcast.

Pipeline parallelism and operator sharding insert these primitives into the forward pass;
their backward is the adjoint collective, so gradients flow across ranks like any other.

Every rank runs its own tape and back-propagates its own loss ``l_r``; the quantity being
differentiated is the total loss ``L = sum over ranks r of l_r``. A collective's output on
rank ``s`` depends on the inputs of every rank, so the gradient for rank ``r``'s input
collects the contributions ``g_s = dl_s/dy_s`` of every rank: the backward is the
transpose (adjoint) of the forward, and it is again a collective.

=========================================  ===============================================
forward on rank r                          backward (``g_s``: gradient of rank s's output)
=========================================  ===============================================
``AllReduce("sum")``: y = sum_s x_s        ``AllReduce("sum")(g)``: dL/dx_r = sum_s g_s
``AllReduce("mean")``: y = mean_s x_s      ``AllReduce("mean")(g)``
``AllReduce("max"/"min")``                 ``AllReduce("sum")(g)`` where x_r attains the
                                           result, split among tied ranks; 0 elsewhere
``AllGather(axis)``: concat_s x_s          ``ReduceScatter("sum", axis)(g)``: rank r keeps
                                           the sum over s of g_s's chunk r
``ReduceScatter(axis)``: chunk r of        ``AllGather(axis)(g)`` (divided by the group size
sum_s x_s                                  for ``"mean"``)
``AllToAll(split, concat)``                ``AllToAll(concat, split)(g)``: every chunk
                                           goes back to the rank it came from
``Broadcast(root)``: y = x_root            ``sum_s g_s`` on the root (an all-reduce), zeros
                                           on the other ranks
=========================================  ===============================================

Because backward is a collective, every rank of the group must back-propagate through every
collective, in the same order: give the input ``requires_grad`` on all ranks alike, and let
each rank's loss depend on the output (a rank with nothing to contribute back-propagates
``0 * y``). Otherwise the ranks that do wait for the ones that do not.

Each primitive takes ``group``: a group name resolved by ``communication.get_communicator``
(None is the world) or a ``Communicator`` (tests pass the ones from ``run_ranks``). Arrays
go to the communicator as they live: host arrays over the host communicator that
bootstrapped NCCL when there is one (NCCL only moves device arrays), device arrays (CuPy,
or the virtual GPU's) over the group's own communicator -- the rule of
``DistributedGradReducer``. An axis other than 0 is moved to the front into a contiguous
buffer for the communicator (which moves axis 0, contiguous only) and moved back after.

>>> import minitorch_dist as ms
>>> from minitorch_dist.communication import run_ranks
>>> def rank_step(comm):
...     x = ms.Tensor([1.0, 2.0], requires_grad=True)
...     y = all_gather(x * (comm.rank + 1), group=comm)   # [1, 2, 2, 4] on both ranks
...     (y * (comm.rank + 1.0)).sum().backward()          # L = 1 * sum(y) + 2 * sum(y)
...     return y.asnumpy().tolist(), x.grad.asnumpy().tolist()
>>> run_ranks(2, rank_step)      # dL/dx = 3 * (rank + 1)
[([1.0, 2.0, 2.0, 4.0], [3.0, 3.0]), ([1.0, 2.0, 2.0, 4.0], [6.0, 6.0])]
"""
from ...backend.arrays import contiguous
from ...communication import Communicator, get_communicator
from ...ops.axes import normalize_axis
from ...ops.primitive import Primitive
from ...row_tensor import RowTensor
from ...runtime import _once
from ...thread_state import ThreadState
from .rows import gather_rows

__all__ = ["AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Broadcast", "Mirror",
           "MirrorDeferral",
           "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "mirror",
           "resolve_communicator", "communicator_for", "run_inserted"]

_ALLREDUCE_OPS = ("sum", "mean", "max", "min")
_REDUCE_SCATTER_OPS = ("sum", "mean")
_FUNCTIONAL = object()   # marks the shared instances of the functional forms (no own group)


# ---- choosing the communicator --------------------------------------------------------------
def resolve_communicator(group, owner="collective"):
    """``group`` as a ``Communicator``: a group name (None: the world) or a Communicator."""
    if isinstance(group, Communicator):
        return group
    if group is None or isinstance(group, str):
        return get_communicator(group)
    raise TypeError(f"{owner}: group must be a group name, None (the world) or a "
                    f"Communicator, got {type(group).__name__}")


def communicator_for(comm, device):
    """The communicator that moves arrays living on ``device`` for group ``comm``: host
    arrays travel over its host communicator (the one that bootstrapped NCCL, which only
    moves device arrays); everything else over ``comm`` itself."""
    return comm.host_communicator if device.is_host else comm


# ---- validation and layout helpers ------------------------------------------------------------
def _check_choice(owner, what, value, allowed):
    if value not in allowed:
        raise ValueError(f"{owner}: unknown {what} {value!r}; expected one of {allowed}")
    return value


def _check_int(owner, what, value):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{owner}: {what} must be an int, got {value!r}")
    return int(value)


def _check_root(owner, root, size):
    root = _check_int(owner, "root", root)
    if not 0 <= root < size:
        raise ValueError(f"{owner}: root must be a rank of the group, an int in [0, {size}), "
                         f"got {root}")
    return root


def _divisible(prim, shape, axis, size, role="axis"):
    if shape[axis] % size:
        raise ValueError(f"{prim.name}: {role} {axis} of a tensor of shape {tuple(shape)} has "
                         f"size {shape[axis]}, which is not divisible by the group size {size} "
                         f"(expected a multiple of {size})")


def _front(xp, array, axis):
    """A contiguous array holding ``array`` with ``axis`` moved to position 0."""
    return contiguous(xp.moveaxis(array, axis, 0) if axis else array)


def _back(xp, array, axis):
    """Undo ``_front``: axis 0 goes back to position ``axis`` (a view)."""
    return xp.moveaxis(array, 0, axis) if axis else array


def _gather(comm, xp, array, axis):
    """Every rank's ``array`` concatenated along ``axis`` in rank order."""
    front = _front(xp, array, axis)
    stacked = comm.allgather(front)                       # (size, *front.shape)
    return _back(xp, stacked.reshape((comm.size * front.shape[0],) + front.shape[1:]), axis)


def _scatter(comm, xp, array, axis, op):
    """The reduction over ranks of ``array``; rank r keeps chunk r along ``axis``."""
    return _back(xp, comm.reduce_scatter(_front(xp, array, axis), op), axis)


def _exchange(comm, xp, array, split_axis, concat_axis):
    """Chunk j of ``split_axis`` goes to rank j; the chunks received are concatenated along
    ``concat_axis`` in source-rank order."""
    size = comm.size
    front = _front(xp, array, split_axis)
    received = comm.alltoall(front)                       # rows of chunk s came from rank s
    chunk = front.shape[0] // size
    parts = received.reshape((size, chunk) + front.shape[1:])
    parts = xp.moveaxis(parts, 1, split_axis + 1)         # parts[s]: the input's layout
    shape = list(array.shape)
    shape[split_axis] = chunk
    shape[concat_axis] *= size
    # the source axis sits just before concat_axis, so merging the two is the concatenation
    return xp.moveaxis(parts, 0, concat_axis).reshape(shape)


# ---- the primitives ---------------------------------------------------------------------------
class _Collective(Primitive):
    """A primitive over the ranks of a group. The communicator travels to ``forward`` as an
    attribute (like every setting), so the functional forms share one instance per class."""

    def __init__(self, group=None):
        self.communicator = None if group is _FUNCTIONAL else \
            resolve_communicator(group, type(self).__name__)

    def _start(self, ctx, comm):
        """The communicator for this call's device, kept for the backward collective."""
        ctx.comm = communicator_for(comm, ctx.device)
        return ctx.comm

    def __repr__(self):
        size = "" if self.communicator is None else f", ranks={self.communicator.size}"
        return f"{type(self).__name__}(name={self.name}{size})"


class AllReduce(_Collective):
    """Reduce a tensor elementwise over the ranks of ``group``; every rank gets the result.

    ``op``: "sum" (default), "mean", "max" or "min". Backward: the all-reduced (summed)
    gradient, the sum's adjoint when every rank's output feeds its own loss and the total
    loss is the sum over ranks; "mean" divides it by the group size, "max"/"min" route it to
    the ranks whose input attains the result (split among ties).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist.communication import run_ranks
    >>> def rank_fn(comm):
    ...     x = ms.Tensor([1.0, 2.0], requires_grad=True)
    ...     y = AllReduce("sum", group=comm)(x * (comm.rank + 1))
    ...     y.sum().backward()
    ...     return y.asnumpy().tolist(), x.grad.asnumpy().tolist()
    >>> run_ranks(2, rank_fn)[1]
    ([3.0, 6.0], [4.0, 4.0])
    """

    def __init__(self, op="sum", group=None):
        self.op = _check_choice("AllReduce", "op", op, _ALLREDUCE_OPS)
        super().__init__(group)

    def __call__(self, x):
        return self.apply(x, comm=self.communicator, op=self.op)

    def forward(self, ctx, x, comm, op):
        comm = self._start(ctx, comm)
        y = comm.allreduce(contiguous(x), op)
        if op in ("max", "min") and ctx.needs_input_grad[0]:
            ctx.save_for_backward(x, y)     # backward finds the ranks attaining the result
        ctx.op = op
        return y

    def backward(self, ctx, g):
        comm = ctx.comm
        if ctx.op in ("sum", "mean"):
            return (comm.allreduce(contiguous(g), ctx.op),)
        x, y = ctx.saved
        total = comm.allreduce(contiguous(g), "sum")
        attains = (x == y).astype(g.dtype)
        ties = comm.allreduce(attains, "sum")           # ranks sharing the extreme, >= 1
        return (total * attains / ties,)


class AllGather(_Collective):
    """Concatenate the ranks' equally shaped tensors along ``axis``, in rank order.

    Backward: reduce-scatter (sum) of the gradient along ``axis``: rank r gets the sum over
    ranks of the gradient of its own chunk.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist.communication import run_ranks
    >>> run_ranks(2, lambda comm: AllGather(1, group=comm)(
    ...     ms.Tensor([[1.0], [2.0]]) + comm.rank).asnumpy().tolist())[0]
    [[1.0, 2.0], [2.0, 3.0]]
    """

    def __init__(self, axis=0, group=None):
        self.axis = _check_int("AllGather", "axis", axis)
        super().__init__(group)

    def __call__(self, x):
        return self.apply(x, comm=self.communicator, axis=self.axis)

    def forward(self, ctx, x, comm, axis):
        comm = self._start(ctx, comm)
        ctx.axis = normalize_axis(axis, x.ndim, self.name, x.shape)
        return _gather(comm, ctx.xp, x, ctx.axis)

    def backward(self, ctx, g):
        return (_scatter(ctx.comm, ctx.xp, g, ctx.axis, "sum"),)


class ReduceScatter(_Collective):
    """Reduce over the ranks (``op`` "sum" or "mean"); rank r keeps chunk r along ``axis``.

    ``axis`` must be divisible by the group size. Backward: all-gather of the gradient along
    ``axis`` (divided by the group size for "mean").

    >>> import minitorch_dist as ms
    >>> from minitorch_dist.communication import run_ranks
    >>> run_ranks(2, lambda comm: ReduceScatter(0, group=comm)(
    ...     ms.Tensor([1.0, 2.0]) * (comm.rank + 1)).asnumpy().tolist())
    [[3.0], [6.0]]
    """

    def __init__(self, axis=0, op="sum", group=None):
        self.axis = _check_int("ReduceScatter", "axis", axis)
        self.op = _check_choice("ReduceScatter", "op", op, _REDUCE_SCATTER_OPS)
        super().__init__(group)

    def __call__(self, x):
        return self.apply(x, comm=self.communicator, axis=self.axis, op=self.op)

    def forward(self, ctx, x, comm, axis, op):
        comm = self._start(ctx, comm)
        ctx.axis = normalize_axis(axis, x.ndim, self.name, x.shape)
        _divisible(self, x.shape, ctx.axis, comm.size)
        ctx.op = op
        return _scatter(comm, ctx.xp, x, ctx.axis, op)

    def backward(self, ctx, g):
        full = _gather(ctx.comm, ctx.xp, g, ctx.axis)
        return (full / ctx.comm.size if ctx.op == "mean" else full,)


class AllToAll(_Collective):
    """Cut ``split_axis`` into group-size chunks and send chunk j to rank j; concatenate the
    chunks received along ``concat_axis`` in source-rank order.

    ``split_axis`` must be divisible by the group size. The output has ``split_axis`` divided
    and ``concat_axis`` multiplied by the group size (same shape when they are equal).
    Backward: the all-to-all with the axes swapped, which returns every gradient chunk to the
    rank its forward chunk came from.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist.communication import run_ranks
    >>> run_ranks(2, lambda comm: AllToAll(1, 0, group=comm)(
    ...     ms.Tensor([[1.0, 2.0]]) + 10 * comm.rank).asnumpy().tolist())
    [[[1.0], [11.0]], [[2.0], [12.0]]]
    """

    def __init__(self, split_axis=0, concat_axis=0, group=None):
        self.split_axis = _check_int("AllToAll", "split_axis", split_axis)
        self.concat_axis = _check_int("AllToAll", "concat_axis", concat_axis)
        super().__init__(group)

    def __call__(self, x):
        return self.apply(x, comm=self.communicator, split_axis=self.split_axis,
                          concat_axis=self.concat_axis)

    def forward(self, ctx, x, comm, split_axis, concat_axis):
        comm = self._start(ctx, comm)
        ctx.split_axis = normalize_axis(split_axis, x.ndim, self.name, x.shape,
                                        what="split_axis")
        ctx.concat_axis = normalize_axis(concat_axis, x.ndim, self.name, x.shape,
                                         what="concat_axis")
        _divisible(self, x.shape, ctx.split_axis, comm.size, role="split_axis")
        return _exchange(comm, ctx.xp, x, ctx.split_axis, ctx.concat_axis)

    def backward(self, ctx, g):
        return (_exchange(ctx.comm, ctx.xp, g, ctx.concat_axis, ctx.split_axis),)


class Broadcast(_Collective):
    """Every rank gets ``root``'s tensor (the other ranks' inputs give only shape and dtype).

    Backward: the gradients of all ranks summed onto the root (zeros on the other ranks).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist.communication import run_ranks
    >>> run_ranks(2, lambda comm: Broadcast(1, group=comm)(
    ...     ms.Tensor([float(comm.rank)])).asnumpy().tolist())
    [[1.0], [1.0]]
    """

    def __init__(self, root=0, group=None):
        self.root = _check_int("Broadcast", "root", root)
        super().__init__(group)
        if self.communicator is not None:
            _check_root("Broadcast", self.root, self.communicator.size)

    def __call__(self, x):
        return self.apply(x, comm=self.communicator, root=self.root)

    def forward(self, ctx, x, comm, root):
        comm = self._start(ctx, comm)
        ctx.root = _check_root(self.name, root, comm.size)
        # the communicator writes in place: a fresh buffer, never the caller's input
        return comm.broadcast(ctx.xp.array(x, order="C", copy=True), ctx.root)

    def backward(self, ctx, g):
        comm, xp = ctx.comm, ctx.xp
        total = comm.allreduce(contiguous(g), "sum")   # every rank takes part
        return (total if comm.rank == ctx.root else xp.zeros_like(total),)


class Mirror(_Collective):
    """Identity forward; backward sums the gradient over the ranks of ``group`` (a sparse
    ``RowTensor`` gradient: every rank's rows, gathered).

    MindSpore's mirror operator: a parameter copied on several ranks (each seeing other data
    or another part of the computation) enters the forward through it, so that every copy
    receives the whole gradient and takes the same optimizer step, in whatever way the
    training step is written.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist.communication import run_ranks
    >>> def rank_fn(comm):
    ...     w = ms.Tensor([1.0, 2.0], requires_grad=True)
    ...     (Mirror(group=comm)(w) * (comm.rank + 1.0)).sum().backward()
    ...     return w.grad.asnumpy().tolist()
    >>> run_ranks(2, rank_fn)
    [[3.0, 3.0], [3.0, 3.0]]
    """

    def __call__(self, x):
        return self.apply(x, comm=self.communicator)

    def forward(self, ctx, x, comm):
        self._start(ctx, comm)
        ctx.deferral = _deferral.current
        if ctx.deferral is not None:
            ctx.deferral.note(x, ctx.comm)
        return x

    def backward(self, ctx, g):
        if ctx.deferral is not None:     # gradient accumulation sums first, reduces once
            return (g,)
        if isinstance(g, RowTensor):     # a sparse table's copies: every rank's rows, gathered
            return (gather_rows(ctx.comm, g),)
        return (ctx.comm.allreduce(contiguous(g), "sum"),)


class MirrorDeferral:
    """``with MirrorDeferral() as deferral:`` the mirrors that run forward and backward on
    this thread inside the block hand their gradients back unreduced; ``comm_of(array)``
    says over which ranks the gradient of a parameter whose values are ``array`` must be
    summed afterwards. Gradient accumulation uses it to reduce once per step, not once per
    micro-batch (mirrors are linear: summing first gives the same result)."""

    def __init__(self):
        self.comms = {}
        self.final_reductions = None    # a FinalReductions where the last all-reduce may wait

    def note(self, array, comm):
        self.comms[id(array)] = comm

    def comm_of(self, array):
        return self.comms.get(id(array))

    def __enter__(self):
        self.previous, _deferral.current = _deferral.current, self
        return self

    def __exit__(self, *exc):
        _deferral.current = self.previous
        return False


_deferral = ThreadState(current=None)     # per thread: ranks may run as threads


# ---- functional forms -------------------------------------------------------------------------
# One instance per primitive, so each appears once in the placement report; the communicator
# and the settings travel per call.
_all_reduce, _all_gather = AllReduce(group=_FUNCTIONAL), AllGather(group=_FUNCTIONAL)
_reduce_scatter, _all_to_all = ReduceScatter(group=_FUNCTIONAL), AllToAll(group=_FUNCTIONAL)
_broadcast = Broadcast(group=_FUNCTIONAL)
_mirror = Mirror(group=_FUNCTIONAL)
_INSERTED = {"all_reduce": _all_reduce, "all_gather": _all_gather,
             "reduce_scatter": _reduce_scatter, "all_to_all": _all_to_all,
             "broadcast": _broadcast, "mirror": _mirror}


def run_inserted(kind, x, comm, **settings):
    """The collective ``kind`` (a key of the functional forms: "all_reduce", "all_gather",
    "reduce_scatter", "all_to_all", "broadcast", "mirror") on ``x`` over the Communicator
    ``comm``, run directly (``Primitive.run``): how an executor inserts communication from
    inside its own primitive hook, which ``apply`` would enter again. ``settings`` are the
    primitive's own (``op``, ``axis``, ``split_axis`` and ``concat_axis``, ``root``).

    >>> import minitorch_dist as ms
    >>> from minitorch_dist.communication import run_ranks
    >>> run_ranks(2, lambda comm: run_inserted("all_gather", ms.Tensor([comm.rank + 1.0]),
    ...                                        comm, axis=0).asnumpy().tolist())
    [[1.0, 2.0], [1.0, 2.0]]
    """
    prim = _INSERTED.get(kind)
    if prim is None:
        raise ValueError(f"run_inserted: unknown collective {kind!r}; expected one of "
                         f"{sorted(_INSERTED)}")
    if kind == "mirror" and getattr(x, "__dict__", {}).get("comm_fusion") is not None \
            and _deferral.current is None:
        _once("comm_fusion.mirror", "comm fusion ids (Cell.set_comm_fusion) group the "
              "data-parallel gradient buckets, gradient accumulation's reduction and optimizer "
              "parallel's all-gathers; a semi/auto network's mirrors reduce each parameter's "
              "gradient alone outside value_and_grad and gradient accumulation")
    return prim.run(x, comm=comm, **settings)


def mirror(x, group=None):
    """``x`` unchanged; its gradient summed over the ranks of ``group`` (see Mirror)."""
    return _mirror.apply(x, comm=resolve_communicator(group, "mirror"))


def all_reduce(x, group=None, op="sum"):
    """``x`` reduced elementwise over the ranks of ``group`` (differentiable; see AllReduce)."""
    _check_choice("all_reduce", "op", op, _ALLREDUCE_OPS)
    return _all_reduce.apply(x, comm=resolve_communicator(group, "all_reduce"), op=op)


def all_gather(x, axis=0, group=None):
    """The ranks' tensors concatenated along ``axis`` (differentiable; see AllGather)."""
    return _all_gather.apply(x, comm=resolve_communicator(group, "all_gather"),
                             axis=_check_int("all_gather", "axis", axis))


def reduce_scatter(x, axis=0, group=None, op="sum"):
    """Chunk ``rank`` along ``axis`` of the reduction over ranks (see ReduceScatter)."""
    _check_choice("reduce_scatter", "op", op, _REDUCE_SCATTER_OPS)
    return _reduce_scatter.apply(x, comm=resolve_communicator(group, "reduce_scatter"),
                                 axis=_check_int("reduce_scatter", "axis", axis), op=op)


def all_to_all(x, split_axis=0, concat_axis=0, group=None):
    """Chunk j of ``split_axis`` to rank j, received chunks along ``concat_axis`` (see AllToAll)."""
    return _all_to_all.apply(x, comm=resolve_communicator(group, "all_to_all"),
                             split_axis=_check_int("all_to_all", "split_axis", split_axis),
                             concat_axis=_check_int("all_to_all", "concat_axis", concat_axis))


def broadcast(x, root=0, group=None):
    """``root``'s tensor on every rank (differentiable; see Broadcast)."""
    return _broadcast.apply(x, comm=resolve_communicator(group, "broadcast"),
                            root=_check_int("broadcast", "root", root))
