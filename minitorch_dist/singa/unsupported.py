"""How the SINGA facade says "not here": one error type and a module ``__getattr__`` factory.

A SINGA name that the facade does not provide (``layer.CudnnRNN``, ``layer.MaxPool1d``, ...)
raises :class:`SingaNotSupported`, which names the SINGA call and says what to use instead.
It is both a ``NotImplementedError`` (what it means) and an ``AttributeError`` (what a missing
module attribute must raise, so ``hasattr(layer, "CudnnRNN")`` is simply False).

>>> from minitorch_dist.singa import layer
>>> hasattr(layer, "CudnnRNN")
False
>>> try:
...     layer.CudnnRNN
... except NotImplementedError as err:
...     print(str(err).split(";")[0])
singa layer.CudnnRNN is not supported by minitorch_dist.singa
"""

__all__ = ["SingaNotSupported", "SingaAssertionError", "not_supported", "module_getattr"]


class SingaNotSupported(NotImplementedError, AttributeError):
    """A SINGA API that minitorch_dist.singa does not translate."""


class SingaAssertionError(AssertionError, ValueError):
    """A precondition that SINGA asserts (so ``AssertionError``, as there), which is also
    the ``ValueError`` of bad input that the rest of minitorch_dist raises."""


def not_supported(call, hint=""):
    """The error for SINGA's ``call`` (e.g. ``"opt.Adam"``), with an optional hint."""
    message = f"singa {call} is not supported by minitorch_dist.singa"
    if hint:
        message += f"; {hint}"
    message += " (see docs/singa.md for what the facade maps)"
    return SingaNotSupported(message)


def module_getattr(module, unsupported, supported):
    """A module-level ``__getattr__``: SINGA names in ``unsupported`` (a dict name -> hint)
    raise :class:`SingaNotSupported`; any other unknown name is a plain AttributeError that
    lists what the module does provide."""

    def __getattr__(name):
        if name in unsupported:
            raise not_supported(f"{module}.{name}", unsupported[name])
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"module minitorch_dist.singa.{module} has no attribute {name!r}; "
                             f"it provides {sorted(supported)}")

    return __getattr__
