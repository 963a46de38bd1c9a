"""SINGA's one global switch, ``autograd.training``, read by the layers and functions.

SINGA keeps a module-level ``training`` flag in ``singa.autograd``: scripts set it
(``autograd.training = True``) and ``Model.train()``/``eval()``/``compile`` set it too.
Dropout and batch normalisation follow it (random masks and batch statistics while it is
true). Here it lives where SINGA keeps it, as the plain attribute
``minitorch_dist.singa.autograd.training``; these two helpers read and write it for the
other facade modules. Like SINGA's, it starts False.

>>> from minitorch_dist.singa import autograd
>>> from minitorch_dist.singa import flags
>>> autograd.training = True
>>> flags.training()
True
>>> flags.set_training(False); autograd.training
False
"""
import sys

__all__ = ["training", "set_training"]


def _module():
    module = sys.modules.get("minitorch_dist.singa.autograd")
    if module is None:
        from . import autograd as module
    return module


def training():
    """The current value of ``autograd.training``."""
    return bool(getattr(_module(), "training", False))


def set_training(mode):
    """Set ``autograd.training`` (what ``Model.train``/``eval``/``compile`` do)."""
    _module().training = bool(mode)
