"""``mindspore.common.tensor``: ``Tensor`` (the same class as ``ms.Tensor``)."""
from ..tensor import Tensor  # noqa: F401

__all__ = ["Tensor"]
