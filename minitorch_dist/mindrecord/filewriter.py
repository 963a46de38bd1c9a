"""``mindrecord.FileWriter``: write rows to MindRecord shard files, with MindSpore's API.

``FileWriter(file_name, shard_num=1, overwrite=False)`` plans ``shard_num`` files: the name
itself when there is one, else ``file_name`` + the shard number padded to the width of
``shard_num - 1`` (21 shards: ``name00`` ... ``name20``; 3 shards: ``name0`` ... ``name2``), as
MindSpore names them. ``add_schema`` (once), optionally ``add_index``, then ``write_raw_data``
any number of times, then ``commit``. Each ``write_raw_data`` call splits its rows into
``shard_num`` consecutive parts, one per file, so the files hold about equal numbers of rows
and, for one call, reading the files in order without shuffle gives the rows as written.

The file format is this project's own (see ``shard_format``); MindSpore's ``.db`` index files
are not written, and files written by MindSpore do not load here.

>>> import numpy as np, os, tempfile
>>> from minitorch_dist.mindrecord import FileWriter
>>> path = os.path.join(tempfile.mkdtemp(), "demo.mindrecord")
>>> writer = FileWriter(path, shard_num=2)
>>> writer.add_schema({"ids": {"type": "int32", "shape": [-1]}, "label": {"type": "float32"}}, "demo")
0
>>> writer.write_raw_data([{"ids": np.arange(3, dtype=np.int32), "label": 1.0}] * 4)
>>> writer.commit()
>>> sorted(os.listdir(os.path.dirname(path)))
['demo.mindrecord0', 'demo.mindrecord1']
"""
import os
import warnings

import numpy as np

from .shard_format import MAGIC, check_schema, encode_row, write_footer

MAX_SHARDS = 1000


def shard_paths(file_name, shard_num):
    """The file names of a set of ``shard_num`` shards (MindSpore's naming)."""
    if shard_num == 1:
        return [file_name]
    width = len(str(shard_num - 1))
    return [f"{file_name}{i:0{width}d}" for i in range(shard_num)]


class FileWriter:
    """Writes rows (dicts) to ``shard_num`` MindRecord files (see the module docstring)."""

    def __init__(self, file_name, shard_num=1, overwrite=False):
        if not isinstance(file_name, (str, os.PathLike)) or not os.fspath(file_name):
            raise ValueError(f"FileWriter: file_name must be a non-empty path, got {file_name!r}")
        file_name = os.fspath(file_name)
        if isinstance(shard_num, bool) or not isinstance(shard_num, (int, np.integer)) \
                or not 1 <= shard_num <= MAX_SHARDS:
            raise ValueError(f"FileWriter: shard_num must be an int in [1, {MAX_SHARDS}], got {shard_num!r}")
        if not isinstance(overwrite, bool):
            raise TypeError(f"FileWriter: overwrite must be True or False, got {overwrite!r}")
        folder = os.path.dirname(os.path.abspath(file_name))
        if not os.path.isdir(folder):
            raise ValueError(f"FileWriter: the folder {folder!r} of {file_name!r} does not exist")
        if os.path.isdir(file_name):
            raise ValueError(f"FileWriter: {file_name!r} is a folder; give a file name")
        self._paths = shard_paths(file_name, int(shard_num))
        existing = [p for p in self._paths for q in (p, p + ".db") if os.path.exists(q)]
        if existing and not overwrite:
            raise RuntimeError(f"FileWriter: MindRecord file {existing[0]!r} already exists; remove "
                               "it or pass overwrite=True")
        for p in self._paths:
            for q in (p, p + ".db"):
                if os.path.exists(q):
                    os.remove(q)
        self._schema = None
        self._desc = None
        self._index_fields = []
        self._files = None
        self._offsets = [[] for _ in self._paths]
        self._committed = False

    # ---- schema ----------------------------------------------------------------------------------
    def add_schema(self, content, desc=None):
        """Set the schema ``{field: {"type": "int32"|"int64"|"float32"|"float64"|"string"|"bytes",
        "shape": [...]}}`` (shape only for numeric arrays; one -1 allowed). Returns its id, 0."""
        self._check_open("add_schema")
        if self._schema is not None:
            raise RuntimeError("FileWriter.add_schema: a schema was already added; a writer holds one")
        if desc is not None and not isinstance(desc, str):
            raise TypeError(f"FileWriter.add_schema: desc must be a str, got {type(desc).__name__}")
        self._schema = check_schema(content)
        self._desc = desc
        return 0

    def add_index(self, index_fields):
        """Record ``index_fields`` (scalar fields) in the files, as MindSpore does; reading
        does not need an index here (rows are found through each file's offset table)."""
        self._check_open("add_index")
        if self._schema is None:
            raise RuntimeError("FileWriter.add_index: add the schema first")
        if not isinstance(index_fields, list) or not index_fields:
            raise ValueError(f"FileWriter.add_index: index_fields must be a non-empty list of field "
                             f"names, got {index_fields!r}")
        for field in index_fields:
            spec = self._schema.get(field)
            if spec is None:
                raise ValueError(f"FileWriter.add_index: {field!r} is not in the schema {list(self._schema)}")
            if "shape" in spec or spec["type"] == "bytes":
                raise ValueError(f"FileWriter.add_index: field {field!r} is an array or bytes; only "
                                 "scalar fields can be index fields")
        self._index_fields = list(dict.fromkeys(self._index_fields + index_fields))

    def set_header_size(self, header_size):
        """MindSpore's page-layout knob; this format has no header pages (checked, then noted)."""
        self._layout_knob("set_header_size", header_size, 16 * 1024, 128 * 1024 * 1024)

    def set_page_size(self, page_size):
        """MindSpore's page-layout knob; this format has no pages (checked, then noted)."""
        self._layout_knob("set_page_size", page_size, 32 * 1024, 256 * 1024 * 1024)

    def _layout_knob(self, name, value, low, high):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"FileWriter.{name}: expected an int in [{low}, {high}], got {value!r}")
        warnings.warn(f"FileWriter.{name}: this MindRecord format stores rows without pages, so the "
                      "size has no effect", stacklevel=3)

    # ---- rows ------------------------------------------------------------------------------------
    def write_raw_data(self, raw_data, parallel_writer=False):
        """Append ``raw_data`` (a list of dicts matching the schema) to the files.

        A row that does not match the schema raises ``ValueError`` naming the row and field
        (MindSpore drops such rows with a log line; here nothing is dropped silently).
        ``parallel_writer`` is accepted; rows are encoded in this thread.
        """
        self._check_open("write_raw_data")
        if self._schema is None:
            raise RuntimeError("FileWriter.write_raw_data: add the schema first (add_schema)")
        if not isinstance(raw_data, list):
            raise ValueError(f"FileWriter.write_raw_data: raw_data must be a list of dicts, got "
                             f"{type(raw_data).__name__}")
        if not isinstance(parallel_writer, bool):
            raise TypeError("FileWriter.write_raw_data: parallel_writer must be a bool, got "
                            f"{parallel_writer!r}")
        encoded = [encode_row(row, self._schema, f"FileWriter.write_raw_data: row {i}")
                   for i, row in enumerate(raw_data)]
        if self._files is None:
            self._files = [open(p, "wb") for p in self._paths]
            for f in self._files:
                f.write(MAGIC)
        per_file = -(-len(encoded) // len(self._paths))
        for shard, f in enumerate(self._files):
            for data in encoded[shard * per_file:(shard + 1) * per_file]:
                self._offsets[shard].append(f.tell())
                f.write(data)

    def commit(self):
        """Finish every file (row tables and footers); the writer cannot be used afterwards."""
        self._check_open("commit")
        if self._schema is None:
            raise RuntimeError("FileWriter.commit: no schema was added; nothing to write")
        if self._files is None:                      # no rows: still a valid, empty set
            self._files = [open(p, "wb") for p in self._paths]
            for f in self._files:
                f.write(MAGIC)
        names = [os.path.basename(p) for p in self._paths]
        for shard, f in enumerate(self._files):
            write_footer(f, self._offsets[shard], {
                "schema": self._schema, "desc": self._desc, "index_fields": self._index_fields,
                "shard_id": shard, "shard_num": len(self._paths), "shard_files": names})
            f.close()
        self._committed = True

    def _check_open(self, what):
        if self._committed:
            raise RuntimeError(f"FileWriter.{what}: the writer has committed; create a new FileWriter")

    def __del__(self):
        for f in getattr(self, "_files", None) or ():
            if not f.closed:
                f.close()
