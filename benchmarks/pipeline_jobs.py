"""The worker side of ``bench_pipeline.py``: the model, the batches, and the jobs that one
fresh process (or a pair of pipeline ranks) runs and reports as one ``MARK`` + JSON line.

``bench_pipeline.py --worker NAME`` lands here: ``accum`` (one process, gradient
accumulation over the micro-batches), ``baseline`` (one process, a plain full-batch step),
``1f1b``/``gpipe``/``interleaved`` (two pipeline ranks). The driver, its figures and its
report are in ``bench_pipeline.py``, whose docstring describes the whole benchmark.
"""
import json
import os
import time

import numpy as np

MARK = "BENCH "                 # a worker's result line: MARK + JSON
STAGES = 2
LR, MOMENTUM = 0.001, 0.9
N_BATCHES = 4                   # the rotating set of batches
INTERLEAVED = "interleaved"     # 1F1B over 2 chunks per rank: the same model cut in quarters


def build_net(ms, nn, args, staged, chunks=1):
    """``args.layers`` Dense(width, width) with a ReLU between them, cut into ``STAGES *
    chunks`` equal ``SequentialCell``s: with ``chunks=1`` the first half is stage 0 and the
    second half stage 1; with ``chunks=2`` (interleaved) the quarters are stages 0, 1, 0, 1.
    The stages are set only when ``staged``. The same seed, the same layers in the same
    order: every job starts from the same weights."""
    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            cells = []
            for i in range(args.layers):
                cells.append(nn.Dense(args.width, args.width))
                if i < args.layers - 1:
                    cells.append(nn.ReLU())
            per_part = 2 * args.layers // (STAGES * chunks)   # Dense, ReLU per layer
            parts = [nn.SequentialCell(cells[k:k + per_part])
                     for k in range(0, len(cells), per_part)]
            if staged:
                for k, part in enumerate(parts):
                    part.pipeline_stage = k % STAGES
            self.parts = nn.CellList(parts)

        def construct(self, x):
            for part in self.parts:
                x = part(x)
            return x

    ms.set_seed(0)
    return Net()


def make_batches(ms, args):
    """The same rotating set on every process (every pipeline rank needs the inputs)."""
    rng = np.random.default_rng(1234)
    return [(ms.Tensor(rng.standard_normal((args.batch, args.width), dtype=np.float32)),
             ms.Tensor(rng.standard_normal((args.batch, args.width), dtype=np.float32)))
            for _ in range(N_BATCHES)]


def time_blocks(step, batches, args, barrier=None):
    """Warm-up steps, then ``args.steps`` timed steps in ``args.blocks`` blocks; the seconds
    per step of every block, and the last loss."""
    loss = None
    for i in range(args.warmup):
        loss = step(*batches[i % len(batches)])
    per_block = max(1, args.steps // args.blocks)
    times = []
    k = args.warmup
    for _ in range(args.blocks):
        if barrier:
            barrier()
        start = time.perf_counter()
        for _ in range(per_block):
            loss = step(*batches[k % len(batches)])
            k += 1
        if barrier:
            barrier()
        times.append((time.perf_counter() - start) / per_block)
    return times, float(loss.asnumpy())


def baseline_job(args):
    """One process, the whole model: plain TrainOneStepCell on the whole batch (the learning
    rate × 8, so that the update equals the pipeline's on its summed loss)."""
    import minitorch_dist as ms
    from minitorch_dist import nn
    net = build_net(ms, nn, args, staged=False)
    loss_net = nn.WithLossCell(net, nn.MSELoss())
    opt = nn.Momentum(net.trainable_params(), LR * args.micro, MOMENTUM)
    step = nn.TrainOneStepCell(loss_net, opt)
    times, loss = time_blocks(step, make_batches(ms, args), args)
    return {"job": "baseline", "step_s": times, "loss": loss,
            "parameter_bytes_model": int(sum(p.data.nbytes for p in net.get_parameters()))}


def accumulation_job(args):
    """One process, the whole model, gradient accumulation: for each of the 8 micro-batches
    of 32 rows a forward and a backward (``ms.value_and_grad``), the gradients added up in
    place, then one update. The pipeline's work exactly (the same GEMM shapes, the same
    summed loss and update), done one micro-batch after the other by one process."""
    import minitorch_dist as ms
    from minitorch_dist import nn
    net = build_net(ms, nn, args, staged=False)
    loss_net = nn.WithLossCell(net, nn.MSELoss())
    params = net.trainable_params()
    opt = nn.Momentum(params, LR, MOMENTUM)
    grad_fn = ms.value_and_grad(loss_net, None, params)
    rows = args.batch // args.micro

    def step(x, y):
        total, summed = 0.0, None
        for k in range(args.micro):
            part = slice(k * rows, (k + 1) * rows)
            loss, grads = grad_fn(ms.Tensor(x.data[part]), ms.Tensor(y.data[part]))
            total += float(loss.asnumpy())
            if summed is None:
                summed = list(grads)          # fresh arrays: accumulate into them
            else:
                for acc, g in zip(summed, grads):
                    acc.data += g.data
        opt(tuple(summed))
        return ms.Tensor(np.float32(total))

    times, loss = time_blocks(step, make_batches(ms, args), args)
    return {"job": "accum", "step_s": times, "loss": loss,
            "parameter_bytes_model": int(sum(p.data.nbytes for p in net.get_parameters()))}


def pipeline_job(args, kind):
    """The staged model on 2 ranks under schedule ``kind``; rank 0 returns every rank's figures."""
    from mpi4py import MPI
    import minitorch_dist as ms
    from minitorch_dist import communication, nn
    communication.init()
    world = MPI.COMM_WORLD
    chunks = 2 if kind == INTERLEAVED else 1
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL,
                                 pipeline_stages=STAGES,
                                 pipeline_config={"pipeline_scheduler": "1f1b" if chunks > 1
                                                  else kind,
                                                  "pipeline_interleave": chunks > 1})
    net = build_net(ms, nn, args, staged=True, chunks=chunks)
    net_pipeline = nn.PipelineCell(nn.WithLossCell(net, nn.MSELoss()), args.micro)
    opt = nn.Momentum(net.infer_param_pipeline_stage(), LR, MOMENTUM)
    step = nn.TrainOneStepCell(net_pipeline, opt)
    records = []          # per step: its seconds, the runtime's seconds per action kind

    def recorded(x, y):
        start = time.perf_counter()
        out = step(x, y)
        stats = net_pipeline.stats
        records.append((time.perf_counter() - start, stats["action_seconds"],
                        stats["waited_seconds"]))
        return out

    times, loss = time_blocks(recorded, make_batches(ms, args), args, barrier=world.Barrier)
    mine = {"rank": world.Get_rank(), "stage": net_pipeline.topology.stage,
            "stats": dict(net_pipeline.stats), "time": mean_breakdown(records[args.warmup:]),
            "step_s": times, "loss": loss}
    everyone = world.gather(mine, root=0)
    communication.release()
    if world.Get_rank() != 0:
        return None
    # rank 0's blocks: the barriers make both ranks' equal
    return {"job": kind, "ranks": sorted(everyone, key=lambda r: r["rank"]),
            "step_s": times, "loss": loss}


def mean_breakdown(records):
    """Mean seconds per step: the whole step, and per action kind its time and the part of it
    spent blocked on messages (``PipelineCell.stats``)."""
    n = len(records)
    out = {"step": sum(r[0] for r in records) / n, "actions": {}, "waited": {}}
    for _, actions, waited in records:
        for key, part in (("actions", actions), ("waited", waited)):
            for kind, seconds in part.items():
                out[key][kind] = out[key].get(kind, 0.0) + seconds / n
    return out


def worker(args):
    if args.worker == "accum":
        result = accumulation_job(args)
    elif args.worker == "baseline":
        result = baseline_job(args)
    else:
        result = pipeline_job(args, args.worker)
    if result is not None:
        result["cpp"] = _have_cpp()
        result["malloc"] = malloc_setting(os.environ)
        print(MARK + json.dumps(result), flush=True)


def _have_cpp():
    try:
        from minitorch_dist import kernels
        return bool(kernels.HAVE_CPP)
    except ImportError:
        return False


def malloc_setting(env):
    """The glibc variables of the launcher's allocator setting that ``env`` sets, as text."""
    from minitorch_dist.run import MALLOC_VARIABLES
    return " ".join(f"{name}={env[name]}" for name in MALLOC_VARIABLES if name in env)
