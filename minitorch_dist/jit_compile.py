"""``ms.jit``: MindSpore's compile decorator, here a marker of a function's plan.

Nothing is compiled: the function runs eagerly with the same results as without ``jit``.
What ``jit`` does here is what the user relies on: under ``SEMI_AUTO_PARALLEL`` or
``AUTO_PARALLEL`` a network function under ``jit`` runs operator-sharded, its plan made on
the first call and cached (``parallel/extension.py``), and a training step under ``jit`` runs
its inner network calls sharded. Both spellings work: ``@ms.jit``, ``@ms.jit(...)`` and
``ms.jit(fn, ...)``. The compiler options of MindSpore 2.x and of the older API are checked,
and each one set to other than its default is noted once (it changes nothing here);
``jit_config`` takes ``ms.JitConfig(...)``. ``input_signature`` acts: each call's inputs must
be Tensors of the signed shapes and dtypes (None or -1 for a free dimension), else TypeError.

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
    if not isinstance(compile_once, bool):
        raise ValueError(f"jit: compile_once must be True or False, got {compile_once!r}")
    if jit_config is not None and not isinstance(jit_config, JitConfig):
        raise TypeError(f"jit: jit_config must be a JitConfig, got {type(jit_config).__name__}")
    signature = _signature(input_signature)
    _note_compiler_options(dict(capture_mode=capture_mode, jit_level=jit_level, dynamic=dynamic,
                                fullgraph=fullgraph, backend=backend, mode=mode,
                                hash_args=hash_args, jit_config=jit_config,
                                compile_once=compile_once, **options))

    def decorate(target):
        if not callable(target):
            raise TypeError(f"jit: expected a function, got {type(target).__name__}")

        @functools.wraps(target)
        def compiled(*args):
            if signature is not None:
                _check_inputs(target, signature, args)
            return extension().call_function(target, args)

        compiled.jit_options = dict(capture_mode=capture_mode, jit_level=jit_level,
                                    backend=backend, **options)
        return compiled

    return decorate if function is None else decorate(function)


# The compiler settings and their defaults: they shape MindSpore's compilation only, so a
# set one is noted (eager execution gives the results MindSpore's compiled graph gives).
_COMPILER_DEFAULTS = dict(capture_mode="ast", jit_level="O0", dynamic=0, fullgraph=False,
                          backend="", mode="PSJit", hash_args=None, jit_config=None,
                          compile_once=False)


def _note_compiler_options(given):
    from .runtime import _once
    for name, value in given.items():
        if name not in _COMPILER_DEFAULTS or value != _COMPILER_DEFAULTS[name]:
            _once(f"jit.{name}", "jit(%s=...) is accepted and changes nothing: it steers "
                  "MindSpore's graph compiler, and here the function runs eagerly with the same "
                  "results", name)


def _signature(input_signature):
    """``input_signature``: a Tensor or a tuple/list of Tensors, as the expected inputs."""
    if input_signature is None:
        return None
    items = input_signature if isinstance(input_signature, (tuple, list)) else (input_signature,)
    for item in items:
        if not (hasattr(item, "shape") and hasattr(item, "dtype")):
            raise TypeError("jit: input_signature must be a Tensor or a tuple of Tensors giving "
                            f"the inputs' shapes and dtypes, got {type(item).__name__}")
    return tuple(items)


def _check_inputs(target, signature, args):
    """MindSpore's input_signature check: every input a Tensor of the signed shape and dtype
    (a dimension of None or -1 takes any size)."""
    name = getattr(target, "__name__", "function")
    if len(args) != len(signature):
        raise TypeError(f"jit({name}): input_signature has {len(signature)} inputs, the call "
                        f"gave {len(args)}")
    for i, (arg, sig) in enumerate(zip(args, signature)):
        shape, want = tuple(getattr(arg, "shape", ())), tuple(sig.shape)
        fits = len(shape) == len(want) and all(w in (None, -1) or w == s
                                                for s, w in zip(shape, want))
        if not hasattr(arg, "dtype") or not fits or arg.dtype != sig.dtype:
            got = (f"{type(arg).__name__} {shape} {getattr(arg, 'dtype', '')}").strip()
            raise TypeError(f"jit({name}): input {i} must be a Tensor of shape {list(want)} and "
                            f"dtype {sig.dtype} (input_signature), got {got}")
