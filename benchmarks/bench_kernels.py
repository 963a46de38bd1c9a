"""Times the C++ host kernels against their NumPy twins, side by side.

    python benchmarks/bench_kernels.py            # all cases
    python benchmarks/bench_kernels.py --quick    # fewer repeats

Shapes follow the hot paths they serve: im2col/col2im of the LeNet-style CNN training step
(batch 64: 1x28x28 -> conv 20@5x5, 20x12x12 -> conv 50@5x5), embedding lookups and their
sparse gradients, and the data-parallel compressors (top-k, fp16) on a 1M-value gradient.
Each case cycles through a few different inputs (never one fixed batch) and reports the
median time per call; "speed-up" is NumPy time / C++ time.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minitorch_dist.kernels import native, reference  # noqa: E402


def median_ms(fn, inputs, repeats):
    """Median wall time of fn(*args) in ms, cycling through the argument tuples in inputs."""
    for args in inputs:  # warm up: first-touch page faults, caches
        fn(*args)
    times = []
    for r in range(repeats):
        args = inputs[r % len(inputs)]
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def cases(rng):
    """(name, cpp callable, numpy callable, list of argument tuples)."""
    def images(shape):
        return [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]

    for shape in [(64, 1, 28, 28), (64, 20, 12, 12)]:
        n, c, h, w = shape
        xs = images(shape)
        out = np.empty((n * (h - 4) * (w - 4), c * 25), np.float32)
        yield (f"im2col {shape} k=5 (out=)", lambda x: native.im2col(x, 5, 5, out=out),
               lambda x: reference.im2col(x, 5, 5, out=out), [(x,) for x in xs])
        grads = [rng.standard_normal(out.shape).astype(np.float32) for _ in range(3)]
        dx = np.empty(shape, np.float32)
        yield (f"col2im {shape} k=5 (out=)", lambda g: native.col2im(g, shape, 5, 5, out=dx),
               lambda g: reference.col2im(g, shape, 5, 5, out=dx), [(g,) for g in grads])

    table = rng.standard_normal((100_000, 64)).astype(np.float32)
    ids = [rng.integers(0, 100_000, (64, 20)) for _ in range(3)]
    yield ("embedding_gather 100000x64, 64x20 ids", lambda i: native.embedding_gather(table, i),
           lambda i: reference.embedding_gather(table, i), [(i,) for i in ids])
    rows = [(i.reshape(-1) % 5000, rng.standard_normal((1280, 64)).astype(np.float32)) for i in ids]
    yield ("scatter_add_rows 1280 rows (dups)", lambda i, v: native.scatter_add_rows(table, i, v),
           lambda i, v: reference.scatter_add_rows(table, i, v), rows)
    yield ("unique_merge 1280 rows (dups)", native.unique_merge, reference.unique_merge, rows)
    m, v = np.full_like(table, 0.0), np.full_like(table, 0.0)  # written: no first-touch faults
    yield ("lazy_adam 1280 rows (dups)",
           lambda i, g: native.lazy_adam(table, m, v, i, g, 1e-3, 0.9, 0.999, 1e-8, 1),
           lambda i, g: reference.lazy_adam(table, m, v, i, g, 1e-3, 0.9, 0.999, 1e-8, 1), rows)

    flats = [rng.standard_normal(1_000_000).astype(np.float32) for _ in range(3)]
    yield ("topk_abs 1M, k=1%", lambda f: native.topk_abs(f, 10_000),
           lambda f: reference.topk_abs(f, 10_000), [(f,) for f in flats])
    yield ("threshold_abs 1M, thr=3", lambda f: native.threshold_abs(f, 3.0),
           lambda f: reference.threshold_abs(f, 3.0), [(f,) for f in flats])
    packed = np.empty(1_000_000, np.float16)
    yield ("fp16_pack 1M (out=)", lambda f: native.fp16_pack(f, 0.25, out=packed),
           lambda f: reference.fp16_pack(f, 0.25, out=packed), [(f,) for f in flats])
    halves = [f.astype(np.float16) for f in flats]
    unpacked = np.empty(1_000_000, np.float32)
    yield ("fp16_unpack 1M (out=)", lambda h: native.fp16_unpack(h, 0.25, out=unpacked),
           lambda h: reference.fp16_unpack(h, 0.25, out=unpacked), [(h,) for h in halves])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    if native._C is None:
        sys.exit(f"the C++ extension is not built ({native.IMPORT_ERROR}); run "
                 "`python setup.py build_ext --inplace` first")
    repeats = 15 if args.quick else 60
    print(f"{'kernel':42s} {'C++ ms':>9s} {'NumPy ms':>9s} {'speed-up':>9s}")
    for name, cpp_fn, numpy_fn, inputs in cases(np.random.default_rng(0)):
        t_cpp = median_ms(cpp_fn, inputs, repeats)
        t_np = median_ms(numpy_fn, inputs, repeats)
        print(f"{name:42s} {t_cpp:9.3f} {t_np:9.3f} {t_np / t_cpp:8.1f}x")


if __name__ == "__main__":
    main()
