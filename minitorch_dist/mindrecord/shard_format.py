"""The on-disk format of one MindRecord shard file written here (not MindSpore's own).

MindSpore's files are a JSON header, fixed-size pages of rows and blobs, and an SQLite index
beside each file (``name.db``). This project keeps the API (``FileWriter`` / ``MindDataset``)
and the schema rules but stores a shard as one self-describing file::

    b"MTDMREC1"                   magic
    row 0, row 1, ...             each: its fields in schema order (below)
    int64[rows]                   byte offset of each row (random access for shuffle/shard)
    footer                        UTF-8 JSON: schema, desc, index fields, shard set, row count
    uint64 footer length
    b"MTDMEND1"                   end magic (missing: the writer never committed)

A field is stored as: a scalar number, its little-endian bytes; a numeric array, ``ndim``
int64 dimensions then its bytes; a ``string``, uint32 length + UTF-8; ``bytes``, uint64
length + the bytes. Files written by MindSpore are recognised and refused with a clear error.
"""
import json
import mmap
import os
import struct

import numpy as np

MAGIC = b"MTDMREC1"
END_MAGIC = b"MTDMEND1"
FORMAT_NAME = "minitorch_dist.mindrecord"
VERSION = 1
FIELD_TYPES = ("int32", "int64", "float32", "float64", "string", "bytes")


def check_schema(schema):
    """Validate a MindRecord schema ``{name: {"type": t, "shape": [...]}}``; returns a copy."""
    if not isinstance(schema, dict) or not schema:
        raise ValueError(f"FileWriter.add_schema: the schema must be a non-empty dict "
                         f"{{field name: {{'type': ..., 'shape': [...]}}}}, got {schema!r}")
    checked = {}
    for name, spec in schema.items():
        if not isinstance(name, str) or not name or not all(c.isalnum() or c == "_" for c in name):
            raise ValueError(f"FileWriter.add_schema: field name {name!r} must be letters, digits "
                             "and underscores")
        if not isinstance(spec, dict) or "type" not in spec or set(spec) - {"type", "shape"}:
            raise ValueError(f"FileWriter.add_schema: field {name!r} must be a dict with 'type' and "
                             f"an optional 'shape', got {spec!r}")
        kind = spec["type"]
        if kind not in FIELD_TYPES:
            raise ValueError(f"FileWriter.add_schema: field {name!r} has type {kind!r}; expected "
                             f"one of {list(FIELD_TYPES)}")
        entry = {"type": kind}
        if "shape" in spec:
            shape = spec["shape"]
            if kind in ("string", "bytes"):
                raise ValueError(f"FileWriter.add_schema: field {name!r} of type {kind!r} cannot "
                                 "have a shape (only int32/int64/float32/float64 arrays do)")
            if not isinstance(shape, (list, tuple)) or not shape or any(
                    isinstance(d, bool) or not isinstance(d, int) or (d < 1 and d != -1) for d in shape):
                raise ValueError(f"FileWriter.add_schema: field {name!r} has shape {shape!r}; "
                                 "expected a non-empty list of positive ints or -1")
            if list(shape).count(-1) > 1:
                raise ValueError(f"FileWriter.add_schema: field {name!r} has shape {shape!r}; "
                                 "at most one dimension may be -1")
            entry["shape"] = [int(d) for d in shape]
        checked[name] = entry
    return checked


def _shape_matches(shape, expected):
    return len(shape) == len(expected) and all(e in (-1, s) for s, e in zip(shape, expected))


def encode_row(row, schema, where):
    """The bytes of one row (a dict) for ``schema``; a ValueError says which field is wrong."""
    if not isinstance(row, dict):
        raise ValueError(f"{where}: a row must be a dict {{field: value}}, got {type(row).__name__}")
    missing = [f for f in schema if f not in row]
    extra = [f for f in row if f not in schema]
    if missing or extra:
        raise ValueError(f"{where}: the row's fields do not match the schema: missing {missing}, "
                         f"not in the schema {extra}")
    parts = []
    for name, spec in schema.items():
        value, kind = row[name], spec["type"]
        if kind == "string":
            if not isinstance(value, str):
                raise ValueError(f"{where}: field {name!r} (string) got {type(value).__name__}")
            data = value.encode("utf-8")
            parts += [struct.pack("<I", len(data)), data]
        elif kind == "bytes":
            if not isinstance(value, (bytes, bytearray)):
                raise ValueError(f"{where}: field {name!r} (bytes) got {type(value).__name__}")
            parts += [struct.pack("<Q", len(value)), bytes(value)]
        else:
            parts.append(_encode_number(value, name, spec, where))
    return b"".join(parts)


def _encode_number(value, name, spec, where):
    kind, shape = spec["type"], spec.get("shape")
    array = np.asarray(value)
    if array.dtype.kind not in "iuf" or (kind.startswith("int") and array.dtype.kind == "f"):
        raise ValueError(f"{where}: field {name!r} ({kind}) got {array.dtype} values")
    target = np.dtype(kind)
    if array.dtype.kind in "iu" and array.size and target.kind == "i":
        info = np.iinfo(target)
        if array.min() < info.min or array.max() > info.max:
            raise ValueError(f"{where}: field {name!r} ({kind}) holds values outside {kind}'s range")
    if shape is None:
        if array.ndim != 0:
            raise ValueError(f"{where}: field {name!r} ({kind}, no shape) is a scalar, got an "
                             f"array of shape {array.shape}")
        return array.astype(target.newbyteorder("<")).tobytes()
    if not _shape_matches(array.shape, shape):
        raise ValueError(f"{where}: field {name!r} has shape {list(array.shape)}, the schema says "
                         f"{shape}")
    dims = struct.pack(f"<{array.ndim}q", *array.shape)
    return dims + np.ascontiguousarray(array, dtype=target.newbyteorder("<")).tobytes()


def write_footer(f, offsets, meta):
    """Finish a shard file opened for writing at its end: offsets, footer, end magic."""
    meta = dict(meta, format=FORMAT_NAME, version=VERSION, rows=len(offsets), table_offset=f.tell())
    f.write(np.asarray(offsets, dtype="<i8").tobytes())
    footer = json.dumps(meta).encode("utf-8")
    f.write(footer)
    f.write(struct.pack("<Q", len(footer)))
    f.write(END_MAGIC)


def _refusal(path, head):
    if b"shard_addresses" in head or b"index_fields" in head or b"blob_fields" in head:
        return (f"MindRecord file {path!r} was written by MindSpore's own FileWriter (MindSpore's "
                "page format with an SQLite index), which minitorch_dist cannot read; write the data "
                "again with minitorch_dist.mindrecord.FileWriter (or export it to TFRecord)")
    return (f"{path!r} is not a MindRecord file written by minitorch_dist.mindrecord.FileWriter "
            f"(its first bytes are {bytes(head[:8])!r}, expected {MAGIC!r})")


class ShardFile:
    """One committed shard file, opened for random access to its rows."""

    def __init__(self, path):
        if not os.path.isfile(path):
            raise ValueError(f"MindRecord file {path!r} does not exist")
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self._data = (mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b"")
        data = self._data
        if data[:8] != MAGIC:
            raise ValueError(_refusal(path, data[:65536]))
        if size < 32 or data[-8:] != END_MAGIC:
            raise ValueError(f"MindRecord file {path!r} is incomplete: its writer did not commit "
                             "(call FileWriter.commit()), or the file was truncated")
        (footer_len,) = struct.unpack_from("<Q", data, size - 16)
        if footer_len > size - 24:
            raise ValueError(f"MindRecord file {path!r} is damaged: footer length {footer_len} "
                             f"exceeds the file size {size}")
        try:
            self.meta = json.loads(bytes(data[size - 16 - footer_len:size - 16]).decode("utf-8"))
            rows, table = int(self.meta["rows"]), int(self.meta["table_offset"])
            self.schema = self.meta["schema"]
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"MindRecord file {path!r} is damaged: unreadable footer ({err})") from None
        if table + 8 * rows != size - 16 - footer_len:
            raise ValueError(f"MindRecord file {path!r} is damaged: its row table does not fit")
        self.offsets = np.frombuffer(data, dtype="<i8", count=rows, offset=table)
        self.ends = np.append(self.offsets[1:], table) if rows else self.offsets

    def __len__(self):
        return len(self.offsets)

    def row(self, index, columns):
        """Row ``index`` as a tuple of arrays for ``columns`` (names, in order)."""
        data, pos, end = self._data, int(self.offsets[index]), int(self.ends[index])
        values = {}
        for name, spec in self.schema.items():
            kind = spec["type"]
            if kind == "string":
                (n,) = struct.unpack_from("<I", data, pos)
                values[name] = np.array(bytes(data[pos + 4:pos + 4 + n]).decode("utf-8"))
                pos += 4 + n
            elif kind == "bytes":
                (n,) = struct.unpack_from("<Q", data, pos)
                values[name] = np.frombuffer(data, np.uint8, count=n, offset=pos + 8).copy()
                pos += 8 + n
            else:
                dtype = np.dtype(kind).newbyteorder("<")
                shape = ()
                if "shape" in spec:
                    shape = struct.unpack_from(f"<{len(spec['shape'])}q", data, pos)
                    pos += 8 * len(shape)
                count = int(np.prod(shape))
                values[name] = np.frombuffer(data, dtype, count=count, offset=pos).reshape(shape) \
                    .astype(kind)                # native byte order, and a copy off the map
                pos += count * dtype.itemsize
        if pos != end:
            raise ValueError(f"MindRecord file {self.path!r}: row {index} is damaged (its fields end "
                             f"at byte {pos}, the row at {end})")
        return tuple(values[c] for c in columns)
