"""Which samples a source yields in one epoch: shuffle, shard (MindSpore semantics), cap.

Sharding rule (the one MindSpore's distributed sampler uses): after the seeded shuffle,
which is identical on every shard, position ``i`` of the epoch order belongs to shard
``i % num_shards``. When the sample count ``n`` is not divisible by ``num_shards``, every
shard still yields ``ceil(n / num_shards)`` samples: the short shards wrap around to the
start of the order, so a few samples appear twice in the epoch (once on two shards).
Equal shard lengths keep data-parallel ranks in step (no rank waits for a missing batch).
"""
import math

import numpy as np

from .config import rng_for

SOURCE_SALT = 0   # shuffles done by sources; the n-th shuffle() of a pipeline uses n


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_shards(num_shards, shard_id):
    """Validate ``num_shards``/``shard_id`` and return ``(num_shards, shard_id)`` or None.

    >>> check_shards(4, 1)
    (4, 1)
    >>> check_shards(None, None) is None
    True
    """
    if num_shards is None and shard_id is None:
        return None
    if num_shards is None or shard_id is None:
        raise ValueError("num_shards and shard_id must be given together, got "
                         f"num_shards={num_shards!r}, shard_id={shard_id!r}")
    if not _is_int(num_shards) or num_shards < 1:
        raise ValueError(f"num_shards must be a positive integer, got {num_shards!r}")
    if not _is_int(shard_id) or not 0 <= shard_id < num_shards:
        raise ValueError(f"shard_id must be an integer in [0, num_shards - 1] = [0, {num_shards - 1}], "
                         f"got {shard_id!r}")
    return int(num_shards), int(shard_id)


def check_workers(num, what):
    """``num_parallel_workers``: None or a positive int. Rows are read in the calling thread
    (in the same order as MindSpore's ordered workers), so the value changes nothing else;
    more than one worker is noted once (MindSpore's worker count only tunes speed)."""
    if num is not None and (isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 1):
        raise ValueError(f"{what}: num_parallel_workers must be a positive int or None, got {num!r}")
    if num is not None and num > 1:
        from ..runtime import _once
        _once("dataset.num_parallel_workers", "%s: num_parallel_workers=%d is accepted and changes "
              "nothing: rows are produced in the calling thread, in MindSpore's order, so only the "
              "speed differs", what, int(num))


def check_num_samples(num_samples):
    """``None`` (all samples) or a positive int."""
    if num_samples is not None and (not _is_int(num_samples) or num_samples < 1):
        raise ValueError(f"num_samples must be a positive integer or None, got {num_samples!r}")
    return None if num_samples is None else int(num_samples)


def check_shuffle(shuffle):
    """``None`` means True (MindSpore's default for sources); otherwise a bool."""
    if shuffle is None:
        return True
    if not isinstance(shuffle, (bool, np.bool_)):
        raise ValueError(f"shuffle must be True, False or None, got {shuffle!r}")
    return bool(shuffle)


def shard_length(n, shards):
    """Samples a shard yields from ``n`` samples (all of them without sharding)."""
    return n if shards is None else math.ceil(n / shards[0])


def epoch_size(n, shards, num_samples):
    size = shard_length(n, shards)
    return size if num_samples is None else min(size, num_samples)


def sample_order(n, shuffle, shards, num_samples, key):
    """Indices (into ``0..n-1``) that one shard reads in the epoch identified by ``key``.

    >>> sample_order(5, False, (2, 1), None, (0,)).tolist()   # shard 1 of 2, padded
    [1, 3, 0]
    """
    order = rng_for(SOURCE_SALT, key).permutation(n) if shuffle else np.arange(n)
    if shards is not None and n > 0:
        num_shards, shard_id = shards
        positions = shard_id + num_shards * np.arange(shard_length(n, shards))
        order = order[positions % n]      # the modulo wraps short shards to the start
    if num_samples is not None:
        order = order[:num_samples]
    return order


def shard_stream(items, shards):
    """Shard a stream of unknown length with the same rule as :func:`sample_order`.

    Keeps the first ``num_shards`` items so a short shard can wrap around at the end.

    >>> list(shard_stream(iter("abcde"), (2, 1)))
    ['b', 'd', 'a']
    """
    num_shards, shard_id = shards
    head = []
    count = 0
    yielded = 0
    for count, item in enumerate(items, start=1):
        if len(head) < num_shards:
            head.append(item)
        if (count - 1) % num_shards == shard_id:
            yielded += 1
            yield item
    if count and yielded < math.ceil(count / num_shards):
        yield head[(shard_id + yielded * num_shards) % count]
