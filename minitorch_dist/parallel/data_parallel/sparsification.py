"""Sparse gradient exchange: send only the largest entries, keep the rest for later.

Per flat buffer ``acc`` (the gradients of one bucket, plus their residuals when error
feedback is on):

* **top-K** (``topK=True``): ``spars`` is a fraction in (0, 1]; the ``k = max(1, round(spars*n))``
  entries with the largest ``|acc|`` are sent. SINGA compared ``int(|x|)``, so every entry
  below 1 tied at 0 and "top-K" became "the first K"; here magnitudes are compared as floats.
* **threshold** (``topK=False``): ``spars`` is an absolute magnitude; entries with
  ``|acc| >= spars`` are sent, at most ``cap`` of them (the largest), so the message is
  bounded. SINGA had no cap and overflowed its send buffer.

Each rank sends ``(indices, values)``: ``allgatherv`` exchanges the counts first and sizes
the receive buffers from them, then the payloads; indices travel as int32 (int64 only
for buffers of 2**31 entries or more), never bit-cast into floats as SINGA did. The sum is a
scatter-add into a dense zero buffer (duplicates across ranks add up).

Error feedback (``corr=True``): what is not sent stays in a per-parameter residual and is
added to the next step's gradient, so nothing is lost, only delayed (Strom 2015; Aji &
Heafield 2017). The split is exact: ``sent + residual == gradient + previous residual``.

>>> import numpy as np
>>> select_topk(np, np.array([0.1, -0.7, 0.3, 0.05]), 2).tolist()
[1, 2]
>>> select_threshold(np, np.array([0.1, -0.7, 0.3, 0.05]), 0.2, cap=1).tolist()
[1]
"""
import math

import numpy as np

from ... import kernels

__all__ = ["check_spars", "topk_count", "select_topk", "select_threshold", "index_dtype",
           "sparse_allreduce", "ErrorFeedback"]


def check_spars(spars, topK, owner="DistOpt.backward_and_sparse_update"):
    """``spars`` as a float, or ValueError naming the value and the allowed range."""
    if isinstance(spars, bool) or not isinstance(spars, (int, float, np.integer, np.floating)):
        raise ValueError(f"{owner}: spars must be a number, got {spars!r}")
    spars = float(spars)
    if topK and not 0.0 < spars <= 1.0:
        raise ValueError(f"{owner}: spars={spars!r} is out of range for topK=True; expected a "
                         "fraction with 0 < spars <= 1")
    if not topK and not (spars > 0.0 and math.isfinite(spars)):
        raise ValueError(f"{owner}: spars={spars!r} is out of range for topK=False; expected a "
                         "finite magnitude threshold spars > 0")
    return spars


def topk_count(spars, n):
    """How many of ``n`` entries top-K sends: ``max(1, round(spars * n))`` (0 when n is 0)."""
    return 0 if n == 0 else min(n, max(1, int(round(spars * n))))


def select_topk(xp, flat, k):
    """Ascending indices of the ``k`` entries of 1-D ``flat`` with the largest ``|value|``."""
    if xp is np:
        return kernels.topk_abs(flat, k)
    n = flat.size
    if k >= n:
        return xp.arange(n, dtype=xp.int64)
    chosen = xp.argpartition(xp.abs(flat), n - k)[n - k:]
    return xp.sort(chosen).astype(xp.int64, copy=False)


def select_threshold(xp, flat, thr, cap):
    """Ascending indices where ``|flat| >= thr``; if more than ``cap`` pass, the ``cap`` largest."""
    chosen = kernels.threshold_abs(flat, thr) if xp is np else \
        xp.flatnonzero(xp.abs(flat) >= thr).astype(xp.int64, copy=False)
    if chosen.size > cap:   # all of the cap largest pass the threshold, since more than cap do
        chosen = select_topk(xp, flat, cap)
    return chosen


def index_dtype(n):
    """int32 indices for buffers below 2**31 entries, else int64."""
    return np.int32 if n < 2 ** 31 else np.int64


def sparse_allreduce(comm, xp, indices, values, out):
    """Sum every rank's ``(indices, values)`` into ``out`` (zeroed first); returns the counts."""
    all_indices, counts = comm.allgatherv(indices)
    all_values, _ = comm.allgatherv(values)
    out[...] = 0
    if xp is np:
        kernels.scatter_add_rows(out, all_indices, all_values)
    else:
        xp.add.at(out, all_indices, all_values)
    return counts


class ErrorFeedback:
    """Per-parameter residuals: what top-K/threshold selection did not send yet.

    Keyed by the parameter's position in ``optimizer.parameters``, not by bucket, so they
    survive a change of bucket layout (a different ``threshold``) and a switch between
    ``corr=False`` and ``corr=True`` (SINGA crashed on the latter).
    """

    def __init__(self, params):
        self._params = params
        self._residuals = [None] * len(params)

    def residual(self, pos):
        """The residual array of parameter ``pos`` (zeros the first time)."""
        r = self._residuals[pos]
        if r is None:
            p = self._params[pos]
            r = self._residuals[pos] = p.device.xp.zeros(p.shape, p.dtype)
        return r

    def peek(self, pos):
        """The residual of parameter ``pos``, or None before its first sparse step."""
        return self._residuals[pos]

    def add_into(self, bucket, flat):
        """``flat += residual`` for every member of ``bucket`` (flat holds the packed gradients)."""
        for pos, start, stop in bucket.slices():
            flat[start:stop] += self.residual(pos).reshape(-1)

    def keep(self, bucket, flat):
        """Store what is left of ``flat`` (sent entries already zeroed) as the residuals."""
        for pos, start, stop in bucket.slices():
            r = self.residual(pos)
            r[...] = flat[start:stop].reshape(r.shape)

    def reset(self):
        self._residuals = [None] * len(self._params)
