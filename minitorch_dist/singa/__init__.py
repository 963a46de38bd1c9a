"""A SINGA-style facade: run Apache SINGA 3.x training scripts on minitorch_dist.

Change only the imports of a script written for SINGA::

    from singa import autograd, device, tensor, layer, model, opt      # SINGA
    from minitorch_dist.singa import autograd, device, tensor, layer, model, opt
    from singa import singa_wrap as singa                     # SINGA (for NcclIdHolder)
    import minitorch_dist.singa as singa                      # here (or singa_wrap, as SINGA)

Each module is a thin, documented mapping onto the core: a SINGA ``Tensor`` is a
minitorch_dist ``Tensor``, layers are ``Cell``\\s whose parameters are created at their first
call, ``model.Model`` runs ``train_one_batch`` in training mode and ``forward`` otherwise,
and ``opt.SGD``/``opt.DistOpt`` are the core optimizer and ``DistOpt``. There is no second
autograd and no second optimizer. ``docs/singa.md`` has the full mapping and what is not
supported; an unsupported SINGA name raises an error that names it.

>>> import minitorch_dist.singa as singa
>>> from minitorch_dist.singa import device, tensor, layer, model, opt
>>> isinstance(singa.NcclIdHolder(), singa.NcclIdHolder)
True
"""
from . import device, tensor, autograd, layer, model, opt, singa_wrap, initializer
from .singa_wrap import NcclIdHolder
from .unsupported import SingaNotSupported


def __getattr__(name):
    # sonnx needs the optional onnx package: imported on first use, as `from ... import sonnx`
    if name == "sonnx":
        import importlib
        return importlib.import_module(__name__ + ".sonnx")
    raise AttributeError(f"module minitorch_dist.singa has no attribute {name!r}")

__all__ = ["device", "tensor", "autograd", "layer", "model", "opt", "singa_wrap", "initializer",
           "sonnx",
           "NcclIdHolder", "SingaNotSupported"]
