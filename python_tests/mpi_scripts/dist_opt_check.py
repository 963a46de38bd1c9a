"""DistOpt on real processes: N ranks train a small MLP and must match one process.

    python -m minitorch_dist.run -n 4 --timeout 120 dist_opt_check.py [--steps 6]
    python dist_opt_check.py --multiprocess 2      # SINGA's launch: UniqueId + multiprocessing
    ... --option fp16|partialUpdate|sparseTopK|sparseThreshold [--spars S] [--tol T]

Every rank builds the MLP from a *different* seed (DistOpt's broadcast must fix that), takes
its contiguous shard of each global batch and trains with ``DistOpt(SGD(momentum))``. Rank 0
also trains a plain copy on the full batch; after every step the largest parameter
difference must stay within ``--tol`` (1e-5), and at the end every rank must hold the same
values. Rank 0 prints ``DIST_OPT_CHECK OK ...``; any failure raises, which ends the job
non-zero. ``--fail-rank R`` makes rank R raise after the first step, to test exactly that.
"""
import argparse
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # before NumPy starts its BLAS pool

import numpy as np  # noqa: E402

GLOBAL_BATCH, IN, HIDDEN, OUT = 24, 10, 16, 3


def build_net(seed):
    import minitorch_dist as ms
    from minitorch_dist import nn
    ms.set_seed(seed)
    return nn.SequentialCell(nn.Dense(IN, HIDDEN), nn.Tanh(), nn.Dense(HIDDEN, OUT))


def batches(steps):
    rng = np.random.default_rng(2024)
    for _ in range(steps):
        x = rng.standard_normal((GLOBAL_BATCH, IN)).astype(np.float32)
        y = rng.standard_normal((GLOBAL_BATCH, OUT)).astype(np.float32)
        yield x, y


def make_optimizer(params):
    from minitorch_dist import nn
    return nn.SGD(params, learning_rate=0.1, momentum=0.9, weight_decay=1e-3)


def train(args, rank=None, world_size=None, unique_id=None):
    import minitorch_dist as ms
    from minitorch_dist import nn
    from minitorch_dist.parallel import DistOpt

    if unique_id is None:
        from minitorch_dist.communication import get_rank, init
        init()
        rank = get_rank()
    net = build_net(seed=100 + rank)                      # ranks disagree at first
    loss_fn = nn.MSELoss()
    opt = DistOpt(make_optimizer(net.trainable_params()), nccl_id=unique_id, local_rank=rank,
                  world_size=world_size, buffSize=args.buff_size)
    world = opt.world_size
    if GLOBAL_BATCH % world:
        raise ValueError(f"the global batch {GLOBAL_BATCH} must split evenly over {world} ranks")
    shard = GLOBAL_BATCH // world
    reference = None
    if rank == 0:                                         # one process on the full batch
        reference = build_net(seed=7)
        for mine, theirs in zip(reference.trainable_params(), net.trainable_params()):
            mine.data[...] = theirs.data                  # DistOpt broadcast rank 0's values
        ref_opt = make_optimizer(reference.trainable_params())
        ref_grad = ms.value_and_grad(lambda x, y: loss_fn(reference(x), y), None,
                                     ref_opt.parameters)
    worst = 0.0
    for step, (x, y) in enumerate(batches(args.steps)):
        lo = rank * shard
        loss = loss_fn(net(ms.Tensor(x[lo:lo + shard])), ms.Tensor(y[lo:lo + shard]))
        take_step(opt, loss, args)
        if args.fail_rank == rank:
            raise RuntimeError(f"deliberate failure on rank {rank} after step {step}")
        if reference is not None:
            _, grads = ref_grad(ms.Tensor(x), ms.Tensor(y))
            ref_opt(grads)
            diff = max(float(np.abs(a.asnumpy() - b.asnumpy()).max())
                       for a, b in zip(net.trainable_params(), reference.trainable_params()))
            worst = max(worst, diff)
            if diff > args.tol:
                raise AssertionError(f"step {step}: DistOpt on {world} ranks differs from one "
                                     f"process on the full batch by {diff:.3g} > {args.tol}")
    flat = np.concatenate([p.asnumpy().ravel() for p in net.trainable_params()])
    spread = float(np.abs(opt.communicator.allgather(flat) - flat).max())
    if spread != 0.0 and args.option != "partialUpdate":    # local SGD replicas do drift
        raise AssertionError(f"rank {rank}: replicas differ by {spread:.3g} after training")
    if rank == 0:
        print(f"DIST_OPT_CHECK OK world={world} steps={args.steps} max_diff={worst:.3g}",
              flush=True)


def take_step(opt, loss, args):
    if args.option == "fp32":
        opt(loss)
    elif args.option == "fp16":
        opt.backward_and_update_half(loss)
    elif args.option == "partialUpdate":
        opt.backward_and_partial_update(loss)
    else:
        opt.backward_and_sparse_update(loss, spars=args.spars, topK=args.option == "sparseTopK")


def _child(args, rank, world_size, unique_id):
    try:
        train(args, rank, world_size, unique_id)
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


def run_multiprocess(args):
    """SINGA's launch: the parent makes the id, children join with it; any failure ends all."""
    import multiprocessing
    import time
    from minitorch_dist.communication import UniqueId

    unique_id = UniqueId()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_child, args=(args, r, args.multiprocess, unique_id))
             for r in range(args.multiprocess)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + args.timeout
    while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
        if any(p.exitcode not in (None, 0) for p in procs):
            break
        time.sleep(0.05)
    for p in procs:
        if p.is_alive():
            p.terminate()
        p.join(5)
    codes = [p.exitcode for p in procs]
    if any(code != 0 for code in codes):
        print(f"DIST_OPT_CHECK FAILED exit codes {codes}", file=sys.stderr, flush=True)
        sys.exit(1)


def main():
    global HIDDEN
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--tol", type=float, default=1e-5)
    parser.add_argument("--buff-size", type=int, default=256, help="small: several buckets")
    parser.add_argument("--option", default="fp32", choices=["fp32", "fp16", "partialUpdate",
                                                             "sparseTopK", "sparseThreshold"])
    parser.add_argument("--spars", type=float, default=0.05)
    parser.add_argument("--hidden", type=int, default=HIDDEN,
                        help="hidden width (2048: a bucket large enough for shared memory)")
    parser.add_argument("--fail-rank", type=int, default=None)
    parser.add_argument("--multiprocess", type=int, default=0, help="ranks to spawn")
    parser.add_argument("--timeout", type=float, default=100.0)
    args = parser.parse_args()
    HIDDEN = args.hidden
    if args.multiprocess:
        run_multiprocess(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
