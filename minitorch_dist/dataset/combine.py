"""Column and dataset combinations: ``project``, ``rename``, ``zip`` and ``concat``.

``project`` and ``rename`` only rearrange or rename a row's columns, so they keep blocks
flowing. ``zip`` puts the rows of several datasets side by side (as many rows as the
shortest has); ``concat`` reads several datasets with the same columns one after another.
Every child reads the same epoch key, so shuffles below a zip or concat stay seeded.
"""
from .engine import Dataset, block_length


def _names(columns, what, name):
    columns = [columns] if isinstance(columns, str) else columns
    if not isinstance(columns, (list, tuple)) or not columns \
            or not all(isinstance(c, str) for c in columns):
        raise TypeError(f"{what}: {name} must be a column name or a non-empty list of them, "
                        f"got {columns!r}")
    if len(set(columns)) != len(columns):
        raise ValueError(f"{what}: {name} names a column twice: {list(columns)}")
    return list(columns)


def _unknown(what, asked, names):
    missing = [c for c in asked if c not in names]
    if missing:
        raise ValueError(f"{what}: unknown column(s) {missing}; the dataset has columns {names}")


class ProjectDataset(Dataset, operation="project"):
    """Only ``columns``, in that order."""

    def __init__(self, child, columns):
        super().__init__([child])
        self.columns = _names(columns, "project", "columns")
        names = child.get_col_names()
        _unknown("project", self.columns, names)
        self._positions = [names.index(c) for c in self.columns]

    def get_col_names(self):
        return list(self.columns)

    def _size(self):
        return self.children[0]._size()

    def _block_native(self):
        return self.children[0]._block_native()

    def _pick(self, values):
        return tuple(values[p] for p in self._positions)

    def _iter_blocks(self, key):
        for block in self.children[0]._iter_blocks(key):
            yield self._pick(block)

    def _iter_rows(self, key):
        for row in self.children[0]._iter_rows(key):
            yield self._pick(row)


class RenameDataset(Dataset, operation="rename"):
    """``input_columns[i]`` is called ``output_columns[i]``; the data is unchanged."""

    def __init__(self, child, input_columns, output_columns):
        super().__init__([child])
        old = _names(input_columns, "rename", "input_columns")
        new = _names(output_columns, "rename", "output_columns")
        if len(old) != len(new):
            raise ValueError(f"rename: input_columns {old} and output_columns {new} must be "
                             "equally long")
        names = child.get_col_names()
        _unknown("rename", old, names)
        mapping = dict(zip(old, new))
        self._names = [mapping.get(c, c) for c in names]
        if len(set(self._names)) != len(self._names):
            raise ValueError(f"rename: the new names {self._names} name a column twice")

    def get_col_names(self):
        return list(self._names)

    def _size(self):
        return self.children[0]._size()

    def _block_native(self):
        return self.children[0]._block_native()

    def _iter_blocks(self, key):
        return self.children[0]._iter_blocks(key)

    def _iter_rows(self, key):
        return self.children[0]._iter_rows(key)


def _datasets(datasets, what):
    if isinstance(datasets, Dataset):
        datasets = [datasets]
    if not isinstance(datasets, (list, tuple)) or not datasets \
            or not all(isinstance(d, Dataset) for d in datasets):
        raise TypeError(f"{what}: expected a dataset or a list/tuple of datasets, got {datasets!r}")
    return list(datasets)


class ZipDataset(Dataset, operation="zip"):
    """The columns of every child side by side; as many rows as the shortest child has."""

    def __init__(self, datasets):
        datasets = _datasets(datasets, "zip")
        if len(datasets) < 2:
            raise ValueError("zip: needs at least two datasets")
        super().__init__(datasets)
        names = [c for d in datasets for c in d.get_col_names()]
        clash = sorted({c for c in names if names.count(c) > 1})
        if clash:
            raise ValueError(f"zip: column name(s) {clash} appear in more than one dataset; "
                             "rename them first (Dataset.rename)")
        self._names = names

    def get_col_names(self):
        return list(self._names)

    def _size(self):
        return min(child._size() for child in self.children)

    def _iter_rows(self, key):
        for rows in zip(*(child._iter_rows(key) for child in self.children)):
            yield tuple(value for row in rows for value in row)


class ConcatDataset(Dataset, operation="concat"):
    """The rows of every child, one child after the other; the columns must be the same."""

    def __init__(self, datasets):
        datasets = _datasets(datasets, "concat")
        if len(datasets) < 2:
            raise ValueError("concat: needs at least two datasets")
        super().__init__(datasets)
        first = datasets[0].get_col_names()
        for i, d in enumerate(datasets[1:], start=1):
            if d.get_col_names() != first:
                raise ValueError(f"concat: dataset {i} has columns {d.get_col_names()}, dataset 0 "
                                 f"has {first}; every dataset needs the same columns in the same "
                                 "order (Dataset.project/rename)")
        self._names = first

    def get_col_names(self):
        return list(self._names)

    def _size(self):
        return sum(child._size() for child in self.children)

    def _block_native(self):
        return all(child._block_native() for child in self.children)

    def _iter_blocks(self, key):
        for child in self.children:
            for block in child._iter_blocks(key):
                if block_length(block):
                    yield block

    def _iter_rows(self, key):
        for child in self.children:
            yield from child._iter_rows(key)


def zip_datasets(datasets):
    """``ds.zip((a, b))`` (MindSpore's name; exported as ``zip`` by ``dataset/__init__``)."""
    return ZipDataset(datasets)


__all__ = ["ProjectDataset", "RenameDataset", "ZipDataset", "ConcatDataset", "zip_datasets"]
