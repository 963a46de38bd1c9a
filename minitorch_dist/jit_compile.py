"""``ms.jit``: MindSpore's compile decorator, here a marker of a function's plan.

Nothing is compiled: the function runs eagerly with the same results as without ``jit``.
What ``jit`` does here is what the user relies on: under ``SEMI_AUTO_PARALLEL`` or
``AUTO_PARALLEL`` a network function under ``jit`` runs operator-sharded, its plan made on
the first call and cached (``parallel/extension.py``), and a training step under ``jit`` runs
its inner network calls sharded. Both spellings work: ``@ms.jit``, ``@ms.jit(...)`` and
``ms.jit(fn, ...)``. The options of MindSpore 2.x and of the older API are checked and
accepted; ``jit_config`` takes ``ms.JitConfig(...)``.

>>> import minitorch_dist as ms
>>> @ms.jit
... def double(x):
...     return x * 2
>>> double(ms.Tensor([1.0, 2.0])).asnumpy().tolist()
[2.0, 4.0]
>>> ms.jit(lambda x: x + 1, capture_mode="bytecode")(ms.Tensor([1.0])).asnumpy().tolist()
[2.0]
"""
import functools

from .extension import extension

__all__ = ["jit", "JitConfig"]

_CAPTURE_MODES = ("ast", "bytecode", "trace")
_JIT_LEVELS = ("O0", "O1", "O2")
_BACKENDS = ("", "ms_backend", "GE")
_MODES = ("PSJit", "PIJit")


class JitConfig:
    """MindSpore's ``JitConfig(jit_level="O0", exc_mode="auto", jit_syntax_level="", debug_level="RELEASE", infer_boost="off", **kwargs)``:
    recorded, with ``jit_level`` checked; execution is eager whatever it says."""

    def __init__(self, jit_level="O0", exc_mode="auto", jit_syntax_level="", debug_level="RELEASE",
                 infer_boost="off", **kwargs):
        _choice("JitConfig", "jit_level", jit_level, _JIT_LEVELS)
        self.jit_config_dict = dict(jit_level=jit_level, exc_mode=exc_mode,
                                    jit_syntax_level=jit_syntax_level, debug_level=debug_level,
                                    infer_boost=infer_boost, **kwargs)


def _choice(owner, name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{owner}: {name} must be one of {list(allowed)}, got {value!r}")


def jit(function=None, *, capture_mode="ast", jit_level="O0", dynamic=0, fullgraph=False,
        backend="", mode="PSJit", input_signature=None, hash_args=None, jit_config=None,
        compile_once=False, fn=None, **options):
    """Mark ``function`` for compilation (see the module docstring); returns the wrapper."""
    function = fn if function is None else function
    _choice("jit", "capture_mode", capture_mode, _CAPTURE_MODES)
    _choice("jit", "jit_level", jit_level, _JIT_LEVELS)
    _choice("jit", "backend", backend, _BACKENDS)
    _choice("jit", "mode", mode, _MODES)
    if dynamic not in (0, 1) or isinstance(dynamic, bool):
        raise ValueError(f"jit: dynamic must be 0 or 1, got {dynamic!r}")
    if not isinstance(fullgraph, bool):
        raise ValueError(f"jit: fullgraph must be True or False, got {fullgraph!r}")
    if jit_config is not None and not isinstance(jit_config, JitConfig):
        raise TypeError(f"jit: jit_config must be a JitConfig, got {type(jit_config).__name__}")

    def decorate(target):
        if not callable(target):
            raise TypeError(f"jit: expected a function, got {type(target).__name__}")

        @functools.wraps(target)
        def compiled(*args):
            return extension().call_function(target, args)

        compiled.jit_options = dict(capture_mode=capture_mode, jit_level=jit_level,
                                    backend=backend, **options)
        return compiled

    return decorate if function is None else decorate(function)
