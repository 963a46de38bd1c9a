"""``mindspore.parallel.Layout``: a strategy written with named device axes.

``Layout((2, 2, 2), ("dp", "sp", "mp"))`` names the axes of a device matrix, left to right.
Calling it with one entry per tensor dimension gives that tensor's layout: a name splits the
dimension over that axis, ``"None"`` keeps it whole, and a tuple of names splits it over
several axes at once, the first (major) first:

>>> layout = Layout((2, 2, 2), ("dp", "sp", "mp"))
>>> x_layout = layout(("dp", "sp"), "mp")
>>> x_layout.to_dict()["tensor_map"], x_layout.split_counts()
(((2, 1), 0), (4, 2))

Such layouts are accepted wherever a strategy of split counts is: ``Primitive.shard``'s
``in_strategy`` and ``out_strategy`` (``rules/layout_plan.py`` turns them into a plan),
``Cell.shard`` and ``ms.shard``. As in MindSpore, tensor-map numbers count device axes from
the right ("mp" is 0 above). A device matrix smaller than the job leaves its other devices
as copies (a repeated axis on the left).

Bad layouts are refused when they are written, with the same message on every rank: a
repeated or reserved alias, a name that is not an alias, an alias used twice in one layout.
"""
import math
import numbers

from .layout import LayoutError, TensorLayout, with_repeated_axis

__all__ = ["Layout", "LayoutMap", "is_layout_strategy", "layout_entries", "layout_of",
           "strategy_text"]

_UNSPLIT = "None"
_RESERVED = ("interleaved_parallel",)


def _positive_int(n):
    return isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1


class Layout:
    """Named device axes, and (once called) one tensor's map over them (module docstring).

    ``rank_list``: MindSpore places the matrix on these ranks; only the job's ranks in order
    (``None`` or ``range(size)``) are supported, anything else is refused.
    """

    def __init__(self, device_matrix, alias_name, rank_list=None):
        if not isinstance(device_matrix, (tuple, list)) or not device_matrix or not all(
                _positive_int(n) for n in device_matrix):
            raise TypeError(f"Layout: device_matrix must be a non-empty tuple of positive ints, "
                            f"got {device_matrix!r}")
        if not isinstance(alias_name, (tuple, list)) or not all(
                isinstance(a, str) and a for a in alias_name):
            raise TypeError(f"Layout: alias_name must be a tuple of non-empty strings, got "
                            f"{alias_name!r}")
        if len(alias_name) != len(device_matrix):
            raise ValueError(f"Layout: alias_name {tuple(alias_name)} needs one name per axis of "
                             f"device_matrix {tuple(device_matrix)}")
        for name in alias_name:
            if name == _UNSPLIT or name in _RESERVED:
                raise ValueError(f"Layout: {name!r} cannot be an alias name (it is reserved); "
                                 f"got alias_name {tuple(alias_name)}")
            if list(alias_name).count(name) > 1:
                raise ValueError(f"Layout: alias name {name!r} is repeated in alias_name "
                                 f"{tuple(alias_name)}; each axis needs its own name")
        size = math.prod(device_matrix)
        if rank_list is not None and list(rank_list) != list(range(size)):
            raise ValueError(f"Layout: rank_list {rank_list!r} is not supported; the device "
                             f"matrix covers ranks 0..{size - 1} in order (rank_list=None)")
        self._device_matrix = tuple(int(n) for n in device_matrix)
        self._alias_name = tuple(alias_name)
        self._tensor_map = None

    # ---- writing a tensor's layout -----------------------------------------------------------
    def __call__(self, *tensor_map):
        used = {}
        for dim, entry in enumerate(tensor_map):
            names = entry if isinstance(entry, tuple) else (entry,)
            if not names or not all(isinstance(n, str) for n in names):
                raise TypeError(f"Layout: tensor map entry {dim} must be an alias name, 'None' "
                                f"or a tuple of alias names, got {entry!r}")
            for name in names:
                if name == _UNSPLIT and len(names) == 1:
                    continue
                if name not in self._alias_name:
                    raise ValueError(f"Layout: {name!r} (tensor map entry {dim}) is not an alias "
                                     f"name; the aliases are {self._alias_name} (or 'None')")
                if name in used:
                    raise ValueError(f"Layout: alias {name!r} splits both dimension {used[name]} "
                                     f"and dimension {dim} in {tensor_map}; an axis can split "
                                     f"only one dimension, once")
                used[name] = dim
        return LayoutMap.make(self._device_matrix, self._alias_name, tuple(tensor_map))

    # ---- what it says ------------------------------------------------------------------------
    @property
    def device_matrix(self):
        return self._device_matrix

    @property
    def alias_name(self):
        return self._alias_name

    @property
    def tensor_map(self):
        """Tensor-map numbers counted from the right (-1: whole; a tuple: several axes)."""
        self._need_map("tensor_map")
        return tuple(self._entry_numbers(e) for e in self._tensor_map)

    def _axis_number(self, name):
        return len(self._alias_name) - 1 - self._alias_name.index(name)

    def _entry_numbers(self, entry):
        names = entry if isinstance(entry, tuple) else (entry,)
        axes = tuple(self._axis_number(n) for n in names if n != _UNSPLIT)
        return -1 if not axes else axes[0] if len(axes) == 1 else axes

    def _need_map(self, what):
        if self._tensor_map is None:
            raise ValueError(f"Layout{self._device_matrix}: {what} needs a tensor's map; call the "
                             f"layout with one entry per dimension first, e.g. layout"
                             f"{self._alias_name[:2]!r}")

    def split_counts(self):
        """How many slices each dimension is cut into."""
        self._need_map("split_counts")
        return tuple(math.prod(self._device_matrix[self._alias_name.index(n)]
                               for n in (e if isinstance(e, tuple) else (e,)) if n != _UNSPLIT)
                     for e in self._tensor_map)

    def to_dict(self):
        """MindSpore's ``Layout.to_dict``: device_matrix, tensor_map (numbers), alias_name."""
        self._need_map("to_dict")
        return {"device_matrix": self._device_matrix, "tensor_map": self.tensor_map,
                "interleaved_parallel": False, "alias_name": self._alias_name}

    def to_tensor_layout(self, shape, world=None):
        """The ``TensorLayout`` of a ``shape`` tensor on ``world`` devices (copies on a
        repeated axis on the left when the matrix is smaller than the job)."""
        self._need_map("to_tensor_layout")
        if len(self._tensor_map) != len(shape):
            raise LayoutError(f"{self} has {len(self._tensor_map)} entries but the tensor has "
                              f"shape {tuple(shape)} ({len(shape)} dimensions)")
        dm = self._device_matrix
        if world is not None:
            dm = with_repeated_axis(dm, world, right=False)
        return TensorLayout(dm, self.tensor_map, tuple(shape))

    def _key(self):
        return (self._device_matrix, self._alias_name, self._tensor_map)

    def __eq__(self, other):
        return isinstance(other, Layout) and self._key() == other._key()

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        text = f"Layout({self._device_matrix}, {self._alias_name})"
        return text if self._tensor_map is None else f"{text}{self._tensor_map}"


class _Count(int):
    """A split count that remembers the Layout it was written with (``LayoutMap``)."""

    def __new__(cls, n, layout=None):
        count = int.__new__(cls, n)
        count.layout = layout
        return count


class LayoutMap(tuple, Layout):
    """A called Layout: one tensor's map. It is also the tuple of its split counts, so code
    that reads a strategy as counts (``Primitive.shard``'s check, strategy files, the dumps)
    reads it unchanged, and each count remembers the Layout (``layout_of``)."""

    @classmethod
    def make(cls, device_matrix, alias_name, tensor_map):
        spec = Layout(device_matrix, alias_name)
        spec._tensor_map = tensor_map
        counts = spec.split_counts()
        out = tuple.__new__(cls, tuple(_Count(n) for n in counts))
        out.__dict__.update(vars(spec))
        for count in out:
            count.layout = out
        return out

    __eq__ = Layout.__eq__
    __ne__ = Layout.__ne__
    __hash__ = Layout.__hash__
    __repr__ = Layout.__repr__


def layout_of(entry):
    """The Layout one strategy entry was written with, or None for plain split counts."""
    if isinstance(entry, Layout):
        return entry
    if isinstance(entry, (tuple, list)) and entry and all(
            isinstance(n, _Count) and n.layout is not None for n in entry):
        return entry[0].layout
    return None


def is_layout_strategy(strategy):
    """True when ``strategy``'s entries are Layouts (also as ``Primitive.shard`` stores them:
    tuples of counts that remember their Layout); a mix with plain counts is refused."""
    if not isinstance(strategy, (tuple, list)) or not strategy:
        return False
    kinds = {layout_of(s) is not None for s in strategy}
    if kinds == {True, False}:
        raise ValueError(f"a strategy mixes Layouts and split counts: {strategy!r}; give every "
                         f"input a Layout, or every input a tuple of split counts")
    return kinds == {True}


def layout_entries(strategy, what):
    """The Layouts of a layout strategy, each called with a tensor map, all over one matrix."""
    strategy = tuple(layout_of(s) for s in strategy)
    for s in strategy:
        s._need_map(what)
    first = strategy[0]
    for s in strategy[1:]:
        if (s.device_matrix, s.alias_name) != (first.device_matrix, first.alias_name):
            raise ValueError(f"{what}: every Layout must share one device matrix and alias names; "
                             f"got {first!r} and {s!r}")
    return tuple(strategy)


def strategy_text(strategy):
    """A strategy as the IR dumps print it: split counts, or the layouts' tensor maps."""
    if strategy is None:
        return "None"
    if is_layout_strategy(strategy):
        return "(" + ", ".join(repr(layout_of(s)) for s in strategy) + ")"
    return "(" + ", ".join("(" + ", ".join(str(n) for n in s) + (",)" if len(s) == 1 else ")")
                           for s in strategy) + ("," if len(strategy) == 1 else "") + ")"
