"""DistOpt speed and cost on real MPI ranks: bytes on the wire, communication time, scaling.

All three use SINGA's MNIST CNN (examples/mnist_cnn.py: 431,080 float32 parameters):

1. **wire**: the bytes a rank sends per step, from ``DistOpt.comm_stats()`` on 2 ranks, for
   every dist option, relative to fp32 (targets: fp16 <= 0.5, sparseTopK at 1% <= 0.025);
2. **comm**: DistOpt's fp32 exchange with an optimizer that changes nothing, against one raw
   mpi4py ``Allreduce`` of as many float32s as the model has (target <= 1.1x). The exchange
   is what ``backward_and_update`` does after backward: backward has already written the
   gradients into the fused bucket (``BucketFill``), so what is left is the allreduce of the
   bucket, in place, and the per-parameter views. The copy into the bucket, now part of
   backward, and the older path (``step(grads)``, which packs after backward) are shown too;
3. **scaling**: samples/s of DistOpt fp32 (``backward_and_update``, SINGA's ``opt(loss)``) +
   momentum SGD training at batch 32 per rank with one BLAS thread per rank, 2 ranks vs 1
   (target >= 1.9x): separate 1-rank and 2-rank jobs, and 1 and 2 ranks in alternating
   blocks of one job (``interleaved_job``: robust to load that drifts between jobs). Each
   repeat also runs the machine's ceiling, two 1-rank jobs at once, and the figure "2 ranks
   / ceiling" (target >= 0.97) is the 2-rank job's samples/s over theirs, per repeat.
   ``--compare-shared`` adds, to each repeat, the 2-rank job with its bucket reduced by MPI's
   Allreduce instead of through memory the ranks share (``communication/node_shared.py``).

The driver re-launches this file under ``python -m minitorch_dist.run`` (``--worker``), each
job with a timeout, and prints what the ranks report. Timings are interleaved and medians, so
machine noise hits all sides alike: read the ratios, not the absolute times.

    python benchmarks/bench_dist_opt.py [--quick] [--repeats 7] [--steps 80] [--rounds 400]
    python benchmarks/bench_dist_opt.py --compare-shared
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
for _name in THREAD_VARIABLES:
    os.environ.setdefault(_name, "1")   # before NumPy starts its BLAS pool

import numpy as np  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.abspath(__file__)
sys.path.insert(0, REPO)
MARK = "@@result "          # a worker's result line: MARK + JSON (rank 0 only)
LR, MOMENTUM, BATCH = 0.005, 0.9, 32
TARGETS = {"fp16": 0.5, "topk": 0.025, "comm": 1.1, "scaling": 1.9, "ceiling": 0.97}


# ============================================================================ worker (one rank)
def _model_parts():
    """(ms, nn, DistOpt, CNN): imported lazily so the driver stays light."""
    sys.path.insert(0, os.path.join(REPO, "examples"))
    import minitorch_dist as ms
    from minitorch_dist import nn
    from minitorch_dist.parallel import DistOpt
    from mnist_cnn import CNN
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
    writes alone (the work that moved into backward, where the gradients are still in cache).
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
                  "copy into bucket (in backward)": (None, fill_bucket),
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


def shared_ab_job(args, comm, rank):
    """The same 2-rank training with the bucket reduced through shared memory and through
    MPI's Allreduce, in alternating blocks of one job (ABBA), so that both see the same load:
    two DistOpts over one network, the second on a communicator made with
    ``MINITORCH_DIST_SHARED_ALLREDUCE=0``. Per block: the wall time between barriers and the
    slower rank's CPU seconds of its training thread."""
    from mpi4py import MPI
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
    per_block = max(1, args.steps // args.blocks)
    wall, cpu = {"shared": [], "mpi": []}, {"shared": [], "mpi": []}

    def timed(name, dist, b):
        world.Barrier()
        start, thread = time.perf_counter(), time.thread_time()
        for i in range(per_block):
            x, y = batches[(b * per_block + i) % len(batches)]
            dist(loss_fn(net(x), y))
        cpu[name].append(time.thread_time() - thread)
        world.Barrier()
        wall[name].append(time.perf_counter() - start)

    for b in range(max(1, args.warmup // per_block + 1)):       # warm-up: both paths
        timed("shared", shared, b)
        timed("mpi", through_mpi, b)
    for name in wall:
        wall[name].clear()
        cpu[name].clear()
    for b in range(2 * args.blocks):       # ABBA
        order = ("shared", "mpi") if b % 2 == 0 else ("mpi", "shared")
        for name in order:
            timed(name, shared if name == "shared" else through_mpi, b)
    slower = {name: np.array(cpu[name]) for name in cpu}
    for array in slower.values():
        world.Allreduce(MPI.IN_PLACE, array, op=MPI.MAX)
    return {"blocks": 2 * args.blocks, "steps_per_block": per_block,
            "wall_ratio": statistics.median(np.array(wall["shared"]) / np.array(wall["mpi"])),
            "cpu_ratio": float(np.median(slower["shared"] / slower["mpi"])),
            "shared_ms": 1e3 * statistics.median(wall["shared"]) / per_block,
            "mpi_ms": 1e3 * statistics.median(wall["mpi"]) / per_block,
            "reductions": shared.communicator._shared.reductions
            if getattr(shared.communicator, "_shared", None) is not None else 0}


def worker(args):
    from minitorch_dist import kernels
    from minitorch_dist.communication import get_communicator, get_rank, init
    init()
    comm, rank = get_communicator(), get_rank()
    jobs = {"wire": wire_job, "comm": comm_job, "train": train_job,
            "train_packing": lambda *a: train_job(*a, packing=True),
            "interleaved": interleaved_job, "shared_ab": shared_ab_job,
            "interleaved_packing": lambda *a: interleaved_job(*a, packing=True)}
    for name in args.worker.split(","):
        result = jobs[name](args, comm, rank)
        if rank == 0:
            result.update(job=name, cpp=kernels.HAVE_CPP)
            print(MARK + json.dumps(result), flush=True)


# ============================================================================ driver
def launch(n, workers, args, timeout, env_extra=None):
    """Run ``--worker workers`` on n ranks through the launcher; rank 0's result dicts."""
    env = dict(os.environ, **(env_extra or {}))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
    for name in THREAD_VARIABLES:
        env[name] = "1"
    command = [sys.executable, "-m", "minitorch_dist.run", "-n", str(n), "--timeout",
               str(timeout), SCRIPT, "--worker", workers, "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--rounds", str(args.rounds),
               "--blocks", str(args.blocks)]
    # the launcher kills its job at `timeout` (exit 124); this one is the backstop
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout + 30)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"bench_dist_opt: {n}-rank job {workers!r} failed with exit code "
                         f"{done.returncode}")
    results = {r["job"]: r for r in (json.loads(line[len(MARK):])
                                     for line in done.stdout.splitlines() if line.startswith(MARK))}
    missing = set(workers.split(",")) - set(results)
    if missing:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"bench_dist_opt: {n}-rank job printed no result for {sorted(missing)}")
    return results


def verdict(value, target, lower_is_better=True):
    ok = value <= target if lower_is_better else value >= target
    return "PASS" if ok else "MISS"


def report_wire(wire):
    rows, base = wire["rows"], wire["rows"][0]["bytes"]
    print(f"\n1. bytes on the wire per step and rank (DistOpt.comm_stats, mean of "
          f"{wire['steps']} steps); model {wire['n_params']:,} params = "
          f"{4 * wire['n_params']:,} B in fp32")
    print(f"  {'option':<34}{'B/step':>11}{'/ fp32':>9}  what is sent (per step)")
    for row in rows:
        sent = ", ".join(f"{op} {v['calls']:g} call(s) {v['bytes']:,.0f} B"
                         for op, v in row["by_op"].items())
        extra = f"; period {row['period']}" if row["period"] else ""
        extra += f"; +{row['hidden']:.0f} B of counts not in comm_stats" if row["hidden"] else ""
        print(f"  {row['label']:<34}{row['bytes']:>11,.0f}{row['bytes'] / base:>9.4f}  "
              f"{sent}{extra}")
    fp16 = next(r for r in rows if r["option"] == "fp16")
    topk = next(r for r in rows if r["option"] == "sparseTopK")
    k, buckets = topk["by_op"]["allgatherv"]["bytes"] / 8, topk["by_op"]["allgatherv"]["calls"] / 2
    print(f"  top-K wire format: k = {k:,.0f} entries ({buckets:g} bucket(s)), int32 indices + "
          f"float32 values = {8 * k:,.0f} B, twice the values alone; with the counts: "
          f"{(topk['bytes'] + topk['hidden']) / base:.5f} of fp32")
    return fp16["bytes"] / base, topk["bytes"] / base


def report_comm(comm):
    med = comm["median_ms"]
    raw = med["raw MPI Allreduce"]
    print(f"\n2. fp32 exchange of {comm['elements']:,} float32s ({comm['bytes']:,} B), 2 ranks: "
          f"median ms of the slower rank over {comm['rounds']} interleaved rounds")
    for name, ms_ in med.items():
        print(f"  {name:<34}{ms_:9.3f} ms   x{ms_ / raw:.2f} of raw")
    print("  (backward writes the gradients into the bucket, so the exchange is the in-place "
          "allreduce\n   and bookkeeping; the copy is timed on its own, the older packing path "
          "beside it; see comm_job)")
    print(f"  packing path step(grads) / raw: {med['DistOpt.step fp32 (packs after)'] / raw:.2f}")
    return med["DistOpt exchange, grads in bucket"] / raw


def report_scaling(pairs, title=True):
    if title:
        print(f"\n3. scaling, SINGA CNN, DistOpt backward_and_update + momentum SGD, batch "
              f"{BATCH} per rank, 1 BLAS thread per rank\n   (samples/s from the median block "
              "of steps; 1- and 2-rank jobs alternate 1,2,2,1,...)")
    ratios = []
    for i, (one, two) in enumerate(pairs):
        s1, s2 = one["samples_per_s"], two["samples_per_s"]
        ratios.append(s2 / s1)
        print(f"  repeat {i}: 1 rank {s1:8.1f}   2 ranks {s2:8.1f}   ratio {ratios[-1]:.2f}")
    print(f"  median ratio 2 ranks / 1 rank: {statistics.median(ratios):.2f}")
    return statistics.median(ratios)


def report_interleaved(results, title=True):
    if title:
        print("   the same with 1 and 2 ranks in alternating blocks of one job (rank 1 sleeps "
              "while rank 0\n   trains alone), so that both see the same machine load:")
    ratios = [r["two_per_s"] / r["one_per_s"] for r in results]
    for i, (r, ratio) in enumerate(zip(results, ratios)):
        print(f"  repeat {i}: 1 rank {r['one_per_s']:8.1f}   2 ranks {r['two_per_s']:8.1f}   "
              f"ratio {ratio:.2f}")
    print(f"  median ratio 2 ranks / 1 rank: {statistics.median(ratios):.2f}")
    cpu = statistics.median(r["cpu_ratio"] for r in results)
    print(f"  by CPU time of the training threads (2 x 1-rank CPU s / the slower rank's, per "
          f"block): {cpu:.2f}\n   (what other processes take of the cores does not count; the "
          "allreduce's busy wait does)")
    return statistics.median(ratios), cpu


def report_shared_ab(ab):
    print(f"\n   2-rank training, the bucket through shared memory against MPI's Allreduce, "
          f"alternating\n   blocks of {ab['steps_per_block']} steps in one job "
          f"({ab['blocks']} blocks each, ABBA; per pair of blocks, median):")
    print(f"  ms per step: shared {ab['shared_ms']:.2f}, MPI {ab['mpi_ms']:.2f}; "
          f"shared / MPI: wall {ab['wall_ratio']:.3f}, slower rank's CPU {ab['cpu_ratio']:.3f}"
          f"  ({ab['reductions']} shared reductions)")


def run_scaling_job(n, path, args, timeout):
    """One job of a scaling repeat: an ``n``-rank ``train`` job (``path``), or the machine's
    ceiling (two 1-rank jobs at once, their samples/s summed), or a 2-rank job whose bucket
    goes through MPI's Allreduce (``"through MPI"``)."""
    if path == "ceiling":
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            both = list(pool.map(lambda _: launch(1, "train", args, timeout), range(2)))
        return {"samples_per_s": sum(r["train"]["samples_per_s"] for r in both)}
    if path == "through MPI":
        return launch(n, "train", args, timeout,
                      env_extra={"MINITORCH_DIST_SHARED_ALLREDUCE": "0"})["train"]
    return launch(n, path, args, timeout)[path]


def report_ceiling(pairs, ceilings, title=True):
    """Scaling against the machine's ceiling, per repeat: (2-rank samples/s / 1 rank's) /
    (two 1-rank jobs at once / the same 1 rank's) = the 2-rank job / the two 1-rank jobs.
    The ceiling is the most any 2-rank job can scale here, whatever its communication does
    (memory and caches shared by the cores, the machine's other load); measured in the same
    repeat, it sees the same load."""
    if title:
        print("\n   the machine's ceiling, in the same repeats: two 1-rank jobs at once, no "
              "communication")
    ratios = []
    for i, ((one, two), both) in enumerate(zip(pairs, ceilings)):
        ratios.append(two["samples_per_s"] / both["samples_per_s"])
        if title:
            print(f"  repeat {i}: two 1-rank jobs {both['samples_per_s']:8.1f} "
                  f"(x{both['samples_per_s'] / one['samples_per_s']:.2f} of one)   "
                  f"2 ranks / ceiling {ratios[-1]:.2f}")
        else:
            print(f"  repeat {i}: 2 ranks / ceiling {ratios[-1]:.2f}")
    print(f"  median 2 ranks / ceiling: {statistics.median(ratios):.2f}")
    return statistics.median(ratios)


def driver(args):
    from minitorch_dist.run import find_mpiexec
    try:
        import mpi4py
        find_mpiexec()
    except (ImportError, FileNotFoundError) as exc:
        raise SystemExit(f"bench_dist_opt: needs mpi4py and mpiexec ({exc})")
    timeout = 60 if args.quick else 300
    start = time.monotonic()
    first = launch(2, "wire,comm", args, timeout)
    paths = ["train", "train_packing"] if args.with_packing else ["train"]
    pairs, mixed, ceilings, through_mpi = {path: [] for path in paths}, {}, [], []
    for rep in range(args.repeats):       # ABBA order: drift in machine load cancels out
        order = [(n, path) for n in (1, 2) for path in paths] + [(2, "ceiling")]
        if args.compare_shared:
            order.append((2, "through MPI"))
        if rep % 2:
            order.reverse()
        got = {(n, path): run_scaling_job(n, path, args, timeout) for n, path in order}
        for path in paths:
            pairs[path].append((got[1, path], got[2, path]))
        ceilings.append(got[2, "ceiling"])
        if args.compare_shared:
            through_mpi.append((got[1, "train"], got[2, "through MPI"]))
        for path in paths:
            job = path.replace("train", "interleaved")
            mixed.setdefault(path, []).append(launch(2, job, args, timeout)[job])
    print(f"DistOpt benchmark: python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"mpi4py {mpi4py.__version__}, cpus {os.cpu_count()}, C++ kernels "
          f"{'on' if first['wire']['cpp'] else 'off'}{', QUICK' if args.quick else ''}")
    fp16, topk = report_wire(first["wire"])
    comm = report_comm(first["comm"])
    scaling = report_scaling(pairs["train"])
    if args.with_packing:
        print("   the same with value_and_grad + DistOpt.step(grads) (packs after backward):")
        packing = report_scaling(pairs["train_packing"], title=False)
    interleaved, cpu_ratio = report_interleaved(mixed["train"])
    if args.with_packing:
        print("   the same with value_and_grad + DistOpt.step(grads) (packs after backward):")
        packing_mixed, packing_cpu = report_interleaved(mixed["train_packing"], title=False)
    ceiling = report_ceiling(pairs["train"], ceilings)
    if args.compare_shared:
        shared_ab = launch(2, "shared_ab", args, timeout)["shared_ab"]
        report_shared_ab(shared_ab)
        print("   the same 2-rank jobs with MINITORCH_DIST_SHARED_ALLREDUCE=0 (the bucket "
              "reduced by MPI's Allreduce),\n   in the same repeats:")
        mpi_scaling = report_scaling(through_mpi, title=False)
        mpi_ceiling = report_ceiling(through_mpi, ceilings, title=False)
    print("\nsummary (timings are noisy on a shared machine: re-measure on a quiet one)"
          + ("\n  QUICK run: too few steps and rounds for the timing ratios to mean anything"
             if args.quick else ""))
    print(f"  bytes fp16 / fp32 = {fp16:.4f}  (target <= {TARGETS['fp16']})  "
          f"{verdict(fp16, TARGETS['fp16'])}")
    print(f"  bytes sparseTopK(0.01) / fp32 = {topk:.4f}  (target <= {TARGETS['topk']})  "
          f"{verdict(topk, TARGETS['topk'])}")
    print(f"  time DistOpt fp32 comm / raw Allreduce = {comm:.2f}  (target <= "
          f"{TARGETS['comm']})  {verdict(comm, TARGETS['comm'])}")
    print(f"  samples/s 2 ranks / 1 rank = {scaling:.2f}  (target >= {TARGETS['scaling']})  "
          f"{verdict(scaling, TARGETS['scaling'], lower_is_better=False)}")
    print(f"  samples/s 2 ranks / 1 rank, interleaved in one job = {interleaved:.2f}  (target >= "
          f"{TARGETS['scaling']})  "
          f"{verdict(interleaved, TARGETS['scaling'], lower_is_better=False)}")
    print(f"  2 ranks / 1 rank by CPU time = {cpu_ratio:.2f}  (target >= {TARGETS['scaling']})  "
          f"{verdict(cpu_ratio, TARGETS['scaling'], lower_is_better=False)}")
    print(f"  scaling / this machine's ceiling (two 1-rank jobs at once), per repeat, median = "
          f"{ceiling:.2f}  (target >= {TARGETS['ceiling']})  "
          f"{verdict(ceiling, TARGETS['ceiling'], lower_is_better=False)}")
    if args.compare_shared:
        print(f"  (the bucket through MPI's Allreduce instead: 2 ranks / 1 rank {mpi_scaling:.2f},"
              f" / ceiling {mpi_ceiling:.2f})")
        print(f"  2-rank step, bucket through shared memory / through MPI, in one job = "
              f"{shared_ab['wall_ratio']:.3f} (CPU {shared_ab['cpu_ratio']:.3f})")
    if args.with_packing:
        print(f"  (value_and_grad + step(grads), packing after backward: {packing:.2f}, "
              f"interleaved {packing_mixed:.2f}, by CPU time {packing_cpu:.2f})")
    print(f"  ({time.monotonic() - start:.0f} s in all)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke test: few steps, ~30 s")
    parser.add_argument("--repeats", type=int, default=None, help="1-rank/2-rank job pairs")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per job")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps/rounds first")
    parser.add_argument("--rounds", type=int, default=None, help="communication rounds")
    parser.add_argument("--blocks", type=int, default=None, help="blocks of timed training steps")
    parser.add_argument("--with-packing", action="store_true",
                        help="also time the packing path (value_and_grad + step(grads))")
    parser.add_argument("--compare-shared", action="store_true",
                        help="also run each repeat's 2-rank job with the bucket reduced by "
                             "MPI's Allreduce (MINITORCH_DIST_SHARED_ALLREDUCE=0)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    defaults = dict(repeats=1, steps=6, warmup=2, rounds=30, blocks=2) if args.quick else \
        dict(repeats=7, steps=80, warmup=5, rounds=400, blocks=8)
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.worker:
        worker(args)
    else:
        driver(args)


if __name__ == "__main__":
    main()
