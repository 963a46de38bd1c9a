"""The jobs ``bench_dist_opt.py`` runs on MPI ranks: one function per figure, each run on
every rank of a job started by ``python -m minitorch_dist.run`` with ``--worker NAME``; rank 0
prints its result as one line, ``MARK`` + JSON, for the driver to read.

  * ``wire``: bytes per step and rank of every DistOpt option;
  * ``comm``: DistOpt's fp32 exchange against a raw MPI ``Allreduce`` of the same bytes;
  * ``train`` / ``train_packing``: samples/s of DistOpt training on this job's ranks;
  * ``interleaved`` / ``interleaved_packing``: 1 and 2 ranks in alternating blocks of a job;
  * ``shared_ab``: the bucket through shared memory against MPI's Allreduce, alternating;
  * ``ceiling_ab``: 2-rank training against the machine's ceiling (both ranks training on
    their own, no communication), alternating.
"""
import json
import os
import statistics
import sys
import time

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
for _name in THREAD_VARIABLES:
    os.environ.setdefault(_name, "1")   # before NumPy starts its BLAS pool

import numpy as np  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
MARK = "@@result "          # a worker's result line: MARK + JSON (rank 0 only)
LR, MOMENTUM, BATCH = 0.005, 0.9, 32


def _model_parts():
    """(ms, nn, DistOpt, CNN): imported lazily so the driver stays light."""
    sys.path.insert(0, os.path.join(REPO, "examples"))
    import minitorch_dist as ms
    from minitorch_dist import nn
    from minitorch_dist.parallel import DistOpt
    from mnist_cnn import CNN
    ms.set_context(device_target="CPU")     # CPU ranks, even where a GPU is the default
    return ms, nn, DistOpt, CNN


def rank_batches(ms, rank, count=8):
    """A rotating set of random batches, different on every rank (a fixed batch converges and
    produces denormal gradients, which distorts timings)."""
    rng = np.random.default_rng(1000 + rank)
    return [(ms.Tensor(rng.standard_normal((BATCH, 1, 28, 28), dtype=np.float32)),
             ms.Tensor(rng.integers(0, 10, BATCH).astype(np.int32))) for _ in range(count)]


def cnn_training(rank):
    """``(ms, nn, DistOpt, world, batches, net, loss_fn)``: what every training job of this
    benchmark starts from (the same seeded CNN, this rank's batches)."""
    from mpi4py import MPI
    ms, nn, DistOpt, CNN = _model_parts()
    batches = rank_batches(ms, rank)
    ms.set_seed(0)
    return ms, nn, DistOpt, MPI.COMM_WORLD, batches, CNN(), nn.CrossEntropyLoss()


def training_step(ms, nn, net, optimizer, dist=None, option="fp32", **step_args):
    """One step: forward, backward, then ``dist.step`` (or the plain optimizer)."""
    loss_fn = nn.CrossEntropyLoss()
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, optimizer.parameters)

    def step(x, y):
        _, grads = grad_fn(x, y)
        if dist is None:
            optimizer(grads)
        else:
            dist.step(grads, option, **step_args)
    return step


class NoUpdate:
    """An optimizer that changes nothing: ``DistOpt.step`` with it is communication only."""

    def __init__(self, parameters):
        self.parameters = parameters

    def update(self, position, grad):
        pass

    def step(self):
        pass


def wire_job(args, comm, rank):
    """Bytes per step and rank of every option (comm_stats counts each rank's payload)."""
    ms, nn, DistOpt, CNN = _model_parts()
    batches = rank_batches(ms, rank)
    ms.set_seed(0)
    probe = CNN()
    loss_fn = nn.CrossEntropyLoss()
    _, grads = ms.value_and_grad(lambda x, y: loss_fn(probe(x), y), None,
                                 probe.trainable_params())(*batches[0])
    # sparseThreshold needs a magnitude: the 99th percentile of |g| at the first step (about
    # 1% density before error feedback accumulates), the largest over ranks so all agree
    q99 = np.quantile(np.abs(np.concatenate([g.asnumpy().ravel() for g in grads])), 0.99)
    thr = float(comm.allreduce(np.array([q99]), "max")[0])
    n_params = sum(p.size for p in probe.trainable_params())
    cases = [("fp32", "fp32", {}, {}), ("fp16", "fp16", {}, {}),
             ("sparseTopK spars=0.01", "sparseTopK", {"spars": 0.01}, {}),
             (f"sparseThreshold spars={thr:.2e}", "sparseThreshold", {"spars": thr}, {}),
             ("partialUpdate", "partialUpdate", {}, {}),
             ("partialUpdate buffSize=512KiB", "partialUpdate", {}, {"buffSize": 1 << 19})]
    rows = []
    for label, option, step_args, dist_args in cases:
        ms.set_seed(0)
        net = CNN()
        dist = DistOpt(nn.SGD(net.trainable_params(), LR, momentum=MOMENTUM), **dist_args)
        step = training_step(ms, nn, net, dist.opt, dist, option, **step_args)
        dist.reset_comm_stats()       # construction (model check, broadcast) is not a step
        for i in range(args.steps):
            step(*batches[i % len(batches)])
        stats = dist.comm_stats()
        steps = stats["by_option"][option]["steps"]
        by_op = {op: {"calls": v["calls"] / steps, "bytes": v["bytes_sent"] / steps}
                 for op, v in stats["by_op"].items()}
        # MPICommunicator.allgatherv first exchanges one int64 count per rank: on the wire,
        # but not in comm_stats (it counts the payload array only)
        hidden = 8 * by_op.get("allgatherv", {}).get("calls", 0)
        rows.append({"label": label, "option": option, "bytes": stats["by_option"][option]
                     ["bytes_sent"] / steps, "hidden": hidden, "by_op": by_op,
                     "period": dist.partial_period if option == "partialUpdate" else None})
    return {"n_params": n_params, "steps": args.steps, "rows": rows}


def comm_job(args, comm, rank):
    """Median time of DistOpt's fp32 exchange vs a bare MPI Allreduce of the same bytes.

    Why this is fair: both sides move the same 431,080 float32s with the same MPI library and
    transport, between the same two processes; every call starts right after a barrier, the
    contenders rotate their order every round (noise and drift hit all alike), and a round
    counts the slower rank's time (a collective is done when its last rank is). The raw
    Allreduce (separate send and receive buffers) is the reference the target names: one
    call, nothing else; the in-place one is shown too, as Open MPI's shared-memory path is
    faster in place and DistOpt's bucket is reduced in place.

    "DistOpt exchange, grads in bucket" is what ``backward_and_update`` runs after backward,
    with ``NoUpdate``: backward's observer (``BucketFill``) has already written the gradients (times 1/2, the
    pre-division) into the bucket (untimed here: it is part of backward), then the bucket's
    allreduce (through memory the two ranks share: ``communication/node_shared.py``), the
    per-parameter views and the optimizer calls. "copy into bucket" times those
    writes alone, for every gradient (the work that moved into backward, where the gradients
    are still in cache; with slots, backward now copies only the gradients MatMul does not
    compute in place: ``slots_ab_job``).
    "DistOpt.step fp32 (packs after)" is the path for gradients handed over as arrays
    (``step(grads)``): gradient checks, packing into the bucket, the allreduce, the views.
    """
    from mpi4py import MPI
    ms, nn, DistOpt, CNN = _model_parts()
    from minitorch_dist.parallel.data_parallel.buckets import BucketExchange
    from minitorch_dist.parallel.data_parallel.dist_opt import DEFAULT_THRESHOLD
    ms.set_seed(0)
    params = CNN().trainable_params()
    dist = DistOpt(NoUpdate(params))
    rng = np.random.default_rng(rank)
    grads = [rng.standard_normal(p.shape, dtype=np.float32) for p in params]
    world = MPI.COMM_WORLD
    send = np.concatenate([g.ravel() for g in grads])
    recv = np.empty_like(send)
    zeros = np.zeros_like(send)      # an in-place sum of zeros stays finite round after round
    prescale, found = 1.0 / dist.world_size, [None] * len(params)
    state = {}

    def fill_bucket():               # what backward's BucketFill does (launch=False: no allreduce yet)
        state["fill"] = fill = BucketExchange(dist._fused, params, DEFAULT_THRESHOLD,
                                              prescale=prescale, launch=False)
        for pos, g in enumerate(grads):
            found[pos] = fill.put(pos, g)

    def exchange():                  # DistOpt._dense_step after backward (1/2 already applied)
        dist._apply_dense(state["fill"].launch_rest(found), False, 1)

    # name: (untimed preparation or None, timed call)
    contenders = {"DistOpt exchange, grads in bucket": (fill_bucket, exchange),
                  "copy into bucket (every gradient)": (None, fill_bucket),
                  "DistOpt.step fp32 (packs after)": (None, lambda: dist.step(grads, "fp32")),
                  "raw MPI Allreduce": (None, lambda: world.Allreduce(send, recv, op=MPI.SUM)),
                  "raw MPI Allreduce IN_PLACE": (None, lambda: world.Allreduce(
                      MPI.IN_PLACE, zeros, op=MPI.SUM))}
    names = list(contenders)
    times = {k: [] for k in names}
    for r in range(args.warmup + args.rounds):
        shift = r % len(names)
        for k in names[shift:] + names[:shift]:
            prepare, call = contenders[k]
            if prepare is not None:
                prepare()
            world.Barrier()
            start = time.perf_counter()
            call()
            elapsed = time.perf_counter() - start
            if r >= args.warmup:
                times[k].append(elapsed)
    medians = {}
    for k in names:
        slowest = np.array(times[k])
        world.Allreduce(MPI.IN_PLACE, slowest, op=MPI.MAX)
        medians[k] = float(np.median(slowest)) * 1e3
    return {"elements": int(send.size), "bytes": int(send.nbytes), "rounds": args.rounds,
            "median_ms": medians}


def train_job(args, comm, rank, packing=False):
    """Samples/s of DistOpt fp32 training (``backward_and_update``) on this job's ranks;
    ``packing``: ``value_and_grad`` then ``DistOpt.step(grads)``, which packs the gradients
    into the bucket after backward (the only path before gradients were written in place).

    One model per process, as in real training: timing a second model in the same process
    (say, the plain optimizer) doubles the working set and slowed the 1-rank figure by ~25%,
    which made 2 ranks look superlinear.
    """
    ms, nn, DistOpt, world, batches, net, loss_fn = cnn_training(rank)
    size = world.Get_size()
    dist = DistOpt(nn.SGD(net.trainable_params(), LR, momentum=MOMENTUM))

    def step(x, y):                        # SINGA's train_cnn.py: out, loss; opt(loss)
        dist(loss_fn(net(x), y))
    if packing:
        step = training_step(ms, nn, net, dist.opt, dist)
    for i in range(args.warmup):           # warm-up: caches, buffers, first-touch pages
        step(*batches[i % len(batches)])
    # Blocks of steps between barriers; the median block time keeps a burst of load from
    # another process out of the figure.
    block_times = []
    per_block = max(1, args.steps // args.blocks)
    for b in range(args.blocks):
        world.Barrier()
        start = time.perf_counter()
        for i in range(per_block):
            step(*batches[(b * per_block + i) % len(batches)])
        world.Barrier()
        block_times.append(time.perf_counter() - start)
    return {"ranks": size, "steps": per_block * args.blocks,
            "samples_per_s": per_block * BATCH * size / statistics.median(block_times)}


def interleaved_job(args, comm, rank, packing=False):
    """1 rank and 2 ranks in alternating blocks of steps of the same 2-rank job.

    On a shared machine the load drifts between separate 1-rank and 2-rank jobs; here a
    block of DistOpt training on both ranks (``backward_and_update``) alternates with a block
    where rank 0 trains alone through a DistOpt over a 1-rank communicator while rank 1
    sleeps (polling a nonblocking barrier every 0.5 ms, so it does not spin on a core), so
    both figures see the same load. Same model, same process, same batches as ``train_job``
    (``packing``: ``value_and_grad`` + ``step(grads)``, as there).
    """
    from mpi4py import MPI
    ms, nn, DistOpt, world, batches, net, loss_fn = cnn_training(rank)
    both = DistOpt(nn.SGD(net.trainable_params(), LR, momentum=MOMENTUM))
    solo_comm = comm.split([0])
    alone = None if solo_comm is None else DistOpt(
        nn.SGD(net.trainable_params(), LR, momentum=MOMENTUM), communicator=solo_comm)
    per_block = max(1, args.steps // args.blocks)

    steps = {} if not packing else {
        id(d): training_step(ms, nn, net, d.opt, d) for d in (both, alone) if d is not None}

    def block(dist, b):
        for i in range(per_block):
            x, y = batches[(b * per_block + i) % len(batches)]
            if packing:
                steps[id(dist)](x, y)
            else:
                dist(loss_fn(net(x), y))

    def timed_both(b):
        world.Barrier()
        start, cpu = time.perf_counter(), time.thread_time()
        block(both, b)
        cpu_two.append(time.thread_time() - cpu)
        world.Barrier()
        return time.perf_counter() - start

    def timed_alone(b):
        world.Barrier()
        if alone is None:                  # rank 1 waits without using a core
            request = world.Ibarrier()
            while not request.Test():
                time.sleep(0.0005)
            return 0.0
        start, cpu = time.perf_counter(), time.thread_time()
        block(alone, b)
        elapsed = time.perf_counter() - start
        cpu_one.append(time.thread_time() - cpu)
        world.Ibarrier().Wait()
        return elapsed

    cpu_one, cpu_two = [], []
    for b in range(max(1, args.warmup // per_block + 1)):   # warm-up: both paths
        timed_both(b)
        timed_alone(b)
    cpu_one.clear()
    cpu_two.clear()
    one, two = [], []
    for b in range(2 * args.blocks):       # ABBA: 2,1,1,2,2,1,...
        order = (timed_both, timed_alone) if b % 2 == 0 else (timed_alone, timed_both)
        for fn in order:
            (two if fn is timed_both else one).append(fn(b))
    # CPU seconds of the training thread, the slower rank's per 2-rank block: what a block
    # costs whatever other processes take of the cores (the allreduce's busy wait included)
    cpu_two = np.array(cpu_two)
    world.Allreduce(MPI.IN_PLACE, cpu_two, op=MPI.MAX)
    return {"steps": per_block * args.blocks, "blocks": 2 * args.blocks,
            "one_per_s": per_block * BATCH / statistics.median(one) if one[0] else 0.0,
            "two_per_s": per_block * BATCH * 2 / statistics.median(two),
            "cpu_ratio": 2 * statistics.median(cpu_one) / float(np.median(cpu_two))
            if cpu_one else 0.0}


def training_ab(args, world, batches, net, loss_fn, sides):
    """Two ways of 2-rank training in alternating blocks of one job (ABBA), so that both see
    the same load. ``sides`` is ``{name: (dist, before)}``: each block of ``dist`` steps is
    timed between barriers, after ``before()`` (or nothing) has switched to that side.
    Returns ``(per_block, wall, cpu)``: per side the blocks' wall seconds and the slower
    rank's CPU seconds of its training thread."""
    from mpi4py import MPI
    per_block = max(1, args.steps // args.blocks)
    wall, cpu = {name: [] for name in sides}, {name: [] for name in sides}

    def timed(name, b):
        dist, before = sides[name]
        if before is not None:
            before()
        world.Barrier()
        start, thread = time.perf_counter(), time.thread_time()
        for i in range(per_block):
            x, y = batches[(b * per_block + i) % len(batches)]
            dist(loss_fn(net(x), y))
        cpu[name].append(time.thread_time() - thread)
        world.Barrier()
        wall[name].append(time.perf_counter() - start)

    first, second = sides
    for b in range(max(1, args.warmup // per_block + 1)):       # warm-up: both sides
        timed(first, b)
        timed(second, b)
    for name in sides:
        wall[name].clear()
        cpu[name].clear()
    for b in range(2 * args.blocks):       # ABBA
        for name in ((first, second) if b % 2 == 0 else (second, first)):
            timed(name, b)
    slower = {name: np.array(cpu[name]) for name in sides}
    for array in slower.values():
        world.Allreduce(MPI.IN_PLACE, array, op=MPI.MAX)
    return per_block, {name: np.array(wall[name]) for name in sides}, slower


def shared_ab_job(args, comm, rank):
    """The same 2-rank training with the bucket reduced through shared memory and through
    MPI's Allreduce (``training_ab``): two DistOpts over one network, the second on a
    communicator made with ``MINITORCH_DIST_SHARED_ALLREDUCE=0``."""
    from minitorch_dist.communication import MPICommunicator
    ms, nn, DistOpt, world, batches, net, loss_fn = cnn_training(rank)
    shared = DistOpt(nn.SGD(net.trainable_params(), LR, momentum=MOMENTUM))
    saved = os.environ.get("MINITORCH_DIST_SHARED_ALLREDUCE")
    os.environ["MINITORCH_DIST_SHARED_ALLREDUCE"] = "0"
    try:
        plain_comm = MPICommunicator(world.Dup())
    finally:
        if saved is None:
            del os.environ["MINITORCH_DIST_SHARED_ALLREDUCE"]
        else:
            os.environ["MINITORCH_DIST_SHARED_ALLREDUCE"] = saved
    through_mpi = DistOpt(nn.SGD(net.trainable_params(), LR, momentum=MOMENTUM),
                          communicator=plain_comm)
    per_block, wall, cpu = training_ab(args, world, batches, net, loss_fn,
                                       {"shared": (shared, None), "mpi": (through_mpi, None)})
    return {"blocks": 2 * args.blocks, "steps_per_block": per_block,
            "wall_ratio": float(np.median(wall["shared"] / wall["mpi"])),
            "cpu_ratio": float(np.median(cpu["shared"] / cpu["mpi"])),
            "shared_ms": 1e3 * float(np.median(wall["shared"])) / per_block,
            "mpi_ms": 1e3 * float(np.median(wall["mpi"])) / per_block,
            "reductions": shared.communicator._shared.reductions
            if getattr(shared.communicator, "_shared", None) is not None else 0}


def slots_ab_job(args, comm, rank):
    """2-rank training with the weight gradients computed straight into their bucket slots
    (``BucketExchange.slot_for``: MatMul writes there) and with every gradient copied into
    its slot (``training_ab``); also the bytes written (copied) into the buckets per step on
    each side."""
    from minitorch_dist.parallel.data_parallel import buckets
    ms, nn, DistOpt, world, batches, net, loss_fn = cnn_training(rank)
    dist = DistOpt(nn.SGD(net.trainable_params(), LR, momentum=MOMENTUM))
    offer, write = buckets.BucketExchange.slot_for, buckets.write_slot
    copied, calls, side = {"slots": 0, "copy": 0}, {"slots": 0, "copy": 0}, ["slots"]

    def counted_write(xp, grad, slot, *rest):
        copied[side[0]] += slot.nbytes
        return write(xp, grad, slot, *rest)

    def counted(name, slot_for):
        def step(loss):
            calls[name] += 1
            dist(loss)

        def switch():
            side[0] = name
            buckets.BucketExchange.slot_for = slot_for
        return step, switch
    buckets.write_slot = counted_write
    try:
        per_block, wall, cpu = training_ab(
            args, world, batches, net, loss_fn,
            {"slots": counted("slots", offer), "copy": counted("copy", lambda self, pos: None)})
    finally:
        buckets.BucketExchange.slot_for, buckets.write_slot = offer, write
    ratio = wall["slots"] / wall["copy"]
    return {"blocks": 2 * args.blocks, "steps_per_block": per_block,
            "wall_ratio": float(np.median(ratio)),
            "wall_range": [float(v) for v in np.quantile(ratio, [0.25, 0.75])],
            "cpu_ratio": float(np.median(cpu["slots"] / cpu["copy"])),
            "slots_ms": 1e3 * float(np.median(wall["slots"])) / per_block,
            "copy_ms": 1e3 * float(np.median(wall["copy"])) / per_block,
            "copied_per_step": {name: copied[name] / calls[name] for name in calls},
            "bucket_bytes": int(sum(p.data.nbytes for p in net.trainable_params()))}


def ceiling_ab_job(args, comm, rank):
    """2-rank training against the machine's ceiling, in alternating blocks of one job (ABBA).

    A "ceiling" block is two 1-rank trainings at once: each rank steps through a DistOpt over
    a 1-rank communicator of its own (what a 1-rank job runs), no communication, and times
    its own steps; the block's samples/s is the sum of the two ranks', as for two 1-rank jobs
    started together. A "2 ranks" block is DistOpt training over both ranks, timed from
    barrier to barrier. Same network, batches and process for both, so load that drifts hits
    both; the figure is the median, over pairs of blocks, of 2 ranks / ceiling.
    """
    from mpi4py import MPI
    ms, nn, DistOpt, world, batches, net, loss_fn = cnn_training(rank)
    both = DistOpt(nn.SGD(net.trainable_params(), LR, momentum=MOMENTUM))
    mine = comm.split([rank])
    alone = DistOpt(nn.SGD(net.trainable_params(), LR, momentum=MOMENTUM), communicator=mine)
    per_block = max(1, args.steps // args.blocks)
    two, own = [], []                      # per block: wall of a 2-rank block; this rank's own
    step_times = []                        # this rank's steps in the alone blocks, in order

    def steps(dist, b, times=None):
        """Block ``b``'s steps through ``dist``; each step's seconds into ``times`` if given."""
        last = time.perf_counter()
        for i in range(per_block):
            x, y = batches[(b * per_block + i) % len(batches)]
            dist(loss_fn(net(x), y))
            if times is not None:
                now = time.perf_counter()
                times.append(now - last)
                last = now

    def timed_two(b):
        world.Barrier()
        start = time.perf_counter()
        steps(both, b)
        world.Barrier()
        return time.perf_counter() - start

    def timed_alone(b):
        world.Barrier()
        start = time.perf_counter()
        steps(alone, b, step_times)
        elapsed = time.perf_counter() - start
        world.Barrier()
        return elapsed

    for b in range(max(1, args.warmup // per_block + 1)):   # warm-up: both kinds
        timed_two(b)
        timed_alone(b)
    step_times.clear()
    for b in range(2 * args.blocks):       # ABBA
        order = (timed_two, timed_alone) if b % 2 == 0 else (timed_alone, timed_two)
        for fn in order:
            (two if fn is timed_two else own).append(fn(b))
    # Steps that wait for each other take the slower rank's time: pairing the ranks' alone
    # steps one by one, the mean over the max is what that wait alone leaves of the ceiling
    # (with an exchange that costs nothing)
    paired = np.array(world.allgather(step_times))
    waiting_bound = float(paired.mean(axis=0).sum() / paired.max(axis=0).sum())
    two = np.array(two)
    world.Allreduce(MPI.IN_PLACE, two, op=MPI.MAX)       # a 2-rank block ends with its last rank
    everyone = np.array(world.allgather(own))             # (ranks, blocks): each rank's own time
    two_per_s = per_block * BATCH * world.Get_size() / two
    ceiling_per_s = (per_block * BATCH / everyone).sum(axis=0)
    return {"blocks": 2 * args.blocks, "steps_per_block": per_block,
            "ratio": float(np.median(two_per_s / ceiling_per_s)),
            "ratio_range": [float(v) for v in np.quantile(two_per_s / ceiling_per_s,
                                                          [0.25, 0.75])],
            "waiting_bound": waiting_bound,
            "two_per_s": float(np.median(two_per_s)),
            "ceiling_per_s": float(np.median(ceiling_per_s)),
            "rank_per_s": [float(np.median(per_block * BATCH / t)) for t in everyone]}


def worker(args):
    from minitorch_dist import kernels
    from minitorch_dist.communication import get_communicator, get_rank, init
    init()
    comm, rank = get_communicator(), get_rank()
    jobs = {"wire": wire_job, "comm": comm_job, "train": train_job,
            "train_packing": lambda *a: train_job(*a, packing=True),
            "interleaved": interleaved_job, "shared_ab": shared_ab_job,
            "ceiling_ab": ceiling_ab_job, "slots_ab": slots_ab_job,
            "interleaved_packing": lambda *a: interleaved_job(*a, packing=True)}
    for name in args.worker.split(","):
        result = jobs[name](args, comm, rank)
        if rank == 0:
            result.update(job=name, cpp=kernels.HAVE_CPP)
            print(MARK + json.dumps(result), flush=True)
