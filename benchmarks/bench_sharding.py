"""Operator sharding of a Megatron-style MLP: parameter memory, bytes per step, step time.

The model (``MLP``) is one transformer-style feed-forward block with a regression head:

    y = GeLU(x @ W1 + b1) @ W2 + b2,    loss = MSE(y, labels),    optimizer Momentum

with x (B, D), W1 (D, H), W2 (H, O), written with explicit primitives (MatMul, Add, GeLU,
MatMul, Add) so that each can be ``shard``-ed. It runs under
``parallel_mode="semi_auto_parallel"`` on N ranks with ``dataset_strategy="data_parallel"``
(every rank loads B/N rows of x and of the labels) and these strategies, written dp x mp
(dp * mp = N):

=========  ==========================================================================
strategy   shard annotations (N = dp * mp)
=========  ==========================================================================
``dp``     dp = N, mp = 1: MatMul1 ((N, 1), (1, 1)), the rest alike: data parallel,
           every weight whole on every rank.
``mp``     dp = 1, mp = N (Megatron): W1 **column-parallel** (MatMul1 ((1, 1), (1, N)):
           W1 split on its output dimension), b1's Add ((1, N), (N,)) and GeLU ((1, N),)
           on the same columns, W2 **row-parallel** (MatMul2 ((1, N), (N, 1)): W2 split on
           its input dimension), whose partial sums an AllReduce finishes.
``mixed``  dp x mp, e.g. 2 x 2 on 4 ranks: MatMul1 ((dp, 1), (1, mp)), Add ((dp, mp), (mp,)),
           GeLU ((dp, mp),), MatMul2 ((dp, mp), (mp, 1)).
=========  ==========================================================================

b2's Add and the loss are not annotated: semi_auto_parallel runs them data parallel over
all N ranks (``default_strategy``), in every strategy.

The figures, per strategy and N:

1. **parameter bytes held / model bytes** on every rank (the local arrays after
   ``ShardedCell`` sliced the parameters). W1, b1 and W2 are split ``mp`` ways, so model
   parallel holds exactly 1/N of them; b2 (O floats) stays whole on every rank (it is added
   after the row-parallel AllReduce, as in Megatron), so the whole model's fraction is
   ``(P_split / mp + O) / (P_split + O)``, 1/N only up to b2. Both are printed and checked.
   The optimizer's moments are sliced with the parameters (same fraction).
2. **bytes sent per step per rank**, read from the communicators' counters (the world's and
   every sub-communicator of the program's ``GroupCache``, over one step after the first),
   next to two predictions:

   * *from the layouts* (``predicted_step_bytes``): walk the traced graph and each node's
     ``ShardPlan``: every redistribution between a tensor's layout and the layout its
     consumer wants (``plan_redistribution`` + ``plan_cost``, and the reverse collective in
     the backward when a gradient flows back through it), each operator's own forward
     collective (MatMul's AllReduce, the loss's AllReduce(mean)) and its backward, and the
     mirror all-reduce of every parameter's gradient over its copies;
   * *closed form* (4-byte floats; ``[c]`` is 1 when c holds, else 0)::

       bytes(dp, mp) = 4 * ( [mp > 1] * (B*D/N + 2*B*O/dp)            x AllGather, MatMul2's
                                                                      AllReduce fwd + bwd
                           + [dp > 1] * (D*H + H + H*O) / mp          mirror of W1, b1, W2
                           + O )                                      mirror of b2
                     + 8                                              the loss's AllReduce
                                                                      (mean) fwd + bwd

     Megatron (dp = 1, mp = N): ``4 * (B*D/N + 2*B*O + O) + 8``. Data parallel (mp = 1):
     ``4 * (D*H + H + H*O + O) + 8`` = every gradient once, plus the loss.

   How the counters count (``Communicator._count``): an AllReduce counts the whole buffer
   once per rank, an AllGather the rank's own block, a ReduceScatter / AllToAll the
   ``(n - 1) / n`` of the buffer that leaves the rank. So Megatron's activation AllReduce
   is ``4 * B * O`` bytes per direction whatever N is. A ring implementation moves
   ``2 (n - 1) / n`` times an AllReduce's buffer through every rank's link (and ``n - 1``
   blocks for an AllGather); the "ring" column converts the counted calls with those
   factors, per communicator.
3. **step time N thread ranks / 1 process**: the ranks are threads of this one process
   (``communication.run_ranks``), sharing its cores and its Python interpreter, with one
   BLAS thread (as the one-process baseline). So this ratio measures what sharding costs
   (the executor, the in-process collectives, the smaller GEMMs), not a speed-up: on N
   real devices each rank's GEMM work is 1/N (model parallel) of the one process's.
   Every repeat runs all jobs in a rotating order; each job times ``--steps`` steps between
   barriers after its warm-up; the ratios are taken within a repeat and printed as medians
   with [min, max] over the repeats.

Every job starts from the same weights (drawn once here, copied into every rank's net) and
trains on the same rotating set of batches, so its losses must equal one process's: the
largest relative difference is printed and checked (float32 summation order only).

    python benchmarks/bench_sharding.py [--quick] [--ranks 2,4] [--repeats 5] [--steps 20]
                                        [--batch 64 --dim 512 --hidden 2048 --out 512]
                                        [--json PATH]
    (about 15 s on 2 cores; --quick: tiny sizes, a few seconds, for the smoke test)
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
if __name__ == "__main__":      # not when a test imports this file
    for _name in THREAD_VARIABLES:
        os.environ[_name] = "1"     # one BLAS thread, before NumPy starts

import numpy as np  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import minitorch_dist as ms  # noqa: E402
from minitorch_dist import Tensor, nn, ops  # noqa: E402
from minitorch_dist.communication import run_ranks  # noqa: E402
from minitorch_dist.nn.parameter import Parameter  # noqa: E402
from minitorch_dist.parallel.sharding.traffic import predicted_step_bytes  # noqa: E402
from minitorch_dist.parallel.sharding.sharded_cell import ShardedCell  # noqa: E402

LR, MOMENTUM = 0.01, 0.9
N_BATCHES = 4                   # the rotating set of batches
LOSS_RTOL = 1e-4                # sharded losses against one process's (float32 sums reorder)
SPLIT_PARAMS = ("w1", "b1", "w2")


# ============================================================================ the model
class MLP(nn.Cell):
    """``GeLU(x @ w1 + b1) @ w2 + b2`` from given weights; ``dp_mp=(dp, mp)`` shards it
    (module docstring), None leaves it unannotated (one process, or the default)."""

    def __init__(self, weights, dp_mp=None):
        super().__init__()
        for name in ("w1", "b1", "w2", "b2"):
            setattr(self, name, Parameter(Tensor(weights[name].copy()), name))
        self.matmul1, self.add1, self.gelu = ops.MatMul(), ops.Add(), ops.GeLU()
        self.matmul2, self.add2 = ops.MatMul(), ops.Add()
        if dp_mp is not None:
            dp, mp = dp_mp
            self.matmul1.shard(((dp, 1), (1, mp)))        # W1 column-parallel when mp > 1
            self.add1.shard(((dp, mp), (mp,)))
            self.gelu.shard(((dp, mp),))
            self.matmul2.shard(((dp, mp), (mp, 1)))       # W2 row-parallel: AllReduce after

    def construct(self, x):
        h = self.gelu(self.add1(self.matmul1(x, self.w1), self.b1))
        return self.add2(self.matmul2(h, self.w2), self.b2)


def make_weights(sizes, seed=0):
    """The initial weights, drawn once (every job copies them)."""
    B, D, H, O = sizes
    rng = np.random.default_rng(seed)
    return {"w1": (rng.standard_normal((D, H)) / math.sqrt(D)).astype(np.float32),
            "b1": (0.1 * rng.standard_normal(H)).astype(np.float32),
            "w2": (rng.standard_normal((H, O)) / math.sqrt(H)).astype(np.float32),
            "b2": (0.1 * rng.standard_normal(O)).astype(np.float32)}


def make_batches(sizes, seed=1):
    B, D, H, O = sizes
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((B, D)).astype(np.float32),
             rng.standard_normal((B, O)).astype(np.float32)) for _ in range(N_BATCHES)]


def strategies(n):
    """{name: (dp, mp)} for ``n`` ranks: dp, mp and, when n has a split with both > 1, mixed."""
    found = {"dp": (n, 1), "mp": (1, n)}
    if n >= 4 and n % 2 == 0:
        found["mixed"] = (2, n // 2)
    return found


# ============================================================================ predictions
def closed_form_bytes(dp, mp, sizes, itemsize=4):
    """Bytes one rank sends per step (module docstring's formula)."""
    B, D, H, O = sizes
    n = dp * mp
    if n == 1:
        return 0
    elements = O
    if mp > 1:
        elements += B * D // n + 2 * B * O // dp
    if dp > 1:
        elements += (D * H + H + H * O) // mp
    return itemsize * elements + 2 * itemsize


def parameter_fractions(dp, mp, sizes):
    """(fraction of W1, b1, W2 a rank holds, fraction of the whole model)."""
    B, D, H, O = sizes
    split = D * H + H + H * O
    return 1 / mp, (split / mp + O) / (split + O)


def ring_bytes(communicators):
    """The counted calls converted to a ring implementation's bytes through one rank's link."""
    total = 0.0
    for comm in communicators:
        n = comm.size
        for op, stats in comm.comm_stats()["by_op"].items():
            factor = {"allreduce": 2 * (n - 1) / n, "allgather": n - 1}.get(op, 1.0)
            total += stats["bytes_sent"] * factor
    return total


# ============================================================================ the jobs
def _loss(step, batch):
    x, y = batch
    return float(step(Tensor(x), Tensor(y)).asnumpy())


def one_process(sizes, weights, batches, steps):
    """Losses and step time of the unsharded model on the whole batch."""
    ms.reset_auto_parallel_context()
    net = MLP(weights)
    opt = nn.Momentum(net.trainable_params(), LR, MOMENTUM)
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), opt)
    losses = [_loss(step, batches[i % N_BATCHES]) for i in range(2)]
    start = time.perf_counter()
    losses += [_loss(step, batches[i % N_BATCHES]) for i in range(2, 2 + steps)]
    return {"losses": losses, "step_s": (time.perf_counter() - start) / steps}


def sharded(n, dp_mp, sizes, weights, batches, steps, timeout=300.0):
    """One job on ``n`` thread ranks; per-rank results (losses, bytes, memory, step time)."""
    B = sizes[0]
    rows = B // n
    ms.reset_auto_parallel_context()
    ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel",
                                 dataset_strategy="data_parallel")

    def rank(comm):
        mine = [(x[comm.rank * rows:(comm.rank + 1) * rows],
                 y[comm.rank * rows:(comm.rank + 1) * rows]) for x, y in batches]
        net = MLP(weights, dp_mp)
        opt = nn.Momentum(net.trainable_params(), LR, MOMENTUM)
        cell = ShardedCell(nn.WithLossCell(net, nn.MSELoss()), opt, group=comm)
        step = nn.TrainOneStepCell(cell, opt)
        losses = [_loss(step, mine[0])]                 # traces, slices, creates the groups
        comms = list({id(c): c for c in cell.program.groups.communicators() + [comm]}.values())
        for c in comms:
            c.reset_stats()
        losses.append(_loss(step, mine[1]))             # the counted step
        counted = sum(c.comm_stats()["bytes_sent"] for c in comms)
        ring = ring_bytes(comms)
        by_group = {f"{c.size} ranks #{k}": c.comm_stats()["by_op"] for k, c in enumerate(comms)}
        held = {p.name: p.data.nbytes for p in net.trainable_params()}
        state = sum(s.data.nbytes for slots in opt._slots.values() for s in slots)
        comm.barrier()
        start = time.perf_counter()
        losses += [_loss(step, mine[i % N_BATCHES]) for i in range(2, 2 + steps)]
        comm.barrier()
        elapsed = time.perf_counter() - start
        return {"losses": losses, "counted": counted, "ring": ring, "by_group": by_group,
                "layout": predicted_step_bytes(cell.program), "held": held, "opt_state": state,
                "step_s": elapsed / steps,
                "strategies": {node.name: node.strategy for node in cell.program.graph.nodes}}

    try:
        return run_ranks(n, rank, timeout=timeout)
    finally:
        ms.reset_auto_parallel_context()


# ============================================================================ the driver
def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def fmt(s, digits=2):
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}, {s['max']:.{digits}f}]"


def max_rel_diff(losses, reference):
    return max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, reference))


def check_job(name, n, dp_mp, sizes, ranks, reference):
    """The figures of one job that do not depend on timing, with the checks."""
    dp, mp = dp_mp
    model = {k: v.nbytes for k, v in make_weights(sizes).items()}
    total = sum(model.values())
    split_frac, whole_frac = parameter_fractions(dp, mp, sizes)
    formula = closed_form_bytes(dp, mp, sizes)
    figures = {"dp": dp, "mp": mp, "n": n, "closed_form_bytes": formula,
               "counted_bytes": [r["counted"] for r in ranks],
               "layout_bytes": [r["layout"]["total"] for r in ranks],
               "layout_breakdown": ranks[0]["layout"], "ring_bytes": ranks[0]["ring"],
               "by_group_rank0": ranks[0]["by_group"],
               "param_fraction_split": [sum(r["held"][p] for p in SPLIT_PARAMS)
                                        / sum(model[p] for p in SPLIT_PARAMS) for r in ranks],
               "param_fraction_model": [sum(r["held"].values()) / total for r in ranks],
               "opt_state_fraction": [r["opt_state"] / total for r in ranks],
               "predicted_fraction_split": split_frac, "predicted_fraction_model": whole_frac,
               "loss_max_rel_diff": max(max_rel_diff(r["losses"], reference) for r in ranks),
               "strategies": {k: str(v) for k, v in ranks[0]["strategies"].items()}}
    problems = []
    if figures["counted_bytes"] != [formula] * n:
        problems.append(f"counted bytes {figures['counted_bytes']} != closed form {formula}")
    if figures["layout_bytes"] != [formula] * n:
        problems.append(f"layout bytes {figures['layout_bytes']} != closed form {formula}")
    for key, want in (("param_fraction_split", split_frac), ("param_fraction_model", whole_frac),
                      ("opt_state_fraction", whole_frac)):
        if any(abs(f - want) > 1e-12 for f in figures[key]):
            problems.append(f"{key} {figures[key]} != {want}")
    if figures["loss_max_rel_diff"] > LOSS_RTOL:
        problems.append(f"losses differ from one process by {figures['loss_max_rel_diff']:.2e}")
    figures["problems"] = problems
    return figures


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 repeat, 2 steps")
    parser.add_argument("--ranks", default="2,4", help="comma-separated rank counts")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per job")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--out", type=int, default=512)
    parser.add_argument("--json", help="write the figures there")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.steps = 1, 2
        args.batch, args.dim, args.hidden, args.out = 16, 12, 32, 6
    args.ranks = [int(n) for n in args.ranks.split(",")]
    return args


def run(args, out=print):
    """Run every job ``args.repeats`` times in a rotating order; print and return the figures."""
    sizes = (args.batch, args.dim, args.hidden, args.out)
    for n in args.ranks:
        for name, (dp, mp) in strategies(n).items():
            if args.batch % n or args.hidden % mp or args.batch % dp:
                raise SystemExit(f"sizes {sizes} do not divide by the {name} strategy on {n} ranks")
    weights, batches = make_weights(sizes), make_batches(sizes)
    jobs = [("1 process", 1, None)] + [(name, n, dp_mp) for n in args.ranks
                                       for name, dp_mp in strategies(n).items()]
    started = time.perf_counter()
    times, results = {}, {}
    for repeat in range(args.repeats):
        k = repeat % len(jobs)
        for name, n, dp_mp in jobs[k:] + jobs[:k]:
            if dp_mp is None:
                results[(name, n)] = one_process(sizes, weights, batches, args.steps)
                times.setdefault((name, n), []).append(results[(name, n)]["step_s"])
            else:
                ranks = sharded(n, dp_mp, sizes, weights, batches, args.steps)
                results[(name, n)] = ranks
                times.setdefault((name, n), []).append(ranks[0]["step_s"])
    reference = results[("1 process", 1)]["losses"]
    B, D, H, O = sizes
    out(f"Megatron-style MLP B={B} D={D} H={H} O={O} (params {D * H + H + H * O + O:,}), "
        f"Momentum, semi_auto_parallel, dataset_strategy=data_parallel; ranks are threads of "
        f"one process (communication.run_ranks) on {os.cpu_count()} cores, 1 BLAS thread; "
        f"{args.repeats} repeats x {args.steps} timed steps")
    out("closed form: bytes/rank/step = 4*([mp>1]*(B*D/N + 2*B*O/dp) + [dp>1]*(D*H+H+H*O)/mp"
        " + O) + 8")
    figures, failed = {}, []
    header = (f"{'N':>2} {'strategy':8} {'dp x mp':>7} {'params held/model':>18} "
              f"{'W1,b1,W2 held':>13} {'counted B/step':>14} {'layouts':>9} {'formula':>9} "
              f"{'ring':>10} {'loss rel diff':>13}")
    out(header)
    for name, n, dp_mp in jobs[1:]:
        fig = check_job(name, n, dp_mp, sizes, results[(name, n)], reference)
        ratios = [s / b for s, b in zip(times[(name, n)], times[("1 process", 1)])]
        fig["time_ratio"] = spread(ratios)
        figures[f"{name}@{n}"] = fig
        failed += [f"{name} on {n} ranks: {p}" for p in fig["problems"]]
        out(f"{n:>2} {name:8} {fig['dp']:>3} x {fig['mp']:<3} "
            f"{statistics.mean(fig['param_fraction_model']):>18.4f} "
            f"{statistics.mean(fig['param_fraction_split']):>13.4f} "
            f"{fig['counted_bytes'][0]:>14,} {fig['layout_bytes'][0]:>9,} "
            f"{fig['closed_form_bytes']:>9,} {fig['ring_bytes']:>10,.0f} "
            f"{fig['loss_max_rel_diff']:>13.1e}")
    out("")
    out("where the bytes go (rank 0, from the layouts):")
    for key, fig in figures.items():
        parts = ", ".join(f"{k} {v:,}" for k, v in fig["layout_breakdown"].items()
                          if k != "total" and v)
        out(f"  {key:9} {parts}")
    out("")
    out("step time, median [min, max] over repeats:")
    for key, fig in figures.items():
        label = f"step time {key.replace('@', ' on ')} thread ranks / 1 process"
        out(f"  {label:52} = {fmt(fig['time_ratio'])}")
    base = times[("1 process", 1)]
    out(f"  (1 process: {statistics.median(base) * 1e3:.1f} ms/step median, shown only to "
        f"explain the ratios)")
    for n in args.ranks:
        if "mp" in strategies(n):
            fig = figures[f"mp@{n}"]
            out(f"model parallel on {n} ranks: W1,b1,W2 bytes held / model = "
                f"{statistics.mean(fig['param_fraction_split']):.4f} (1/N = {1 / n:.4f}); "
                f"whole model incl. the replicated b2 = "
                f"{statistics.mean(fig['param_fraction_model']):.4f}")
    out(f"({time.perf_counter() - started:.0f} s in all)")
    if failed:
        out("FAILED:\n  " + "\n  ".join(failed))
    else:
        out("checks: counted bytes == layout prediction == closed form on every rank; "
            "parameter fractions exact; losses equal one process's  PASS")
    return {"sizes": sizes, "figures": figures, "failed": failed,
            "one_process_step_s": spread(base)}


def main(argv=None):
    args = parse_args(argv)
    try:
        from threadpoolctl import threadpool_limits
        limits = threadpool_limits(1)
    except ImportError:      # the environment variables above already ask for 1 thread
        limits = None
    result = run(args)
    if limits is not None:
        limits.restore_original_limits()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=str)
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
