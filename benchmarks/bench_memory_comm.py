"""Memory and communication toolbox: what each feature saves, as ratios in one run.

1. **optimizer parallel**: per-rank bytes of parameters + optimizer state with
   ``enable_parallel_optimizer`` / without, Adam on an MLP (784-512-512-10) over 8 ranks
   (threads with an in-process communicator): states alone (target <= 1/8 + padding) and
   parameters + states (weights stay whole at level1: (1 + 2/8) / 3 is the floor; at
   ``optimizer_level="level3"`` they are sliced between steps too: target 1/8 + padding);
2. **recompute**: peak traced host memory of one training step of a deep MLP with every
   block recomputed / without, and the time it costs (medians of interleaved repeats);
3. **communication calls per step**, data parallel on 2 ranks: gradient allreduces with
   ``GradAccumulation(k=4)`` against 4 separate steps of the same micro-batches, and with
   ``Cell.set_comm_fusion`` ids (one per layer), comm fusion off, and the default buckets.

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
from minitorch_dist.parallel.data_parallel import weight_slicing  # noqa: E402
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
            _, grads = grad_fn(ms.Tensor(x[part]), ms.Tensor(y[part]))
            opt(reducer(grads))
            return _state_and_param_bytes(opt)

    results = {}
    for level in (None, "level1", "level3"):
        ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                     enable_parallel_optimizer=level is not None,
                                     parallel_optimizer_config={"optimizer_level":
                                                                level or "level1"})
        results[level] = run_ranks(ranks, rank, timeout=120)[0]
        ms.reset_auto_parallel_context()
    (state0, param0), (state1, param1) = results[None], results["level1"]
    state3, param3 = results["level3"]
    print(f"1. optimizer parallel, Adam, {ranks} ranks, MLP 784-512-512-10 "
          f"({param0:,} parameter bytes per rank)")
    print(f"   optimizer state bytes per rank: {state1:,} / {state0:,} = "
          f"{state1 / state0:.4f}   (1/{ranks} = {1 / ranks:.4f})")
    print(f"   parameters + state per rank:    {param1 + state1:,} / {param0 + state0:,} = "
          f"{(param1 + state1) / (param0 + state0):.4f}   (weights stay whole)")
    print(f"   level3 parameters + state:      {param3 + state3:,} / {param0 + state0:,} = "
          f"{(param3 + state3) / (param0 + state0):.4f}   (weights sliced between steps)")


class _Block(nn.Cell):
    def __init__(self, width):
        super().__init__()
        self.a, self.b, self.act = nn.Dense(width, width), nn.Dense(width, width), nn.ReLU()

    def construct(self, x):
        return self.act(self.b(self.act(self.a(x)))) + x


def _recompute_step(recomputed, depth, width, x, y):
    ms.set_seed(1)
    blocks = [_Block(width).recompute(recomputed) for _ in range(depth)]
    network = nn.WithLossCell(nn.SequentialCell(blocks), nn.MSELoss())
    return ms.value_and_grad(network, None, network.trainable_params())


def recompute(depth=8, width=256, batch=512, repeats=5):
    rng = np.random.default_rng(1)
    x = ms.Tensor(rng.standard_normal((batch, width)).astype(np.float32))
    y = ms.Tensor(np.zeros((batch, width), np.float32))
    steps = {rec: _recompute_step(rec, depth, width, x, y) for rec in (False, True)}
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
    plain, again = statistics.median(times[False]), statistics.median(times[True])
    print(f"2. recompute, {depth} residual blocks of 2 x Dense({width}), batch {batch}")
    print(f"   peak traced memory of a step: {peaks[True] / 2**20:.1f} MiB / "
          f"{peaks[False] / 2**20:.1f} MiB = {peaks[True] / peaks[False]:.3f}")
    print(f"   step time: {again * 1e3:.1f} ms / {plain * 1e3:.1f} ms = {again / plain:.3f}")


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller recompute model")
    args = parser.parse_args()
    optimizer_parallel()
    if args.quick:
        recompute(depth=4, width=64, batch=128, repeats=3)
    else:
        recompute()
    communication()


if __name__ == "__main__":
    main()
