"""Pipeline x operator sharding x data parallel in one job, against one process.

8 ranks: 2 pipeline stages of 4 ranks; inside each stage the MatMuls are split 2 ways by
rows and 2 ways by columns (operator sharding over the stage's ranks, which are also its
data-parallel replicas). Each rank trains its stage's slices with ``value_and_grad`` and
``PipelineGradReducer``; one process trains the unsharded, unpipelined network on the same
global batches (micro-batches summed, as the pipeline does). Each rank checks that its
parameters are slices and equal the matching block of the one-process parameters, and that
its loss, summed over the stage's ranks, equals the one-process loss (a sum over micro-batches). Prints
``SHARDED_PIPELINE OK`` on rank 0.
"""
import sys

import numpy as np

import minitorch_dist as ms
from minitorch_dist import communication, nn, ops

STAGES, MICRO, ROWS, STEPS, D, H = 2, 2, 4, 3, 8, 16

communication.init()
rank, world = communication.get_rank(), communication.get_group_size()
replicas = world // STAGES
rng = np.random.default_rng(0)
W1 = rng.standard_normal((D, H)).astype(np.float32) * 0.3
W2 = rng.standard_normal((H, D)).astype(np.float32) * 0.3
W3 = rng.standard_normal((D, D)).astype(np.float32) * 0.3
x = rng.standard_normal((STEPS, replicas * ROWS, D)).astype(np.float32)
y = rng.standard_normal((STEPS, replicas * ROWS, D)).astype(np.float32)


class Front(nn.Cell):
    def __init__(self, sharded):
        super().__init__()
        self.w1 = ms.Parameter(ms.Tensor(W1.copy()), "w1")
        self.w2 = ms.Parameter(ms.Tensor(W2.copy()), "w2")
        self.mm1, self.relu, self.mm2 = ops.MatMul(), ops.ReLU(), ops.MatMul()
        if sharded:
            self.mm1.shard(((2, 1), (1, 2)))       # column split
            self.relu.shard(((2, 2),))
            self.mm2.shard(((2, 2), (2, 1)))       # row split: an AllReduce of partial sums

    def construct(self, a):
        return self.mm2(self.relu(self.mm1(a, self.w1)), self.w2)


class Back(nn.Cell):
    def __init__(self, sharded):
        super().__init__()
        self.w3 = ms.Parameter(ms.Tensor(W3.copy()), "w3")
        self.mm = ops.MatMul()
        if sharded:
            self.mm.shard(((2, 1), (1, 2)))

    def construct(self, a):
        return self.mm(a, self.w3)


class Net(nn.Cell):
    def __init__(self, sharded):
        super().__init__()
        self.front, self.back = Front(sharded), Back(sharded)
        if sharded:
            self.front.pipeline_stage, self.back.pipeline_stage = 0, 1

    def construct(self, a):
        return self.back(self.front(a))


def train(net, pipeline, batches, reducer):
    opt = nn.SGD(net.trainable_params(), 0.1)
    grad_fn = ms.value_and_grad(pipeline, None, opt.parameters)
    losses = []
    for bx, by in batches:
        loss, grads = grad_fn(ms.Tensor(bx), ms.Tensor(by))
        opt(reducer(grads))
        losses.append(float(loss.asnumpy()))
    return losses


# ---- 8 ranks: 2 stages x (2 x 2 sharding = 4 replicas) ------------------------------------
ms.set_auto_parallel_context(parallel_mode="semi_auto_parallel", pipeline_stages=STAGES,
                             gradients_mean=True)
net = Net(sharded=True)
pipe = nn.PipelineCell(nn.WithLossCell(net, nn.MSELoss()), MICRO)
replica = pipe.topology.replica
mine = [(x[s][replica * ROWS:(replica + 1) * ROWS], y[s][replica * ROWS:(replica + 1) * ROWS])
        for s in range(STEPS)]
opt_params = net.trainable_params()
reducer = nn.PipelineGradReducer(opt_params)
losses = train(net, pipe, mine, reducer)

# ---- one process, unsharded and unpipelined -------------------------------------------------
ms.set_auto_parallel_context(parallel_mode="stand_alone", pipeline_stages=1)
ref = Net(sharded=False)
ref_pipe = nn.PipelineCell(nn.WithLossCell(ref, nn.MSELoss()), MICRO * replicas)
ref_losses = train(ref, ref_pipe, [(x[s], y[s]) for s in range(STEPS)],
                   lambda g: tuple(t * (1.0 / replicas) for t in g))

# ---- checks ---------------------------------------------------------------------------------
reference = {p.name: p.asnumpy() for p in ref.trainable_params()}
checked = 0
for p in net.trainable_params():
    if p.released:
        continue
    layout = p.sharding_layout
    assert layout is not None, f"rank {rank}: {p.name} was not sliced"
    assert p.shape != layout.shape, f"rank {rank}: {p.name} holds its full shape {p.shape}"
    want = reference[p.name][layout.slice_for(p.sharding_rank)]
    np.testing.assert_allclose(p.asnumpy(), want, rtol=1e-5, atol=1e-6,
                               err_msg=f"rank {rank}: {p.name}")
    checked += 1
assert checked > 0
stage_sums = communication.get_communicator().allgather(np.array(losses, np.float64))
stage_sums = stage_sums.reshape(world, STEPS)
if pipe.topology.is_last_stage:
    total = stage_sums[pipe.topology.stage * replicas:(pipe.topology.stage + 1) * replicas]
    np.testing.assert_allclose(total.sum(axis=0), ref_losses, rtol=1e-5)
if rank == 0:
    print(f"SHARDED_PIPELINE OK world={world} stages={STAGES} losses={ref_losses}", flush=True)
sys.exit(0)
