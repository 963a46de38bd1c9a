"""Run under ``python -m minitorch_dist.run -n N``: allreduce through node-shared buffers
(``communication/node_shared.py``) against MPI's own Allreduce of the same values, the
cases that must fall back to MPI on every rank alike, and DistOpt's buckets taking the
shared path. ``off`` as the first argument: the job runs with
``MINITORCH_DIST_SHARED_ALLREDUCE=0`` and checks that nothing is shared.

Prints ``OK rank <r>`` on success; any failed check raises, which aborts the whole job.
"""
import gc
import os
import sys

import numpy as np
from mpi4py import MPI

import minitorch_dist as ms
from minitorch_dist import communication as C
from minitorch_dist import nn
from minitorch_dist.communication import node_shared
from minitorch_dist.parallel import DistOpt

ms.set_context(device_target="CPU")    # host buckets: what node-shared memory reduces, even
C.init()                               # where a (virtual) GPU would be the default
comm = C.get_communicator()
rank, size = comm.rank, comm.size
off = sys.argv[1:] == ["off"]
N = 100_003                     # 400 KB of float32, not divisible by the rank count


def values(seed, n=N, dtype=np.float32):
    return np.random.default_rng(1000 * seed + rank).normal(size=n).astype(dtype)


def mpi_sum(array):
    out = array.copy()
    comm.comm.Allreduce(MPI.IN_PLACE, out)
    return out


def same_on_every_rank(array):
    gathered = comm.comm.allgather(array.tobytes())
    assert all(g == gathered[0] for g in gathered), "ranks disagree"


def shared_count():
    return 0 if comm._shared is None else comm._shared.reductions


if off:
    assert comm._shared is None, "MINITORCH_DIST_SHARED_ALLREDUCE=0 must turn sharing off"
    buf = comm.allreduce_buffer(N, np.float32)
    buf[:] = values(1)
    expected = mpi_sum(buf)
    assert np.array_equal(comm.allreduce(buf, out=buf), expected)
    print(f"OK rank {rank}", flush=True)
    C.release()
    sys.exit(0)

# 1. a shared buffer reduced in place: MPI's sum (its bits with 2 ranks), the same bits on
#    every rank, the file gone once every rank mapped it; the second reduction too.
buf = comm.allreduce_buffer(N, np.float32)
token, _, path = comm._shared._owned[buf.ctypes.data]
assert os.path.exists(path)
for seed in (1, 2):
    buf[:] = values(seed)
    expected = mpi_sum(buf)
    before = shared_count()
    result = comm.allreduce(buf, out=buf)
    assert result is buf and shared_count() == before + 1, "the shared path was not taken"
    if size == 2:
        assert np.array_equal(buf, expected), "2 ranks: not Allreduce's bits"
    np.testing.assert_allclose(buf, expected, rtol=1e-5, atol=1e-5)
    same_on_every_rank(buf)
    comm.barrier()
    assert not os.path.exists(path), "the file must go once every rank mapped it"

# 2. mean, and float64
buf[:] = values(3)
expected = mpi_sum(buf) / size
np.testing.assert_allclose(comm.allreduce(buf, op="mean", out=buf), expected, rtol=1e-5,
                           atol=1e-6)
wide = comm.allreduce_buffer(N, np.float64)
wide[:] = values(4, dtype=np.float64)
expected = mpi_sum(wide)
before = shared_count()
np.testing.assert_allclose(comm.allreduce(wide, out=wide), expected, rtol=1e-12, atol=1e-14)
assert shared_count() == before + 1

# 3. fall back to MPI on every rank alike: one rank's array is plain, one rank's call is not
#    in place, a view of part of a buffer, a small array, float16
before = shared_count()
mixed = buf if rank == 0 else np.empty(N, np.float32)
mixed[:] = values(5)
expected = mpi_sum(mixed)
assert np.array_equal(comm.allreduce(mixed, out=mixed), expected)
buf[:] = values(6)
expected = mpi_sum(buf)
result = comm.allreduce(buf, out=buf) if rank == 0 else comm.allreduce(buf)
assert np.array_equal(result, expected)
part = buf[: N // 2]
part[:] = values(7, N // 2)
expected = mpi_sum(part)
assert np.array_equal(comm.allreduce(part, out=part), expected)
small = comm.allreduce_buffer(100, np.float32)
small[:] = values(8, 100)
expected = mpi_sum(small)
assert np.array_equal(comm.allreduce(small, out=small), expected)
halves = comm.allreduce_buffer(N, np.float16)
halves[:] = values(9, dtype=np.float16)
assert comm.allreduce(halves, out=halves).dtype == np.float16
assert shared_count() == before, "a fallback case took the shared path"

# 4. DistOpt's gradient bucket lives in shared memory and is reduced through it; the
#    replicas stay bit-identical
ms.set_seed(0)
net = nn.SequentialCell([nn.Dense(64, 256), nn.ReLU(), nn.Dense(256, 10)])
dist = DistOpt(nn.SGD(net.trainable_params(), learning_rate=0.1, momentum=0.9))
loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
before = shared_count()
for step in range(3):
    rng = np.random.default_rng(10 * step + rank)
    x = ms.Tensor(rng.normal(size=(8, 64)).astype(np.float32))
    y = ms.Tensor(rng.integers(0, 10, 8).astype(np.int32))
    dist(loss_fn(net(x), y))
assert shared_count() == before + 3, (shared_count(), before)
for p in net.trainable_params():
    same_on_every_rank(p.asnumpy())

# 5. a dropped buffer's peers are unmapped on every rank: the memory goes back to the
#    machine (before, each rank kept its peers' mappings until the job ended)
def peers_mapped(paths):
    with open("/proc/self/maps") as maps:
        return sorted({p for line in maps for p in paths if p in line})


drop = comm.allreduce_buffer(N, np.float32)
drop[:] = values(10)
comm.allreduce(drop, out=drop)
mine = (os.getpid(), comm._shared._owned[drop.ctypes.data][0])
peer_paths = [node_shared._path(pid, token) for pid, token in comm.comm.allgather(mine)
              if pid != os.getpid()]
assert len(peer_paths) == size - 1 and peers_mapped(peer_paths) == sorted(peer_paths)
del drop
gc.collect()
assert peers_mapped(peer_paths) == [], "a dropped buffer's peers stay mapped"
assert not any(mine in key for key in comm._shared._confirmed)
buf[:] = values(11)                 # the buffers still alive reduce as before
expected = mpi_sum(buf)
before = shared_count()
np.testing.assert_allclose(comm.allreduce(buf, out=buf), expected, rtol=1e-5, atol=1e-5)
assert shared_count() == before + 1

# every buffer reduced once has given its file up
left = [f for f in os.listdir(node_shared.SHARED_DIR) if f.startswith(f"minitorch_dist-{os.getpid()}-")]
assert not left, left
comm.barrier()
print(f"OK rank {rank}", flush=True)
C.release()
