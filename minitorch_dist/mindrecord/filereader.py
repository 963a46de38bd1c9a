"""``mindrecord.FileReader``: read the rows of a MindRecord dataset as dicts.

>>> import numpy as np, os, tempfile
>>> from minitorch_dist.mindrecord import FileWriter, FileReader
>>> scratch = tempfile.TemporaryDirectory()      # removed at the end
>>> path = os.path.join(scratch.name, "r.mindrecord")
>>> w = FileWriter(path); _ = w.add_schema({"x": {"type": "int64"}}); w.write_raw_data([{"x": 5}]); w.commit()
>>> [{k: int(v) for k, v in row.items()} for row in FileReader(path).get_next()]
[{'x': 5}]
>>> scratch.cleanup()
"""
import numpy as np

from .shard_set import open_shard_set


class FileReader:
    """Rows of the files of ``file_name`` (a path: its whole set; or a list of files), in file
    order. ``columns`` picks fields; ``num_consumer`` is MindSpore's reader thread count
    (checked; rows are read in this thread, in the same order)."""

    def __init__(self, file_name, num_consumer=4, columns=None, operator=None):
        if isinstance(num_consumer, bool) or not isinstance(num_consumer, (int, np.integer)) \
                or num_consumer < 1:
            raise ValueError(f"FileReader: num_consumer must be a positive int, got {num_consumer!r}")
        if operator is not None:
            raise ValueError("FileReader: operator (a MindSpore reader hook) is not supported; pass None")
        self._shards = open_shard_set(file_name, "FileReader")
        fields = list(self._shards[0].schema)
        if columns is None:
            self.columns = fields
        else:
            if not isinstance(columns, list) or not columns:
                raise ValueError(f"FileReader: columns must be a non-empty list, got {columns!r}")
            unknown = [c for c in columns if c not in fields]
            if unknown:
                raise ValueError(f"FileReader: unknown columns {unknown}; the files have {fields}")
            self.columns = list(columns)

    def get_next(self):
        """Yield each row as ``{field: value}``."""
        for shard in self._shards:
            for i in range(len(shard)):
                yield dict(zip(self.columns, shard.row(i, self.columns)))

    def len(self):
        """The number of rows (MindSpore's spelling)."""
        return sum(len(s) for s in self._shards)

    def schema(self):
        """The schema the files were written with."""
        return dict(self._shards[0].schema)

    def close(self):
        """Nothing stays open between rows; kept for MindSpore's API."""
