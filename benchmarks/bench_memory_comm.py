"""Memory and communication toolbox: what each feature saves, as ratios in one run.

1. **optimizer parallel**: per-rank bytes of parameters + optimizer state with
   ``enable_parallel_optimizer`` / without, Adam on an MLP (784-512-512-10) over 8 ranks
   (threads with an in-process communicator): states alone (target <= 1/8 + padding) and
   parameters + states (weights stay whole at level1: (1 + 2/8) / 3 is the floor; at
   ``optimizer_level="level3"`` they are sliced between steps too: target 1/8 + padding),
   and level3's peak parameter bytes during a step (the slices plus the one weight a
   primitive has gathered whole at a time);
2. **recompute**: peak traced host memory of one training step with every block recomputed
   / without, and the time it costs (medians of interleaved repeats), on a deep MLP and on
   ResNet stages (bottleneck blocks with batch norms); and the growth of the peak resident
   set (RSS) during one step, each setting in a process of its own;
3. **communication calls per step**, data parallel on 2 ranks: gradient allreduces with
   ``GradAccumulation(k=4)`` against 4 separate steps of the same micro-batches, and with
   ``Cell.set_comm_fusion`` ids (one per layer), comm fusion off, and the default buckets;
   and with optimizer parallel, the accumulated gradient bytes per rank and reduce-scatters
   per step with ``gradient_accumulation_shard`` / without.

    python benchmarks/bench_memory_comm.py [--quick]
"""
import argparse
import os
import statistics
import sys
import time
import tracemalloc

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import minitorch_dist as ms  # noqa: E402
from minitorch_dist import nn  # noqa: E402
from minitorch_dist.communication import run_ranks  # noqa: E402
from minitorch_dist.parallel import DistributedGradReducer  # noqa: E402
from minitorch_dist.parallel.data_parallel import gathered_use, weight_slicing  # noqa: E402
from minitorch_dist.parallel.nn import GradAccumulation  # noqa: E402
from minitorch_dist.parallel.sharding.scope import sharding_world  # noqa: E402


def _mlp(sizes, values=None):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Dense(a, b), nn.ReLU()]
    net = nn.SequentialCell(layers[:-1])
    for param, value in zip(net.trainable_params(), values or ()):
        param.set_data(ms.Tensor(value.copy()))
    return net


def _state_and_param_bytes(opt):
    """Bytes this rank keeps between steps: states, and parameters (a level3 weight: its
    slice only)."""
    state = sum(s.data.nbytes for p in opt.parameters for s in opt.states_of(p))
    return state, sum(weight_slicing.resident_bytes(p) for p in opt.parameters)


def optimizer_parallel(ranks=8, batch=32):
    sizes = (784, 512, 512, 10)
    ms.set_seed(0)
    values = [p.asnumpy() for p in _mlp(sizes).trainable_params()]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    y = rng.integers(0, 10, batch).astype(np.int32)

    def rank(comm):
        with sharding_world(comm):
            net = _mlp(sizes, values)
            loss = nn.WithLossCell(net, nn.CrossEntropyLoss())
            opt = nn.Adam(net.trainable_params(), 1e-3)
            reducer = DistributedGradReducer(opt.parameters, mean=True, communicator=comm)
            grad_fn = ms.value_and_grad(loss, None, opt.parameters)
            part = slice(comm.rank * batch // ranks, (comm.rank + 1) * batch // ranks)
            for _ in range(2):       # the second step starts from sliced weights (level3)
                gathered_use.reset_gathered_peak()
                _, grads = grad_fn(ms.Tensor(x[part]), ms.Tensor(y[part]))
                opt(reducer(grads))
            return _state_and_param_bytes(opt) + (gathered_use.gathered_bytes()[1],)

    results = {}
    for level in (None, "level1", "level3"):
        ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                     enable_parallel_optimizer=level is not None,
                                     parallel_optimizer_config={"optimizer_level":
                                                                level or "level1"})
        results[level] = run_ranks(ranks, rank, timeout=120)[0]
        ms.reset_auto_parallel_context()
    (state0, param0, _), (state1, param1, _) = results[None], results["level1"]
    state3, param3, gathered3 = results["level3"]
    print(f"1. optimizer parallel, Adam, {ranks} ranks, MLP 784-512-512-10 "
          f"({param0:,} parameter bytes per rank)")
    print(f"   optimizer state bytes per rank: {state1:,} / {state0:,} = "
          f"{state1 / state0:.4f}   (1/{ranks} = {1 / ranks:.4f})")
    print(f"   parameters + state per rank:    {param1 + state1:,} / {param0 + state0:,} = "
          f"{(param1 + state1) / (param0 + state0):.4f}   (weights stay whole)")
    print(f"   level3 parameters + state:      {param3 + state3:,} / {param0 + state0:,} = "
          f"{(param3 + state3) / (param0 + state0):.4f}   (weights sliced between steps)")
    print(f"   level3 peak parameter bytes in a step: {param3 + gathered3:,} / {param0:,} = "
          f"{(param3 + gathered3) / param0:.4f}   (slices + one weight gathered at a time)")


class _Block(nn.Cell):
    def __init__(self, width):
        super().__init__()
        self.a, self.b, self.act = nn.Dense(width, width), nn.Dense(width, width), nn.ReLU()

    def construct(self, x):
        return self.act(self.b(self.act(self.a(x)))) + x


def _recompute_step(recomputed, depth, width):
    ms.set_seed(1)
    blocks = [_Block(width).recompute(recomputed) for _ in range(depth)]
    network = nn.WithLossCell(nn.SequentialCell(blocks), nn.MSELoss())
    return ms.value_and_grad(network, None, network.trainable_params())


class _Bottleneck(nn.Cell):
    """A ResNet bottleneck block (1x1, 3x3, 1x1 convolutions with batch norms, identity)."""

    def __init__(self, channels):
        super().__init__()
        inner = channels // 4
        self.body = nn.SequentialCell([
            nn.Conv2d(channels, inner, 1), nn.BatchNorm2d(inner), nn.ReLU(),
            nn.Conv2d(inner, inner, 3, pad_mode="same"), nn.BatchNorm2d(inner), nn.ReLU(),
            nn.Conv2d(inner, channels, 1), nn.BatchNorm2d(channels)])
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.body(x) + x)


def _resnet_step(recomputed, channels=64, blocks=6):
    """ResNet stages: a stem, then ``blocks`` bottleneck blocks each recomputed (batch norms in
    training mode: their moving statistics move once per step either way)."""
    ms.set_seed(1)
    body = [_Bottleneck(channels).recompute(recomputed) for _ in range(blocks)]
    net = nn.SequentialCell([nn.Conv2d(3, channels, 3, pad_mode="same"), nn.ReLU()] + body +
                            [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dense(channels, 10)])
    network = nn.WithLossCell(net, nn.CrossEntropyLoss())
    return ms.value_and_grad(network, None, network.trainable_params())


_RESNET_INPUT = {False: (16, 32), True: (8, 16)}      # quick: (batch, image size)


def _resnet_inputs(batch, size=32):
    rng = np.random.default_rng(3)
    return (ms.Tensor(rng.standard_normal((batch, 3, size, size)).astype(np.float32)),
            ms.Tensor(rng.integers(0, 10, batch).astype(np.int32)))


def _mlp_inputs(batch, width):
    rng = np.random.default_rng(1)
    return (ms.Tensor(rng.standard_normal((batch, width)).astype(np.float32)),
            ms.Tensor(np.zeros((batch, width), np.float32)))


def _rss_child(model, recomputed, quick):
    """One model, one setting, in a process of its own: the growth of the peak resident set
    (``VmHWM``, reset by ``/proc/self/clear_refs`` after a warm-up step) over the resident
    set before the measured step, in KiB (Linux)."""
    if model == "mlp":
        step, (x, y) = _recompute_step(recomputed, 4 if quick else 8, 256), \
            _mlp_inputs(256 if quick else 1024, 256)
    else:
        step, (x, y) = _resnet_step(recomputed), _resnet_inputs(*_RESNET_INPUT[quick])
    step(x, y)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")                  # the peak resident set starts again from here
    before = _status_kib("VmRSS")
    step(x, y)
    print(_status_kib("VmHWM") - before)


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def _rss_growth(model, recomputed, quick):
    import subprocess
    command = [sys.executable, os.path.abspath(__file__), "--rss-child", model,
               str(int(recomputed))] + (["--quick"] if quick else [])
    # a fixed mmap threshold: large arrays go back to the system when freed (glibc would
    # otherwise raise it and keep them in its heap), so the resident set follows live memory
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True,
                          env=env)
    return int(done.stdout.split()[-1])


def _peak_and_time(steps, inputs, repeats):
    """Peak traced host memory of one step and the median step time, per setting."""
    x, y = inputs
    peaks, times = {}, {False: [], True: []}
    for rec, step in steps.items():
        step(x, y)
        tracemalloc.start()
        tracemalloc.reset_peak()
        step(x, y)
        peaks[rec] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    for _ in range(repeats):            # interleaved: load drifts hit both alike
        for rec, step in steps.items():
            start = time.perf_counter()
            step(x, y)
            times[rec].append(time.perf_counter() - start)
    return peaks, {rec: statistics.median(t) for rec, t in times.items()}


def _print_recompute(peaks, times, rss):
    print(f"   peak traced memory of a step: {peaks[True] / 2**20:.1f} MiB / "
          f"{peaks[False] / 2**20:.1f} MiB = {peaks[True] / peaks[False]:.3f}")
    print(f"   peak RSS growth of a step:    {rss[True] / 1024:.1f} MiB / "
          f"{rss[False] / 1024:.1f} MiB = {rss[True] / max(rss[False], 1):.3f}"
          "   (separate processes)")
    print(f"   step time: {times[True] * 1e3:.1f} ms / {times[False] * 1e3:.1f} ms = "
          f"{times[True] / times[False]:.3f}")


def recompute(depth=8, width=256, batch=512, repeats=5, quick=False):
    steps = {rec: _recompute_step(rec, depth, width) for rec in (False, True)}
    peaks, times = _peak_and_time(steps, _mlp_inputs(batch, width), repeats)
    rss = {rec: _rss_growth("mlp", rec, quick) for rec in (False, True)}
    print(f"2. recompute, {depth} residual blocks of 2 x Dense({width}), batch {batch} "
          f"(RSS: batch {256 if quick else 1024})")
    _print_recompute(peaks, times, rss)
    batch, size = _RESNET_INPUT[quick]
    steps = {rec: _resnet_step(rec) for rec in (False, True)}
    peaks, times = _peak_and_time(steps, _resnet_inputs(batch, size), max(1, repeats // 2))
    rss = {rec: _rss_growth("resnet", rec, quick) for rec in (False, True)}
    print(f"   ResNet stages, 6 bottleneck blocks (64 channels, batch norms) each recomputed, "
          f"batch {batch} x 3 x {size} x {size}")
    _print_recompute(peaks, times, rss)


def _calls_per_step(ids=None, micro_size=1, separate=1, fusion=None):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    y = rng.standard_normal((16, 4)).astype(np.float32)
    if fusion is not None:
        ms.set_auto_parallel_context(comm_fusion=fusion)

    def rank(comm):
        net = _mlp((32, 64, 64, 4))
        for layer, fusion_id in zip(net.cells()[::2], ids or ()):
            layer.set_comm_fusion(fusion_id)
        network = nn.WithLossCell(net, nn.MSELoss(reduction="sum"))
        if micro_size > 1:
            network = GradAccumulation(network, micro_size)
        params = net.trainable_params()
        reducer = DistributedGradReducer(params, communicator=comm)
        grad_fn = ms.value_and_grad(network, None, params)
        part = x[comm.rank * 8:(comm.rank + 1) * 8], y[comm.rank * 8:(comm.rank + 1) * 8]
        comm.reset_stats()
        n = 8 // separate
        for k in range(separate):      # the micro-batches as steps of their own
            _, grads = grad_fn(ms.Tensor(part[0][k * n:(k + 1) * n]),
                               ms.Tensor(part[1][k * n:(k + 1) * n]))
            reducer(grads)
        return comm.comm_stats()["calls"]
    try:
        return run_ranks(2, rank, timeout=60)[0]
    finally:
        ms.reset_auto_parallel_context()


def _sliced_accumulation(shard, ranks=4, micro_size=4):
    """Per rank: (accumulated gradient bytes, reduce-scatters per step) under optimizer
    parallel with ``GradAccumulation(k)``, ``gradient_accumulation_shard`` on or off."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((32, 32)).astype(np.float32)
    y = rng.standard_normal((32, 4)).astype(np.float32)
    ms.set_auto_parallel_context(
        parallel_mode="data_parallel", enable_parallel_optimizer=True,
        parallel_optimizer_config={"gradient_accumulation_shard": shard,
                                   "parallel_optimizer_threshold": 0})

    def rank(comm):
        with sharding_world(comm):
            net = _mlp((32, 64, 64, 4))
            network = GradAccumulation(nn.WithLossCell(net, nn.MSELoss(reduction="sum")),
                                       micro_size)
            opt = nn.SGD(net.trainable_params(), 0.01)
            reducer = DistributedGradReducer(opt.parameters, mean=False, communicator=comm)
            grad_fn = ms.value_and_grad(network, None, opt.parameters)
            part = slice(comm.rank * 8, (comm.rank + 1) * 8)
            comm.reset_stats()
            _, grads = grad_fn(ms.Tensor(x[part]), ms.Tensor(y[part]))
            opt(reducer(grads))
            calls = comm.comm_stats()["by_op"].get("reduce_scatter", {}).get("calls", 0)
            return network.accumulated_bytes, calls
    try:
        return run_ranks(ranks, rank, timeout=60)[0]
    finally:
        ms.reset_auto_parallel_context()


def communication():
    separate = _calls_per_step(separate=4)
    accumulated = _calls_per_step(micro_size=4)
    default = _calls_per_step()
    by_id = _calls_per_step(ids=(0, 1, 2))
    alone = _calls_per_step(fusion={"openstate": False})
    print("3. gradient collectives, data parallel on 2 ranks, MLP 32-64-64-4 (6 parameters)")
    print(f"   4 micro-batches: GradAccumulation(k=4) {accumulated} call(s) / 4 separate steps "
          f"{separate} = {accumulated / separate:.3f}")
    print(f"   per step: default buckets {default}, set_comm_fusion ids (0, 1, 2) {by_id}, "
          f"comm_fusion openstate=False {alone}")
    (whole, calls_whole), (sliced, calls_sliced) = (_sliced_accumulation(False),
                                                    _sliced_accumulation(True))
    print("   optimizer parallel on 4 ranks, GradAccumulation(k=4), gradient_accumulation_shard:")
    print(f"   accumulated gradient bytes per rank: {sliced:,} / {whole:,} = "
          f"{sliced / whole:.3f}   (reduce-scatters per step: {calls_sliced} / {calls_whole})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller recompute model")
    parser.add_argument("--rss-child", nargs=2, metavar=("MODEL", "RECOMPUTED"),
                        help=argparse.SUPPRESS)      # one RSS measurement (a child process)
    args = parser.parse_args()
    if args.rss_child:
        _rss_child(args.rss_child[0], args.rss_child[1] == "1", args.quick)
        return
    optimizer_parallel()
    if args.quick:
        recompute(depth=4, width=64, batch=128, repeats=3, quick=True)
    else:
        recompute()
    communication()


if __name__ == "__main__":
    main()
