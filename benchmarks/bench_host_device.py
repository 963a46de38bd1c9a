"""One sparse training step on a host embedding table, against PyTorch (issue 8).

The step: a ``rows x dim`` float32 table on the host (10,000,000 x 16 by default, 610 MiB), a
batch of ``batch x fields`` ids (4096 x 26), the lookup, the loss ``sum(rows * R)`` with a
fixed random ``R`` of the rows' shape, its backward (the table's gradient is the sparse set of
looked-up rows), and a lazy Adam update of the rows it names, duplicate ids merged first.

* **ours**: ``nn.EmbeddingLookup(rows, dim, target="CPU")`` and ``nn.LazyAdam`` with
  ``target="CPU"``, differentiated with ``ms.value_and_grad``, as a user writes it. The
  gradient is a ``RowTensor`` of the looked-up rows; the update is the fused C++ kernel
  ``kernels.lazy_adam`` (radix-sort merge of duplicate ids, then one multithreaded pass over
  the distinct rows of the table and its two moments).
* **PyTorch**: ``torch.nn.Embedding(rows, dim, sparse=True)`` and ``torch.optim.SparseAdam``,
  the same loss, ``loss.backward()``.

Both start from the same table and use the same number of threads: ``--threads`` (default:
what our kernels pick on their own, one per core up to 16) goes to
``kernels.native.set_sparse_threads`` and to ``torch.set_num_threads``.

Ids: numpy's Zipf sampler with exponent ``--zipf`` (1.1): a rank ``k >= 1`` becomes the id
``((k - 1) mod rows) * 2654435761 mod rows``, a bijection of the vocabulary that scatters the
popular ids over the table, as hashed categorical ids are (not all in its first rows). With
the defaults about 43% of a batch's ids are distinct. Each step takes the next batch of a
rotating set of ``--batches`` batches.

The two compute the same update: SparseAdam and MindSpore's lazy Adam are the same formula
(``m = b1 m + (1-b1) g``, ``v = b2 v + (1-b2) g^2``, ``w -= lr sqrt(1-b2^t)/(1-b1^t) m /
(sqrt(v) + eps)`` on the rows present, with ``t`` counted per optimizer), written with
different float32 roundings (PyTorch computes ``m + (g - m)(1-b1)``). The script checks this
first: from the same table it runs ``--check-steps`` steps of each on the same batches and
compares the touched rows of the table and of both moments, and a sample of untouched rows.

Timing: ``--repeats`` rounds; in each, both contenders run ``--steps`` steps, in an order that
alternates from round to round. A contender's time in a round is its mean step time; the
figure is PyTorch's time / ours (the speed-up), median and [min, max] over the rounds.
Absolute times are printed only to explain the ratio: the machine is shared.
``--phases`` also times forward, backward and update separately (from the tape:
``loss.backward()``, then the optimizer on ``table.grad``) and, inside our update, the pass
over the distinct rows alone (``kernels.lazy_adam`` again, on the gradient merged beforehand).

``--largest`` instead builds the largest table that trains here: it reads MemAvailable from
/proc/meminfo, takes ``--fraction`` (0.6) of it, sets aside the 10M-row reference table and
every step's working set, and sizes a table of ``dim`` columns at 12 bytes per element (the
table and LazyAdam's two moments; the table is made as zeros and filled in place, so that is
the peak too). It trains that table and the reference one, ``--warmup`` (1) step each, then
``--repeats`` (3) timed steps each, interleaved, and prints its rows x dim, bytes and the step
time ratio largest / reference. No PyTorch there; do not run it next to heavy jobs.

    python benchmarks/bench_host_device.py                 # the issue's figures (about 30 s)
    python benchmarks/bench_host_device.py --phases        # where the time goes
    python benchmarks/bench_host_device.py --largest       # the largest table (a report)
    python benchmarks/bench_host_device.py --rows 20000 --batch 64 --fields 4 --repeats 2
"""
import argparse
import gc
import importlib.util
import json
import math
import os
import statistics
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import minitorch_dist as ms  # noqa: E402
from minitorch_dist import kernels, nn  # noqa: E402

TARGET_SPEEDUP = 2.0
HASH_MULTIPLIER = 2654435761            # a prime: a bijection of [0, rows) unless it divides rows
BYTES_PER_ELEMENT = 12                  # float32 table + LazyAdam's two float32 moments
LR, BETA1, BETA2, EPS = 1e-3, 0.9, 0.999, 1e-8
AGREE_RTOL = 1e-4                       # of the largest change a step made (see check_agreement)


# ============================================================================ inputs
def zipf_ids(rng, rows, shape, exponent):
    """Ids of ``shape`` in ``[0, rows)``: Zipf ranks folded into the vocabulary and scattered
    over it (rank k -> ((k - 1) mod rows) * HASH_MULTIPLIER mod rows)."""
    if not 0 < rows < 2 ** 32:
        raise ValueError(f"rows must lie in [1, 2**32), got {rows}")
    multiplier = HASH_MULTIPLIER
    while math.gcd(multiplier, rows) != 1:
        multiplier += 2
    ranks = (rng.zipf(exponent, size=shape) - 1) % rows
    return (ranks.astype(np.uint64) * np.uint64(multiplier) % np.uint64(rows)).astype(np.int64)


def fill_random(table, seed, chunk_rows=1 << 20):
    """Fill a float32 table in place with N(0, 0.01^2), a chunk at a time (no float64 copy)."""
    rng = np.random.default_rng(seed)
    for start in range(0, table.shape[0], chunk_rows):
        block = table[start:start + chunk_rows]
        rng.standard_normal(out=block, dtype=np.float32)
        block *= np.float32(0.01)
    return table


def make_inputs(args, rows=None):
    rng = np.random.default_rng(args.seed + 1)
    rows = args.rows if rows is None else rows
    batches = [zipf_ids(rng, rows, (args.batch, args.fields), args.zipf)
               for _ in range(args.batches)]
    weights = rng.standard_normal((args.batch, args.fields, args.dim), dtype=np.float32)
    return batches, weights


# ============================================================================ contenders
class Ours:
    """``nn.EmbeddingLookup(target="CPU")`` + ``nn.LazyAdam(target="CPU")``."""

    name = "minitorch_dist"

    def __init__(self, rows, dim, seed, weights):
        # "zeros", then filled in place: a table passed as param_init would be copied while
        # the original is alive, and the largest table has no room for two of it
        self.emb = nn.EmbeddingLookup(rows, dim, param_init="zeros", target="CPU")
        fill_random(self.emb.embedding_table.data, seed)
        self.opt = nn.LazyAdam(self.emb.trainable_params(), learning_rate=LR, beta1=BETA1,
                               beta2=BETA2, eps=EPS)
        self.opt.target = "CPU"
        self.weights = ms.Tensor(weights)
        self.grad_fn = ms.value_and_grad(self._loss, None, self.opt.parameters)

    def _loss(self, ids):
        return (self.emb(ids) * self.weights).sum()

    def batch(self, ids):
        return ms.Tensor(ids)

    def step(self, ids):
        loss, grads = self.grad_fn(ids)
        self.opt(grads)
        return loss

    def phases(self, ids):
        """Seconds of forward, backward and update, and of the update's pass over the rows
        alone: ``kernels.lazy_adam`` once more, on the same gradient merged beforehand (the
        rest of the update is the merge of duplicate ids and the optimizer's Python)."""
        table = self.emb.embedding_table
        t0 = time.perf_counter()
        loss = self._loss(ids)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        grad, table.grad = table.grad, None
        self.opt((grad,))
        t3 = time.perf_counter()
        rows, summed = kernels.unique_merge(grad.indices.data, grad.values.data)
        m, v = self.opt.moment1[0].data, self.opt.moment2[0].data
        t4 = time.perf_counter()
        kernels.lazy_adam(table.data, m, v, rows, summed, LR, BETA1, BETA2, EPS,
                          self.opt.current_step())
        t5 = time.perf_counter()
        return {"forward": t1 - t0, "backward": t2 - t1, "update": t3 - t2,
                "rows alone": t5 - t4}

    def state(self, rows):
        """(table, moment1, moment2) rows as NumPy copies."""
        return (self.emb.embedding_table.data[rows].copy(), self.opt.moment1[0].data[rows].copy(),
                self.opt.moment2[0].data[rows].copy())


class Torch:
    """``torch.nn.Embedding(sparse=True)`` + ``torch.optim.SparseAdam``."""

    name = "PyTorch"

    def __init__(self, table, weights):
        import torch
        self.torch = torch
        self.emb = torch.nn.Embedding.from_pretrained(torch.tensor(table), freeze=False,
                                                      sparse=True)
        self.opt = torch.optim.SparseAdam(self.emb.parameters(), lr=LR, betas=(BETA1, BETA2),
                                          eps=EPS)
        self.weights = torch.from_numpy(weights)

    def batch(self, ids):
        return self.torch.from_numpy(ids)

    def step(self, ids):
        self.opt.zero_grad()
        loss = (self.emb(ids) * self.weights).sum()
        loss.backward()
        self.opt.step()
        return loss

    def phases(self, ids):
        self.opt.zero_grad()
        t0 = time.perf_counter()
        loss = (self.emb(ids) * self.weights).sum()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        self.opt.step()
        t3 = time.perf_counter()
        return {"forward": t1 - t0, "backward": t2 - t1, "update": t3 - t2}

    def state(self, rows):
        weight = self.emb.weight
        state = self.opt.state[weight]
        index = self.torch.from_numpy(rows)
        return tuple(t.detach()[index].numpy().copy()
                     for t in (weight, state["exp_avg"], state["exp_avg_sq"]))


def set_threads(n):
    """The same thread count for our row kernels and for PyTorch's intra-op pool."""
    import torch
    if kernels.HAVE_CPP:
        kernels.native.set_sparse_threads(n)
    torch.set_num_threads(n)


def default_threads():
    """What our kernels pick on their own: one per core, at most 16."""
    return min(16, os.cpu_count() or 1)


# ============================================================================ checks
def check_agreement(ours, theirs, batches, steps):
    """Run ``steps`` steps of both from the same table on the same batches and compare the
    rows they touched (table, moment 1, moment 2) and a sample of untouched rows.

    The table's difference is measured against the largest change a step made to any
    element (about ``lr``), the moments' against their own largest value."""
    rows = ours.emb.embedding_table.shape[0]
    touched = np.unique(np.concatenate([b.reshape(-1) for b in batches[:steps]]))
    untouched = np.setdiff1d(np.random.default_rng(7).integers(0, rows, 256), touched)
    before = ours.state(touched)[0]
    untouched_before = ours.state(untouched)[0]
    for k in range(steps):
        ours.step(ours.batch(batches[k]))
        theirs.step(theirs.batch(batches[k]))
    mine, yours = ours.state(touched), theirs.state(touched)
    change = float(np.abs(mine[0] - before).max())
    scales = (change, float(np.abs(mine[1]).max()), float(np.abs(mine[2]).max()))
    diffs = [float(np.abs(a.astype(np.float64) - b).max()) for a, b in zip(mine, yours)]
    rel = [d / s if s > 0 else math.inf for d, s in zip(diffs, scales)]
    kept = all(np.array_equal(c.state(untouched)[0], untouched_before) for c in (ours, theirs))
    return {"steps": steps, "touched_rows": int(touched.size), "largest_change": change,
            "max_abs_diff": dict(zip(("table", "moment1", "moment2"), diffs)),
            "max_rel_diff": dict(zip(("table", "moment1", "moment2"), rel)),
            "untouched_rows_unchanged": bool(kept),
            "agree": bool(kept and change > 0 and max(rel) <= AGREE_RTOL)}


# ============================================================================ timing
def time_steps(contender, batches, start, steps):
    """Mean seconds per step over ``steps`` steps from batch ``start`` on."""
    begin = time.perf_counter()
    for k in range(steps):
        contender.step(batches[(start + k) % len(batches)])
    return (time.perf_counter() - begin) / steps


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def fmt(s, digits=2):
    return f"{s['median']:.{digits}f}  [{s['min']:.{digits}f}, {s['max']:.{digits}f}]"


def run_rounds(contenders, batch_sets, args, steps):
    """Interleaved rounds; per round the step time of every contender (order alternates)."""
    names = list(contenders)
    for name in names:                               # warm-up: pages, caches, allocator
        for k in range(args.warmup):
            contenders[name].step(batch_sets[name][k % len(batch_sets[name])])
    rounds = []
    for r in range(args.repeats):
        order = names if r % 2 == 0 else names[::-1]
        times = {}
        for name in order:
            times[name] = time_steps(contenders[name], batch_sets[name], r * steps, steps)
        rounds.append(times)
    return rounds


def run_phases(contenders, batch_sets, args):
    """Median seconds of every phase per contender, over ``args.steps`` steps of each."""
    out = {}
    for name, c in contenders.items():
        records = [c.phases(batch_sets[name][k % len(batch_sets[name])])
                   for k in range(args.steps)]
        out[name] = {phase: statistics.median(r[phase] for r in records) for phase in records[0]}
    return out


# ============================================================================ main modes
def compare(args):
    """Ours against PyTorch: agreement, then the timed rounds."""
    need = 2 * BYTES_PER_ELEMENT * args.rows * args.dim     # two tables, four moments
    if need > 0.9 * mem_available():
        raise SystemExit(f"bench_host_device: the two tables and their moments need "
                         f"{need / 2**30:.1f} GiB, more than 90% of MemAvailable; use fewer --rows")
    batches, weights = make_inputs(args)
    ours = Ours(args.rows, args.dim, args.seed, weights)
    theirs = Torch(ours.emb.embedding_table.data, weights)      # a copy of the same table
    contenders = {"ours": ours, "torch": theirs}
    agreement = check_agreement(ours, theirs, batches, args.check_steps)
    batch_sets = {name: [c.batch(b) for b in batches] for name, c in contenders.items()}
    rounds = run_rounds(contenders, batch_sets, args, args.steps)
    speedups = [r["torch"] / r["ours"] for r in rounds]
    figures = {"speedup": spread(speedups),
               "ours_ms": spread([r["ours"] * 1e3 for r in rounds]),
               "torch_ms": spread([r["torch"] * 1e3 for r in rounds]),
               "agreement": agreement,
               "distinct_ids_per_batch": statistics.median(np.unique(b).size for b in batches)}
    if args.phases:
        figures["phases_ms"] = {name: {k: v * 1e3 for k, v in p.items()}
                                for name, p in run_phases(contenders, batch_sets, args).items()}
    report_compare(args, figures, rounds)
    return figures


def report_compare(args, figures, rounds):
    n = args.batch * args.fields
    print(f"host sparse step: table {args.rows:,} x {args.dim} float32 "
          f"({args.rows * args.dim * 4 / 2**20:,.0f} MiB), batch {args.batch} x {args.fields} "
          f"= {n:,} ids (Zipf {args.zipf}, median {figures['distinct_ids_per_batch']:,.0f} "
          f"distinct), lazy Adam, {args.threads} thread(s) each")
    print(f"  C++ kernels: {kernels.HAVE_CPP};  torch {__import__('torch').__version__}")
    a = figures["agreement"]
    print(f"\nagreement after {a['steps']} steps from the same table ({a['touched_rows']:,} rows "
          f"touched): max |ours - PyTorch| / scale: table {a['max_rel_diff']['table']:.2e}, "
          f"moment1 {a['max_rel_diff']['moment1']:.2e}, moment2 {a['max_rel_diff']['moment2']:.2e}"
          f" (limit {AGREE_RTOL:g}); untouched rows unchanged: {a['untouched_rows_unchanged']}"
          f"  {'AGREE' if a['agree'] else 'DIFFER'}")
    print(f"\nrounds of {args.steps} steps (ms per step, order alternating):")
    for r, times in enumerate(rounds):
        print(f"  round {r + 1}: ours {times['ours'] * 1e3:7.2f}   PyTorch "
              f"{times['torch'] * 1e3:7.2f}   PyTorch / ours {times['torch'] / times['ours']:.2f}")
    if "phases_ms" in figures:
        print(f"\nphases (median ms over {args.steps} steps; 'rows alone' = our update's pass "
              "over the distinct rows, without the merge of duplicate ids):")
        for name, p in figures["phases_ms"].items():
            print(f"  {name:6s} " + "   ".join(f"{k} {v:6.2f}" for k, v in p.items()))
    ok = figures["speedup"]["median"] >= TARGET_SPEEDUP
    print("\nsummary: median  [min, max] over rounds  (timings are noisy on a shared machine: "
          "read the ratios)")
    print(f"  step time PyTorch / ours = {fmt(figures['speedup'])}  (target >= "
          f"{TARGET_SPEEDUP:g})  {'PASS' if ok else 'MISS'}")
    print(f"  ms per step: ours {fmt(figures['ours_ms'])}, PyTorch {fmt(figures['torch_ms'])}")


def gib(n):
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def mem_available(path="/proc/meminfo"):
    """MemAvailable in bytes."""
    with open(path) as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no MemAvailable line in {path}")


def step_working_bytes(batch, fields, dim):
    """A generous bound on one step's temporary memory: per id, its int64 id and a few copies
    of its row (looked-up rows, product, gradient, merged gradient), plus the merge's scratch
    (sort keys and positions, groups)."""
    n = batch * fields
    return n * (6 * 8 + 6 * 4 * dim)


def largest_rows(available, fraction, dim, reserved):
    """Rows of the largest ``dim``-wide table whose table and two moments fit, next to
    ``reserved`` bytes, in ``fraction`` of ``available`` bytes (0 if none does)."""
    budget = int(available * fraction) - reserved
    return max(0, budget // (BYTES_PER_ELEMENT * dim))


def largest(args):
    """Build the largest table that fits, train it and the reference table, report."""
    available = mem_available()
    working = step_working_bytes(args.batch, args.fields, args.dim)
    reference_bytes = BYTES_PER_ELEMENT * args.rows * args.dim
    rows = largest_rows(available, args.fraction, args.dim, reference_bytes + 2 * working)
    if rows < 1:
        raise SystemExit(f"bench_host_device: {args.fraction:g} of MemAvailable "
                         f"({available / 2**30:.2f} GiB) leaves no room next to the "
                         "reference table")
    ids, weights = make_inputs(args)
    big_ids, _ = make_inputs(args, rows)
    contenders = {}
    for name, n in (("reference", args.rows), ("largest", rows)):
        t0 = time.perf_counter()
        contenders[name] = Ours(n, args.dim, args.seed, weights)
        gc.collect()
        print(f"built {name} table {n:,} x {args.dim} in {time.perf_counter() - t0:.1f} s",
              flush=True)
    table = contenders["largest"].emb.embedding_table.data
    touched = np.unique(big_ids[0])            # the first step's rows, whatever the counts
    before = table[touched].copy()
    batch_sets = {"reference": [contenders["reference"].batch(b) for b in ids],
                  "largest": [contenders["largest"].batch(b) for b in big_ids]}
    rounds = run_rounds(contenders, batch_sets, args, 1)
    ratios = [r["largest"] / r["reference"] for r in rounds]
    after = table[touched]
    trained = bool(np.isfinite(after).all() and (after != before).any(axis=1).all())
    left = mem_available()
    figures = {"mem_available": available, "mem_available_after": left,
               "fraction": args.fraction, "rows": rows, "dim": args.dim,
               "table_bytes": rows * args.dim * 4,
               "with_moments_bytes": rows * args.dim * BYTES_PER_ELEMENT,
               "steps": args.warmup + args.repeats, "timed_steps": args.repeats,
               "time_ratio": spread(ratios), "trained": trained,
               "largest_ms": spread([r["largest"] * 1e3 for r in rounds]),
               "reference_ms": spread([r["reference"] * 1e3 for r in rounds])}
    print(f"\nlargest table: MemAvailable {available / 2**30:.2f} GiB x {args.fraction:g}, "
          f"minus the {args.rows:,}-row reference table and the steps' working set")
    print(f"  rows x dim = {rows:,} x {args.dim}; table {gib(figures['table_bytes'])}, table and "
          f"LazyAdam's two moments {gib(figures['with_moments_bytes'])}; MemAvailable left "
          f"{gib(left)}")
    print(f"  trained {args.warmup} + {args.repeats} timed steps, interleaved with the reference"
          f" table; rows finite and moved: {trained}")
    print(f"  step time largest / {args.rows:,}-row table = {fmt(figures['time_ratio'])}  "
          f"(ms per step: largest {fmt(figures['largest_ms'])}, "
          f"reference {fmt(figures['reference_ms'])})")
    return figures


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000, help="table rows (vocabulary)")
    parser.add_argument("--dim", type=int, default=16, help="table columns")
    parser.add_argument("--batch", type=int, default=4096, help="samples per batch")
    parser.add_argument("--fields", type=int, default=26, help="ids per sample")
    parser.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of the ids (> 1)")
    parser.add_argument("--batches", type=int, default=8, help="rotating set of batches")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed rounds (default 7; with --largest, the steps: 3)")
    parser.add_argument("--steps", type=int, default=10, help="steps per contender per round")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed steps per contender (default 3; with --largest, 1)")
    parser.add_argument("--check-steps", type=int, default=3,
                        help="steps of the agreement check")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for our kernels and PyTorch (default: one per core)")
    parser.add_argument("--phases", action="store_true", help="also time every phase")
    parser.add_argument("--largest", action="store_true",
                        help="train the largest table that fits in memory (a report)")
    parser.add_argument("--fraction", type=float, default=0.6,
                        help="with --largest: the share of MemAvailable to use")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 3 if args.largest else 7
    if args.warmup is None:
        args.warmup = 1 if args.largest else 3
    if args.threads is None:
        args.threads = default_threads()
    for name in ("rows", "dim", "batch", "fields", "batches", "repeats", "steps", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    if args.check_steps < 1 or args.check_steps > args.batches:
        parser.error("--check-steps must lie in [1, --batches]")
    if not args.zipf > 1:
        parser.error("--zipf must be > 1")
    if not 0 < args.fraction < 1:
        parser.error("--fraction must lie in (0, 1)")
    return args


def torch_missing():
    """Why the benchmark cannot run (a one-line reason), or None: it compares against PyTorch,
    an optional dependency (``pip install torch``, the CPU build is enough)."""
    try:
        found = importlib.util.find_spec("torch") is not None
    except ImportError:
        found = False
    if not found:
        return ("bench_host_device: skipped: it compares against PyTorch, which is not "
                "installed (pip install torch; the CPU build is enough)")
    return None


def main(argv=None):
    """Run the benchmark; without PyTorch print the one-line reason and return None."""
    args = parse_args(argv)
    reason = torch_missing()
    if reason is not None:
        print(reason, file=sys.stderr)
        return None
    import torch
    ms.set_seed(args.seed)
    torch_threads = torch.get_num_threads()
    set_threads(args.threads)
    try:
        figures = largest(args) if args.largest else compare(args)
    finally:                           # leave a calling process (a test) as it was
        if kernels.HAVE_CPP:
            kernels.native.set_sparse_threads(0)
        torch.set_num_threads(torch_threads)
    if args.json:
        config = {k: v for k, v in vars(args).items() if k != "json"}
        with open(args.json, "w") as out:
            json.dump({"config": config, "figures": figures}, out, indent=1)
    return figures


if __name__ == "__main__":
    main()
