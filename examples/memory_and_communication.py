"""MindSpore's memory and communication toolbox, each feature off and on, side by side.

Six small trainings, each run twice (feature off / on), print what the feature saves and
that the two runs agree; every figure is measured in this run:

1. optimizer parallel (``enable_parallel_optimizer``, Adam): per-rank parameter + state bytes,
   at ``optimizer_level`` level1 (states sliced) and level3 (weights sliced too);
2. gradient accumulation (``parallel.nn.GradAccumulation``): collectives per step;
3. comm fusion (``Cell.set_comm_fusion``, ``comm_fusion``): allreduces per step;
4. multiple copies (``parallel.nn.MicroBatchInterleaved``): same results, same reductions;
5. recompute (``Cell.recompute()``): the virtual GPU's peak memory of a training step;
6. memory offload (``memory_offload="ON"``): the virtual GPU's peak, and a memory cap that
   only the offloaded model fits under.

Sections 1 to 4 train data parallel on 4 ranks::

    python -m minitorch_dist.run -n 4 examples/memory_and_communication.py

In one process (``python examples/memory_and_communication.py``) they run on 4 thread ranks
of an in-process communicator instead. Sections 5 and 6 need no ranks: rank 0 runs them on
the virtual GPU (host memory that counts its bytes, see docs/memory_and_communication.md).
"""
import argparse
import os

import numpy as np

import minitorch_dist as ms
from minitorch_dist import log, nn
from minitorch_dist.backend import DeviceOutOfMemoryError, get_device
from minitorch_dist.communication import get_communicator, get_rank, init, launched_world_size, run_ranks
from minitorch_dist.parallel import DistributedGradReducer, resident_bytes
from minitorch_dist.parallel.nn import GradAccumulation, MicroBatchInterleaved
from minitorch_dist.parallel.sharding.scope import sharding_world

THREAD_RANKS = 4          # ranks of the in-process communicator when not launched
SECTIONS = ("optimizer", "accumulation", "fusion", "copies", "recompute", "offload")


# ---- ranks: the launcher's processes, or threads of one process ----------------------------
def on_ranks(train):
    """``train(comm)`` on every rank; returns rank 0's result on rank 0 (None elsewhere).
    The auto-parallel context is set by the caller, alike in every process."""
    if launched():
        comm = get_communicator()
        result = _in_world(train, comm)
        return result if comm.rank == 0 else None
    return run_ranks(THREAD_RANKS, lambda comm: _in_world(train, comm), timeout=120)[0]


def _in_world(train, comm):
    with sharding_world(comm):
        return train(comm)


def data_parallel(**config):
    ms.reset_auto_parallel_context()
    ms.set_auto_parallel_context(parallel_mode="data_parallel", **config)


def launched():
    """True in a process the launcher (or mpiexec) started as one of several ranks."""
    return (launched_world_size() or 1) > 1


def world_size():
    return launched_world_size() if launched() else THREAD_RANKS


# ---- the data and the networks --------------------------------------------------------------
def batch(rows, width, outputs, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, width)).astype(np.float32),
            rng.standard_normal((rows, outputs)).astype(np.float32))


def mlp(sizes, seed=0):
    """Dense layers with ReLUs between; the same weights on every rank and every call
    (drawn from a seeded generator of its own, so thread ranks share no draws)."""
    rng = np.random.default_rng(seed)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layer = nn.Dense(a, b)
        layer.weight.set_data(ms.Tensor((rng.standard_normal((b, a)) / np.sqrt(a)).astype(np.float32)))
        layer.bias.set_data(ms.Tensor(np.zeros(b, np.float32)))
        layers += [layer, nn.ReLU()]
    return nn.SequentialCell(layers[:-1])


def my_rows(array, comm):
    """This rank's share of the global batch."""
    n = len(array) // comm.size
    return array[comm.rank * n:(comm.rank + 1) * n]


def collective_calls(comm, op=None):
    stats = comm.comm_stats()
    return stats["calls"] if op is None else stats["by_op"].get(op, {}).get("calls", 0)


def max_difference(first, second):
    return max(float(np.max(np.abs(a - b))) for a, b in zip(first, second))


def relative_difference(first, second):
    """The largest difference of each pair of arrays over the largest magnitude of the second."""
    return max(float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))
               for a, b in zip(first, second))


def ratio_line(what, on, off, unit=""):
    return f"   {what}: off {off:,}{unit} | on {on:,}{unit} | on/off = {on / off:.3f}"


# ---- 1. optimizer parallel ------------------------------------------------------------------
OPT_SIZES, OPT_STEPS = (64, 256, 256, 10), 3


def adam_training(comm, x, y):
    net = mlp(OPT_SIZES)
    opt = nn.Adam(net.trainable_params(), 1e-3)
    reducer = DistributedGradReducer(opt.parameters, mean=True, communicator=comm)
    network = nn.WithLossCell(net, nn.MSELoss())
    grad_fn = ms.value_and_grad(network, None, opt.parameters)
    for _ in range(OPT_STEPS):
        _, grads = grad_fn(ms.Tensor(my_rows(x, comm)), ms.Tensor(my_rows(y, comm)))
        opt(reducer(grads))
    state = sum(s.data.nbytes for p in opt.parameters for s in opt.states_of(p))
    held = sum(resident_bytes(p) for p in opt.parameters)    # a level3 weight: its slice
    params = [p.asnumpy() for p in opt.parameters]   # level3: gathered, alike on every rank
    return {"bytes": held + state, "state": state, "params": params}


def one_process_adam(x, y):
    net = mlp(OPT_SIZES)
    opt = nn.Adam(net.trainable_params(), 1e-3)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    for _ in range(OPT_STEPS):
        step(ms.Tensor(x), ms.Tensor(y))
    return [p.asnumpy() for p in opt.parameters]


def optimizer_parallel():
    x, y = batch(8 * world_size(), OPT_SIZES[0], OPT_SIZES[-1], seed=1)
    runs = {}
    for level in (None, "level1", "level3"):
        data_parallel(gradients_mean=True, enable_parallel_optimizer=level is not None,
                      parallel_optimizer_config={"parallel_optimizer_threshold": 0,
                                                 "optimizer_level": level or "level1"})
        runs[level] = on_ranks(lambda comm: adam_training(comm, x, y))
    ms.reset_auto_parallel_context()
    if runs[None] is None:
        return
    off, on, sliced = runs[None], runs["level1"], runs["level3"]
    single = one_process_adam(x, y)
    print(f"1. optimizer parallel: Adam, MLP {'-'.join(map(str, OPT_SIZES))}, "
          f"{world_size()} ranks, {OPT_STEPS} steps")
    print(ratio_line("optimizer state bytes per rank", on["state"], off["state"]) +
          f"   (1/{world_size()} = {1 / world_size():.3f})")
    print(ratio_line("parameter + state bytes per rank", on["bytes"], off["bytes"]) +
          "   (level1: weights stay whole)")
    print(ratio_line("with optimizer_level='level3'", sliced["bytes"], off["bytes"]) +
          "   (weights sliced between steps too)")
    for name, run in (("level1", on), ("level3", sliced)):
        print(f"   agree: {name} merged parameters vs off max |diff| = "
              f"{max_difference(run['params'], off['params']):.1e}, vs one process "
              f"{max_difference(run['params'], single):.1e} (<= 1e-5)")


# ---- 2. gradient accumulation -----------------------------------------------------------------
MICRO = 4


def accumulated_gradients(comm, x, y, micro_size, separate):
    """Gradient collectives for this rank's rows, as one step of ``GradAccumulation`` (or
    one plain step) or as ``separate`` steps of a micro-batch each; and the gradients."""
    net = mlp((32, 64, 64, 4))
    network = nn.WithLossCell(net, nn.MSELoss(reduction="sum"))
    if micro_size > 1:
        network = GradAccumulation(network, micro_size)
    params = net.trainable_params()
    reducer = DistributedGradReducer(params, communicator=comm)
    grad_fn = ms.value_and_grad(network, None, params)
    rows_x, rows_y = my_rows(x, comm), my_rows(y, comm)
    n = len(rows_x) // separate
    comm.reset_stats()
    total = None
    for k in range(separate):
        _, grads = grad_fn(ms.Tensor(rows_x[k * n:(k + 1) * n]), ms.Tensor(rows_y[k * n:(k + 1) * n]))
        reduced = [g.asnumpy() for g in reducer(grads)]
        total = reduced if total is None else [a + b for a, b in zip(total, reduced)]
    return {"calls": collective_calls(comm), "grads": total}


def gradient_accumulation():
    x, y = batch(8 * world_size(), 32, 4, seed=2)
    data_parallel()
    accumulated = on_ranks(lambda comm: accumulated_gradients(comm, x, y, MICRO, 1))
    separate = on_ranks(lambda comm: accumulated_gradients(comm, x, y, 1, MICRO))
    large = on_ranks(lambda comm: accumulated_gradients(comm, x, y, 1, 1))
    ms.reset_auto_parallel_context()
    if accumulated is None:
        return
    print(f"2. gradient accumulation: GradAccumulation(net, {MICRO}), {world_size()} ranks, "
          f"8 rows per rank")
    print(ratio_line(f"gradient collectives for {MICRO} micro-batches (off: {MICRO} steps)",
                     accumulated["calls"], separate["calls"]))
    print(f"   agree: accumulated gradients vs one batch {MICRO} times larger, relative "
          f"max |diff| = {relative_difference(accumulated['grads'], large['grads']):.1e} (<= 1e-6)")


# ---- 3. comm fusion ---------------------------------------------------------------------------
def allreduces_per_step(comm, x, y, fusion_ids):
    net = mlp((32, 64, 64, 4))
    for layer, fusion_id in zip(net.cells()[::2], fusion_ids or ()):
        layer.set_comm_fusion(fusion_id)
    params = net.trainable_params()
    reducer = DistributedGradReducer(params, communicator=comm)
    grad_fn = ms.value_and_grad(nn.WithLossCell(net, nn.MSELoss()), None, params)
    comm.reset_stats()
    _, grads = grad_fn(ms.Tensor(my_rows(x, comm)), ms.Tensor(my_rows(y, comm)))
    reducer(grads)
    return collective_calls(comm, "allreduce")


def comm_fusion():
    x, y = batch(8 * world_size(), 32, 4, seed=3)
    counts = {}
    for name, fusion, ids in (("off", {"openstate": False}, None), ("default", None, None),
                              ("ids", None, (0, 1, 2))):
        data_parallel(**({"comm_fusion": fusion} if fusion else {}))
        counts[name] = on_ranks(lambda comm: allreduces_per_step(comm, x, y, ids))
    ms.reset_auto_parallel_context()
    if counts["off"] is None:
        return
    print(f"3. comm fusion: MLP 32-64-64-4 (6 parameters), {world_size()} ranks")
    print(f"   allreduces per step: off (comm_fusion openstate=False) {counts['off']} | "
          f"on, default buckets {counts['default']} | on, set_comm_fusion ids (0, 1, 2) "
          f"{counts['ids']} | default/off = {counts['default'] / counts['off']:.3f}")


# ---- 4. multiple copies -----------------------------------------------------------------------
def copies_step(comm, x, y, copies):
    network = nn.WithLossCell(mlp((32, 64, 64, 4)), nn.MSELoss(reduction="sum"))
    if copies > 1:
        network = MicroBatchInterleaved(network, copies)
    params = network.trainable_params()
    reducer = DistributedGradReducer(params, communicator=comm)
    comm.reset_stats()
    loss, grads = ms.value_and_grad(network, None, params)(
        ms.Tensor(my_rows(x, comm)), ms.Tensor(my_rows(y, comm)))
    grads = [g.asnumpy() for g in reducer(grads)]
    return {"loss": float(loss.asnumpy()), "grads": grads, "calls": collective_calls(comm)}


def micro_batch_interleaved():
    x, y = batch(8 * world_size(), 32, 4, seed=5)
    data_parallel()
    plain = on_ranks(lambda comm: copies_step(comm, x, y, 1))
    copies = on_ranks(lambda comm: copies_step(comm, x, y, 2))
    ms.reset_auto_parallel_context()
    if plain is None:
        return
    print(f"4. multiple copies: MicroBatchInterleaved(net, 2), {world_size()} ranks")
    print(f"   gradient collectives per step: off {plain['calls']} | on {copies['calls']} "
          "(the copies' gradients meet on the parameters, then travel once)")
    print(f"   agree: loss off {plain['loss']:.6f} | on {copies['loss']:.6f}, gradients relative "
          f"max |diff| = {relative_difference(copies['grads'], plain['grads']):.1e} (<= 1e-5)")


# ---- 5 and 6: one process, on the virtual GPU -------------------------------------------------
def virtual_gpu(capacity="1GB"):
    """Switch to the virtual GPU with ``capacity`` (a fresh byte counter); returns it."""
    # read when a GPU is asked for: set here, the ranked sections before ran on the host
    os.environ["MINITORCH_DIST_VIRTUAL_GPU"] = "1"
    ms.set_context(device_target="GPU", max_device_memory=capacity)
    return get_device("GPU").memory


def peak_of(budget, train):
    """The device bytes ``train()`` adds at its peak, and what it returns; or, past the
    capacity, ("out of memory", None)."""
    budget.peak = start = budget.used
    try:
        result = train()
    except DeviceOutOfMemoryError:
        return "out of memory", None
    return budget.peak - start, result


def cap_between(low, high):
    """A capacity halfway between two peaks, in the MB (2**20 bytes) ``max_device_memory`` takes."""
    return f"{(low + high) / 2 / 2**20:.3f}MB"


def recompute_gradients(recomputed):
    blocks = []
    for b in range(4):                              # four blocks of six Dense(64) + ReLU
        layers = mlp((64,) * 7, seed=10 + b)
        blocks.append(layers.recompute(recomputed))
    network = nn.WithLossCell(nn.SequentialCell(blocks), nn.MSELoss())
    x, y = batch(512, 64, 64, seed=4)
    _, grads = ms.value_and_grad(network, None, network.trainable_params())(ms.Tensor(x), ms.Tensor(y))
    return [g.asnumpy() for g in grads]


def recompute():
    off, on, identical, capped = off_and_on(recompute_gradients)
    print("5. recompute: 4 blocks of 6 x Dense(64) + ReLU, batch 512, each block recomputed")
    print(ratio_line("device peak of a training step", on, off, " B") +
          "   (virtual GPU; the parameters are charged in both)")
    print(f"   capacity {capped['capacity']} (max_device_memory, halfway between the peaks): "
          f"off {capped[False]} | on {capped[True]}")
    print(f"   agree: gradients bit-identical: {identical}")


def off_and_on(train):
    """``train(flag)``'s device peaks with the feature off and on, whether both give the same
    bits, and both runs again under a capacity halfway between the peaks."""
    budget = virtual_gpu()
    (off, plain), (on, again) = (peak_of(budget, lambda: train(False)),
                                 peak_of(budget, lambda: train(True)))
    identical = all(np.array_equal(a, b) for a, b in zip(plain, again))
    return off, on, identical, capped_runs(train, off, on)


def capped_runs(train, off, on):
    """Each setting again under a capacity halfway between the two peaks."""
    capacity = cap_between(off, on)
    budget = virtual_gpu(capacity)
    runs = {flag: peak_of(budget, lambda flag=flag: train(flag))[0] for flag in (False, True)}
    runs = {flag: value if isinstance(value, str) else "trains" for flag, value in runs.items()}
    virtual_gpu()
    return dict(runs, capacity=capacity)


def offload_training(offloaded):
    ms.set_context(memory_offload="ON" if offloaded else "OFF")
    try:
        net = nn.WithLossCell(mlp((64,) * 13, seed=20), nn.MSELoss())   # 12 x Dense(64)
        opt = nn.Adam(net.trainable_params(), 1e-3)
        grad_fn = ms.value_and_grad(net, None, opt.parameters)
        x, y = batch(512, 64, 64, seed=6)
        for _ in range(2):
            _, grads = grad_fn(ms.Tensor(x), ms.Tensor(y))
            opt(grads)
        return [p.asnumpy() for p in opt.parameters]
    finally:
        ms.set_context(memory_offload="OFF")


def offload():
    off, on, identical, capped = off_and_on(offload_training)
    print("6. memory offload: 12 x Dense(64) + ReLU, batch 512, 2 Adam steps, "
          'memory_offload="ON"')
    print(ratio_line("device peak of training", on, off, " B") +
          "   (virtual GPU; activations and Adam's states wait on the host)")
    print(f"   capacity {capped['capacity']} (max_device_memory, halfway between the peaks): "
          f"off {capped[False]} | on {capped[True]}")
    print(f"   agree: parameters after 2 steps bit-identical: {identical}")


RUNNERS = {"optimizer": optimizer_parallel, "accumulation": gradient_accumulation,
           "fusion": comm_fusion, "recompute": recompute, "copies": micro_batch_interleaved,
           "offload": offload}
NEED_RANKS = ("optimizer", "accumulation", "fusion", "copies")


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                        metavar="SECTION",
                        help=f"which sections to run (default: all of {', '.join(SECTIONS)})")
    return parser


def main():
    args = build_parser().parse_args()
    log.rank0_progress_only()   # under the launcher: rank 0's lines only (all in the logs)
    if launched():
        init()
    for name in SECTIONS:
        if name not in args.sections:
            continue
        if name in NEED_RANKS:
            RUNNERS[name]()
        elif not launched() or get_rank() == 0:
            RUNNERS[name]()     # no ranks needed: rank 0 alone, after the ranked sections


if __name__ == "__main__":
    main()
