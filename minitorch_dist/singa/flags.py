"""SINGA's one global switch, ``autograd.training``, read by the layers and functions.

SINGA keeps a module-level ``training`` flag in ``singa.autograd``: scripts set it
(``autograd.training = True``) and ``Model.train()``/``eval()``/``compile`` set it too.
Dropout and batch normalisation follow it (random masks and batch statistics while it is
true). Here it lives where SINGA keeps it, as the plain attribute
``minitorch_dist.singa.autograd.training``; these two helpers read and write it for the
other facade modules. ``autograd`` hands itself over with ``keep_in`` when it is imported,
so this module imports none of the facade (``autograd`` imports the functions that read
the flag). Like SINGA's, it starts False.

>>> from minitorch_dist.singa import autograd
>>> from minitorch_dist.singa import flags
>>> autograd.training = True
>>> flags.training()
True
>>> flags.set_training(False); autograd.training
False
"""
import types

__all__ = ["training", "set_training", "keep_in"]

# the object whose ``training`` attribute is the flag: ``singa.autograd`` once imported
_holder = [types.SimpleNamespace(training=False)]


def keep_in(module):
    """Keep the flag as ``module.training`` from now on (``singa.autograd`` calls this)."""
    module.training = bool(getattr(_holder[0], "training", False))
    _holder[0] = module


def training():
    """The current value of ``autograd.training``."""
    return bool(getattr(_holder[0], "training", False))


def set_training(mode):
    """Set ``autograd.training`` (what ``Model.train``/``eval``/``compile`` do)."""
    _holder[0].training = bool(mode)
