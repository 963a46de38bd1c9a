"""The one error type of the sharding rules."""

__all__ = ["ShardingError"]


class ShardingError(ValueError):
    """A strategy (or a call) that a sharded primitive cannot run with.

    The message starts with the primitive instance's name and says what was expected, e.g.
    ``MatMul-op3: strategies of relevant dimensions are not equal: ...``. It is a
    ``ValueError``, so code that tries candidate strategies can catch either.
    """
