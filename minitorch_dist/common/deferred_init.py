"""Parameters whose values are drawn only when their slice is known (``no_init_parameters``).

Inside ``nn.utils.no_init_parameters()`` a random ``initializer(...)`` returns a tensor with
the full shape and no memory (a zero-stride view of one zero) that remembers how to draw its
values: the initializer and the state of the random stream at that point. The stream is
advanced as if the values had been drawn, so everything made afterwards gets the numbers it
would get in one process. ``DeferredInit.draw(index)`` later draws the block ``index`` (a
tuple of slices) of exactly the full tensor one process would have drawn, row chunk by row
chunk, never holding the whole tensor.

>>> import numpy as np
>>> import minitorch_dist as ms
>>> from minitorch_dist.common.initializer import initializer
>>> from minitorch_dist.nn.utils import no_init_parameters
>>> ms.set_seed(3); full = initializer("normal", [6, 4]).asnumpy()
>>> ms.set_seed(3)
>>> with no_init_parameters():
...     lazy = initializer("normal", [6, 4])
>>> lazy.data.strides, np.array_equal(lazy.deferred_init.draw((slice(2, 4), slice(1, 3))), full[2:4, 1:3])
((0, 0), True)
"""
import copy

import numpy as np

from ..random import rng
from ..thread_state import ThreadState

__all__ = ["DeferredInit", "deferring", "defer_scope", "draw_source"]

_state = ThreadState(depth=0, source=None)
_CHUNK_BYTES = 8 << 20


def deferring():
    """True inside ``no_init_parameters`` on this thread."""
    return _state.depth > 0


class defer_scope:
    """The body of ``nn.utils.no_init_parameters``."""

    def __enter__(self):
        _state.depth += 1
        return self

    def __exit__(self, *exc):
        _state.depth -= 1
        return False


def draw_source():
    """The generator initializers draw from: the framework's, or a slicing one while a
    deferred tensor is being drawn or skipped."""
    return _state.source if _state.source is not None else rng()


class _Slicing:
    """A stand-in generator that draws full-size requests row chunk by row chunk from
    ``generator`` and keeps only the block ``index`` (None keeps nothing: a skip)."""

    def __init__(self, generator, index):
        self.generator = generator
        self.index = index

    def normal(self, loc=0.0, scale=1.0, size=None):
        return self._draw(lambda n: self.generator.normal(loc, scale, size=n), size)

    def uniform(self, low=0.0, high=1.0, size=None):
        return self._draw(lambda n: self.generator.uniform(low, high, size=n), size)

    def _draw(self, sample, size):
        shape = (size,) if isinstance(size, int) else tuple(size)
        if not shape:
            value = sample(())
            return np.zeros(()) if self.index is None else np.asarray(value)
        rest = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        step = max(1, _CHUNK_BYTES // (8 * max(rest, 1)))
        rows = self.index[0] if self.index is not None else None
        kept = []
        for start in range(0, shape[0], step):
            chunk = sample((min(step, shape[0] - start),) + shape[1:])
            if rows is None:
                continue
            lo, hi = max(rows.start, start), min(rows.stop, start + len(chunk))
            if lo < hi:
                kept.append(chunk[(slice(lo - start, hi - start),) + tuple(self.index[1:])])
        if rows is None:
            return np.broadcast_to(np.zeros(()), shape)
        if kept:
            return np.concatenate(kept)
        return np.zeros((0,) + shape[1:])[(slice(None),) + tuple(self.index[1:])]


class DeferredInit:
    """How to draw a deferred tensor (see the module docstring)."""

    def __init__(self, init, shape, dtype):
        self.init = init
        self.shape = tuple(shape)
        self.dtype = dtype
        self.state = copy.deepcopy(rng().bit_generator.state)
        self.in_order = getattr(init, "draws_in_order", True)
        # advance the stream past this tensor's values (an initializer whose later draws
        # depend on earlier values, TruncatedNormal's redraws, must really draw them)
        self._sample(None if self.in_order else self._whole())

    def _whole(self):
        return tuple(slice(0, n) for n in self.shape)

    def _sample(self, index, generator=None):
        previous = _state.source
        generator = generator if generator is not None else rng()
        # an initializer whose draws are not in order (redraws) draws whole, from the stream
        _state.source = _Slicing(generator, index) if self.in_order else generator
        try:
            return self.init.sample(self.shape)
        finally:
            _state.source = previous

    def draw(self, index=None):
        """The block ``index`` (tuple of slices; None: all) of the full tensor, as ``dtype``."""
        index = self._whole() if index is None else tuple(index)
        generator = np.random.Generator(type(rng().bit_generator)())
        generator.bit_generator.state = copy.deepcopy(self.state)
        if self.in_order:
            values = self._sample(index, generator)
        else:
            values = self._sample(self._whole(), generator)[index]
        return np.ascontiguousarray(values).astype(self.dtype)

    # ---- sharing the stream between ranks ----------------------------------------------
    def stream_words(self):
        """The stream state as 6 uint64 words (PCG64: state, increment, buffered word)."""
        s = self.state
        words = [s["state"]["state"], s["state"]["inc"]]
        out = []
        for value in words:
            out += [value >> 64, value & ((1 << 64) - 1)]
        out += [int(s.get("has_uint32", 0)), int(s.get("uinteger", 0))]
        return np.array(out, dtype=np.uint64)

    def set_stream_words(self, words):
        w = [int(v) for v in words]
        state = copy.deepcopy(self.state)
        state["state"]["state"] = (w[0] << 64) | w[1]
        state["state"]["inc"] = (w[2] << 64) | w[3]
        state["has_uint32"], state["uinteger"] = w[4], w[5]
        self.state = state
