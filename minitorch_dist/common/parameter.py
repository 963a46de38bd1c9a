"""``mindspore.common.parameter``: ``Parameter`` and ``ParameterTuple`` (the same classes as
``ms.Parameter``)."""
from ..nn.parameter import Parameter, ParameterTuple  # noqa: F401

__all__ = ["Parameter", "ParameterTuple"]
