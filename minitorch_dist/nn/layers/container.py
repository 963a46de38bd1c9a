"""Containers: SequentialCell (runs its cells in order) and CellList (holds them).

Children are registered under the names "0", "1", ..., so their parameters are named
"0.weight", "1.bias", ... (or under the keys of an OrderedDict given to SequentialCell).
"""
from collections import OrderedDict

from ..cell import Cell

__all__ = ["SequentialCell", "CellList"]


def _check_cell(cell, container):
    if not isinstance(cell, Cell):
        raise TypeError(f"{container} holds Cells, got {type(cell).__name__}")
    return cell


class _CellSequence(Cell):
    """Shared list behaviour: indexing, len, iteration, append, and renumbering."""

    def _keys(self):
        return list(self._cells)

    def _key_at(self, index):
        keys = self._keys()
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(f"{type(self).__name__} indices must be ints or slices, "
                            f"got {type(index).__name__}")
        if not -len(keys) <= index < len(keys):
            raise IndexError(f"{type(self).__name__} index {index} is out of range for "
                             f"{len(keys)} cells")
        return keys[index]

    def _reset(self, cells, keys=None):
        """Re-register ``cells`` in order, as "0", "1", ... unless ``keys`` are given
        (registration order is the order of iteration and of the parameters)."""
        for key in self._keys():
            delattr(self, key)
        for i, cell in enumerate(cells):
            setattr(self, str(i) if keys is None else keys[i], cell)

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(list(self._cells.values()))

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(list(self._cells.values())[index])
        return self._cells[self._key_at(index)]

    def __setitem__(self, index, cell):
        key = self._key_at(index)
        keys = self._keys()
        cells = [_check_cell(cell, type(self).__name__) if k == key else self._cells[k] for k in keys]
        self._reset(cells, keys)

    def __delitem__(self, index):
        keys = self._keys()
        doomed = set(keys[index]) if isinstance(index, slice) else {self._key_at(index)}
        kept = [key for key in keys if key not in doomed]
        positional = all(key.isdigit() for key in keys)   # renumber; OrderedDict names stay
        self._reset([self._cells[key] for key in kept], None if positional else kept)

    def append(self, cell):
        """Add ``cell`` at the end (named by its position)."""
        setattr(self, str(len(self._cells)), _check_cell(cell, type(self).__name__))
        return self


class SequentialCell(_CellSequence):
    """Runs its cells one after the other, each on the previous one's output.

    Takes cells as arguments, one list of cells, or an OrderedDict of named cells.

    >>> from minitorch_dist import nn
    >>> net = nn.SequentialCell(nn.Dense(4, 3), nn.ReLU(), nn.Dense(3, 2))
    >>> len(net), [name for name, _ in net.parameters_and_names()]
    (3, ['0.weight', '0.bias', '2.weight', '2.bias'])
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (dict, OrderedDict)):
            for name, cell in args[0].items():
                setattr(self, str(name), _check_cell(cell, "SequentialCell"))
            return
        cells = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
        for cell in cells:
            self.append(cell)

    def construct(self, x):
        for cell in self._cells.values():
            x = cell(x)
        return x


class CellList(_CellSequence):
    """A list of cells whose parameters belong to the owning network (it has no forward).

    >>> from minitorch_dist import nn
    >>> blocks = nn.CellList([nn.Dense(2, 2) for _ in range(3)])
    >>> blocks.insert(0, nn.ReLU())
    >>> [type(c).__name__ for c in blocks], blocks.trainable_params()[0].name
    (['ReLU', 'Dense', 'Dense', 'Dense'], '1.weight')
    """

    def __init__(self, args=None):
        super().__init__()
        if args is not None:
            self.extend(args)

    def extend(self, cells):
        """Append every cell of ``cells``."""
        if isinstance(cells, Cell) or not hasattr(cells, "__iter__"):
            raise TypeError(f"CellList.extend expects an iterable of Cells, got {type(cells).__name__}")
        for cell in cells:
            self.append(cell)
        return self

    def insert(self, index, cell):
        """Insert ``cell`` before position ``index`` (negative counts from the end)."""
        cells = list(self._cells.values())
        cells.insert(index, _check_cell(cell, "CellList"))
        self._reset(cells)

    def construct(self, *inputs, **kwargs):
        raise NotImplementedError("CellList is a container without a forward; call its cells "
                                  "(for cell in cell_list: x = cell(x)) or use SequentialCell")
