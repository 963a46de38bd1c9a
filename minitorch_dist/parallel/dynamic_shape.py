"""Dynamic input shapes: MindSpore's ``Symbol``, input placeholders and ``Cell.set_inputs``.

``net.set_inputs(*placeholders)`` declares the shapes ``net`` takes: each placeholder is a
``Tensor(shape=[None, 784], dtype=...)`` (or ``input_placeholder(shape, dtype)``, or a real
Tensor for a fixed shape) whose dimensions are ints (fixed), ``None`` or -1 (any size) or a
``Symbol`` (a size with constraints: ``min``/``max``, ``divisor``/``remainder``, and
``unique=True`` for "every dimension using this symbol has one size").

Eager execution runs any shape, so the declaration is a contract checked on every call of
``net`` made from outside a network (as MindSpore compiles the outermost cell with it): a
call whose inputs break it raises ``ValueError`` naming the input, the dimension, the size
and the rule. Calls from inside another cell (``Model``'s training network calling ``net``
and its loss) run unchecked, as they do in MindSpore.

Sharded networks re-plan when the shapes change (``ShardedCall`` keeps one plan per input
shape); a network that declared dynamic inputs also has its ranks agree on the shapes of
every call (``sharding/input_agreement.py``), so one rank's smaller last batch is an error
on every rank instead of two different plans.
"""
import sys
import weakref

import numpy as np

__all__ = ["Symbol", "InputPlaceholder", "input_placeholder", "declare_inputs",
           "declared_inputs", "check_inputs", "has_dynamic_inputs", "declarations_version"]


def _int(owner, what, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{owner}: {what} must be an int, got {value!r}")
    return int(value)


class Symbol:
    """The symbolic size of a dimension (MindSpore's ``Symbol``): at least ``min``, at most
    ``max`` when ``max > min``, of the form ``divisor * N + remainder`` (N >= 1); with
    ``unique=True`` every dimension declared with this object has the same size."""

    def __init__(self, max=0, min=1, divisor=1, remainder=0, unique=False, **kwargs):
        if kwargs:
            raise TypeError(f"Symbol() got unexpected keyword arguments {sorted(kwargs)}")
        self.max = _int("Symbol", "max", max)
        self.min = _int("Symbol", "min", min)
        self.divisor = _int("Symbol", "divisor", divisor)
        self.remainder = _int("Symbol", "remainder", remainder)
        if not isinstance(unique, bool):
            raise TypeError(f"Symbol: unique must be True or False, got {unique!r}")
        self.unique = unique
        if self.min < 1:
            raise ValueError(f"Symbol: min must be positive, got {self.min}")
        if self.divisor < 1:
            raise ValueError(f"Symbol: divisor must be positive, got {self.divisor}")
        if not 0 <= self.remainder < self.divisor:
            raise ValueError(f"Symbol: remainder must be in [0, divisor={self.divisor}), got "
                             f"{self.remainder}")

    def problem(self, size):
        """Why ``size`` breaks this symbol, or None when it fits."""
        if size < self.min:
            return f"is below the symbol's min={self.min}"
        if self.max > self.min and size > self.max:
            return f"is above the symbol's max={self.max}"
        if size % self.divisor != self.remainder or size < self.divisor + self.remainder:
            return (f"is not of the form {self.divisor} * N + {self.remainder} (N >= 1) the "
                    "symbol asks for")
        return None

    def __repr__(self):
        return (f"Symbol(max={self.max}, min={self.min}, divisor={self.divisor}, "
                f"remainder={self.remainder}, unique={self.unique})")


class InputPlaceholder:
    """A declared input: ``shape`` (ints, None for any size, or Symbols) and ``dtype``."""

    def __init__(self, shape, dtype=None):
        self.shape = _declared_shape(shape, "input_placeholder")
        self.dtype = dtype

    def __repr__(self):
        return f"InputPlaceholder(shape={list(self.shape)}, dtype={self.dtype})"


def input_placeholder(shape, dtype=None):
    """A placeholder for ``set_inputs`` (what ``Tensor(shape=..., dtype=...)`` declares)."""
    return InputPlaceholder(shape, dtype)


def _declared_shape(shape, owner):
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"{owner}: shape must be a list or tuple of ints, None or Symbols, got "
                        f"{type(shape).__name__}")
    dims = []
    for i, dim in enumerate(shape):
        if dim is None or isinstance(dim, Symbol):
            dims.append(dim)
        elif isinstance(dim, (int, np.integer)) and not isinstance(dim, bool) and dim >= -1:
            dims.append(None if dim == -1 else int(dim))
        else:
            raise ValueError(f"{owner}: dimension {i} of shape {list(shape)} must be an int >= 0, "
                             f"None or -1 (any size) or a Symbol, got {dim!r}")
    return tuple(dims)


def _declaration(value, index):
    """``(shape, dtype)`` declared by one ``set_inputs`` argument, or None for a non-tensor
    argument (declared by value: not checked)."""
    if isinstance(value, InputPlaceholder):
        return value.shape, value.dtype
    shape = getattr(value, "declared_shape", None)      # Tensor(shape=...) placeholders
    if shape is None:
        shape = getattr(value, "shape", None)
    if shape is None:
        return None
    return _declared_shape(tuple(shape), f"set_inputs: input {index}"), \
        getattr(value, "dtype", None)


# ---- declaring and checking ----------------------------------------------------------------
_declared = weakref.WeakKeyDictionary()      # cell -> tuple of declarations (None: not a tensor)
_checked_classes = {}                         # a Cell class -> its checking subclass
_version = [0]                                # bumped by every declaration


def declare_inputs(cell, inputs, kwargs=None):
    """``cell.set_inputs(*inputs)``: record the declarations; later outermost calls of
    ``cell`` are checked (module docstring)."""
    if kwargs:
        raise TypeError(f"set_inputs takes the placeholders positionally, got keyword arguments "
                        f"{sorted(kwargs)}")
    if not inputs:
        raise ValueError("set_inputs needs at least one input placeholder, e.g. "
                         "Tensor(shape=[None, 784], dtype=ms.float32)")
    _declared[cell] = tuple(_declaration(value, i) for i, value in enumerate(inputs))
    _version[0] += 1
    cls = type(cell)
    if cls not in _checked_classes.values():
        checked = _checked_classes.get(cls)
        if checked is None:
            checked = _checked_classes[cls] = type(cls.__name__, (cls,), {
                "__call__": _checking_call, "__module__": cls.__module__,
                "__qualname__": cls.__qualname__, "__doc__": cls.__doc__})
        object.__setattr__(cell, "__class__", checked)


def declared_inputs(cell):
    """The declarations ``set_inputs`` recorded for ``cell``, or None."""
    try:
        return _declared.get(cell)
    except TypeError:           # not weakly referable: never declared
        return None


def declarations_version():
    """A number that changes whenever a cell declares its inputs (callers cache on it)."""
    return _version[0]


def has_dynamic_inputs(cell):
    """True when ``cell`` or a cell inside it declared inputs with a dynamic dimension."""
    cells = cell.cells_and_names() if hasattr(cell, "cells_and_names") else [("", cell)]
    for _, sub in cells:
        for decl in declared_inputs(sub) or ():
            if decl is not None and any(not isinstance(d, int) for d in decl[0]):
                return True
    return False


def _checking_call(self, *args, **kwargs):
    if not _called_from_a_cell():
        check_inputs(self, args)
    return super(type(self), self).__call__(*args, **kwargs)


def _cell_call_codes():
    from ..nn.cell import Cell
    return {Cell.__call__.__code__, Cell._call_unhooked.__code__, _checking_call.__code__}


def _called_from_a_cell():
    """True when a cell call is already under way on this thread (the frames above)."""
    codes = _cell_call_codes()
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def _dtype_name(dtype):
    return str(getattr(dtype, "name", dtype))


def check_inputs(cell, args):
    """Raise ``ValueError`` when ``args`` break ``cell``'s declarations."""
    declarations = declared_inputs(cell)
    if declarations is None:
        return
    name = type(cell).__name__
    if len(args) != len(declarations):
        raise ValueError(f"{name}: set_inputs declared {len(declarations)} input(s), but the "
                         f"call passes {len(args)}")
    sizes = {}
    for index, (value, decl) in enumerate(zip(args, declarations)):
        if decl is None:
            continue
        shape = getattr(value, "shape", None)
        if shape is None:
            raise ValueError(f"{name}: input {index} was declared a tensor of shape "
                             f"{list(decl[0])} by set_inputs, got a {type(value).__name__}")
        _check_shape(name, index, tuple(shape), decl[0], sizes)
        if decl[1] is not None and hasattr(value, "dtype") \
                and _dtype_name(value.dtype) != _dtype_name(decl[1]):
            raise ValueError(f"{name}: input {index} has dtype {_dtype_name(value.dtype)}, but "
                             f"set_inputs declared {_dtype_name(decl[1])}")


def _check_shape(name, index, shape, declared, sizes):
    where = f"{name}: input {index} of shape {shape}"
    if len(shape) != len(declared):
        raise ValueError(f"{where} has {len(shape)} dimension(s), but set_inputs declared "
                         f"{len(declared)} ({list(declared)})")
    for dim, (size, want) in enumerate(zip(shape, declared)):
        if want is None:
            continue
        if isinstance(want, int):
            if size != want:
                raise ValueError(f"{where}: dimension {dim} is {size}, but set_inputs declared "
                                 f"it fixed at {want} (use None or a Symbol for a dynamic one)")
            continue
        problem = want.problem(size)
        if problem:
            raise ValueError(f"{where}: dimension {dim} is {size}, which {problem} ({want})")
        if want.unique:
            first = sizes.setdefault(id(want), (size, index, dim))
            if first[0] != size:
                raise ValueError(f"{where}: dimension {dim} is {size}, but input {first[1]}'s "
                                 f"dimension {first[2]} is {first[0]}, and both use one "
                                 f"unique Symbol")
