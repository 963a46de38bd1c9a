"""``mindrecord.FileWriter``: write rows to MindRecord shard files, with MindSpore's API.

``FileWriter(file_name, shard_num=1, overwrite=False)`` plans ``shard_num`` files: the name
itself when there is one, else ``file_name`` + the shard number padded to the width of
``shard_num - 1`` (21 shards: ``name00`` ... ``name20``; 3 shards: ``name0`` ... ``name2``), as
MindSpore names them. ``add_schema`` (once), optionally ``add_index``, then ``write_raw_data``
any number of times, then ``commit``. Each ``write_raw_data`` call splits its rows into
``shard_num`` consecutive parts, one per file (the first ``n % shard_num`` get one row more;
MindSpore picks those shards at random), so reading the files in order without shuffle gives
the rows as written.

The files are MindSpore's own format (``shard_header``, ``shard_file``): each shard file and
its SQLite index ``name.db``, with MindSpore's header, pages, blob layout and integer
compression, so MindSpore reads them and this package reads MindSpore's. Until ``commit`` the
files are ``name.part`` and ``name.db.part``; only a committed set carries the real names.

>>> import numpy as np, os, tempfile
>>> from minitorch_dist.mindrecord import FileWriter
>>> scratch = tempfile.TemporaryDirectory()      # removed at the end
>>> path = os.path.join(scratch.name, "demo.mindrecord")
>>> writer = FileWriter(path, shard_num=2)
>>> writer.add_schema({"ids": {"type": "int32", "shape": [-1]}, "label": {"type": "float32"}}, "demo")
0
>>> writer.write_raw_data([{"ids": np.arange(3, dtype=np.int32), "label": 1.0}] * 4)
>>> writer.commit()
>>> sorted(os.listdir(os.path.dirname(path)))
['demo.mindrecord0', 'demo.mindrecord0.db', 'demo.mindrecord1', 'demo.mindrecord1.db']
>>> scratch.cleanup()
"""
import os

import numpy as np

from . import msgpack_codec
from .blob_codec import compresses_integers, encode_blob
from .page_writer import ShardPages
from .row_check import check_schema, split_row
from .shard_set import open_shard_set
from .shard_header import MAX_HEADER, MAX_PAGE, MIN_HEADER, MIN_PAGE, VERSION

MAX_SHARDS = 1000
DEFAULT_HEADER_SIZE = 1 << 24     # MindSpore's defaults: files are sparse up to the last page
DEFAULT_PAGE_SIZE = 1 << 25


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
        self._header_size, self._page_size = DEFAULT_HEADER_SIZE, DEFAULT_PAGE_SIZE
        self._shards = None
        self._committed = False

    @classmethod
    def open_for_append(cls, file_name):
        """A writer that adds rows to the committed set of ``file_name`` (any of its files),
        as MindSpore's ``FileWriter.open_for_append``: schema, index fields and page sizes are
        the set's; the files are replaced when ``commit`` succeeds, left as they were otherwise."""
        shards = open_shard_set(file_name, "FileWriter.open_for_append")
        writer = cls.__new__(cls)
        header = shards[0].header
        writer._paths = [s.path for s in shards]
        writer._schema = {name: dict(spec) for name, spec in shards[0].schema.items()}
        writer._desc = header["schema"][0].get("desc") or ""
        writer._index_fields = list(shards[0].index_fields)
        writer._header_size, writer._page_size = header["header_size"], header["page_size"]
        writer._committed = False
        writer._shards = [ShardPages.resume(s) for s in shards]
        writer._shards[0].compression_size = header["compression_size"]
        return writer

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
        self._desc = desc if desc is not None else ""
        return 0

    def add_index(self, index_fields):
        """Make ``index_fields`` (scalar fields) the columns of the SQLite index (default:
        every scalar field, as MindSpore). Reading checks each row's values against them."""
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
        """The bytes before the first page (MindSpore: 16 KB .. 128 MB, a multiple of 4)."""
        self._header_size = self._layout_knob("set_header_size", header_size, MIN_HEADER, MAX_HEADER)

    def set_page_size(self, page_size):
        """The bytes of each page (MindSpore: 32 KB .. 256 MB, a multiple of 4); a row's blob or
        raw fields must fit one page."""
        self._page_size = self._layout_knob("set_page_size", page_size, MIN_PAGE, MAX_PAGE)

    def _layout_knob(self, name, value, low, high):
        self._check_open(name)
        if self._shards is not None:
            raise RuntimeError(f"FileWriter.{name}: rows were already written; set sizes first")
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high \
                or value % 4:
            raise ValueError(f"FileWriter.{name}: expected a multiple of 4 in [{low}, {high}], "
                             f"got {value!r}")
        return value

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
        rows = [self._encode(row, f"FileWriter.write_raw_data: row {i}")
                for i, row in enumerate(raw_data)]
        self._start()
        base, extra = divmod(len(rows), len(self._paths))
        start = 0
        for shard, pages in enumerate(self._shards):
            end = start + base + (shard < extra)
            for i in range(start, end):
                raw, blob, index_values, saving = rows[i]
                pages.add(raw, blob, index_values, f"FileWriter.write_raw_data: row {i}")
                pages.compression_size += saving
            start = end

    def _encode(self, row, where):
        """(raw bytes, blob bytes, index values, bytes saved by compression) of one row."""
        scalars, blobs = split_row(row, self._schema, where)
        blob_fields = sorted(blobs)
        blob = encode_blob(blobs, self._schema, blob_fields)
        saving = 0
        if compresses_integers(self._schema):      # MindSpore's compression_size: bytes saved
            plain = sum(len(v) if isinstance(v, bytes) else v.nbytes for v in blobs.values())
            saving = plain + (8 * len(blobs) if len(blobs) > 1 else 0) - len(blob)
        raw = msgpack_codec.pack(scalars or {"id": 0})      # MindSpore's row of a blob-only schema
        return raw, blob, tuple(scalars[f] for f in self._indexed()), saving

    def _indexed(self):
        """The index fields: those added, else every scalar field (MindSpore's default)."""
        if self._index_fields:
            return sorted(self._index_fields)
        return sorted(f for f, spec in self._schema.items() if "shape" not in spec and spec["type"] != "bytes")

    def _start(self):
        if self._shards is None:
            self._shards = [ShardPages(p, k, self._header_size, self._page_size)
                            for k, p in enumerate(self._paths)]

    def commit(self):
        """Finish every file (row tables and footers); the writer cannot be used afterwards."""
        self._check_open("commit")
        if self._schema is None:
            raise RuntimeError("FileWriter.commit: no schema was added; nothing to write")
        self._start()                                 # no rows: still a valid, empty set
        blob_fields = sorted(f for f, s in self._schema.items() if s["type"] == "bytes" or "shape" in s)
        indexed = self._indexed()
        meta = {"index_fields": [{"index_field": f, "schema_id": 0} for f in indexed] or None,
                # MindSpore records the bytes compression saved, and 0 when it cost bytes
                "compression_size": max(0, sum(p.compression_size for p in self._shards)),
                "schema": [{"blob_fields": blob_fields, "desc": self._desc, "schema": self._schema}],
                "shard_addresses": [os.path.basename(p) for p in self._paths],
                "statistics": None, "version": VERSION}
        try:
            for pages in self._shards:
                pages.write_header(pages.header(meta))
            for pages in self._shards:
                pages.finish(self._schema, indexed)
        except BaseException:
            self._abandon()
            raise
        self._committed = True

    def _abandon(self):
        for pages in self._shards or ():
            pages.abandon()

    def _check_open(self, what):
        if self._committed:
            raise RuntimeError(f"FileWriter.{what}: the writer has committed; create a new FileWriter")

    def __del__(self):
        if not getattr(self, "_committed", True):
            self._abandon()
