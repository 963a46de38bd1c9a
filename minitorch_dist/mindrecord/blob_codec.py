"""One row's blob: the bytes of its ``bytes`` fields and numeric arrays, as MindSpore packs it.

Blob fields are listed (sorted) in the header's ``blob_fields``. With one blob field the blob
is that field's bytes. With several, each is an 8-byte big-endian length followed by the bytes.
An array's bytes are its values in the schema's type, little-endian.

When the schema holds an int32 or int64 array, MindSpore compresses every int32/int64 blob
field: a 4-byte big-endian element count, a bitmap of 2 bits per element (four per byte, first
element in the high bits: 0 = int8, 1 = int16, 2 = int32, 3 = int64), then each element
little-endian in the smallest signed type that holds it. A row without blob fields stores
4 zero bytes. Decoding checks every length against the bytes there and raises ``ValueError``.
"""
import struct

import numpy as np

_WIDTHS = (np.dtype("<i1"), np.dtype("<i2"), np.dtype("<i4"), np.dtype("<i8"))
DUMMY_BLOB = b"\x00" * 4


def compresses_integers(schema):
    """Whether MindSpore compresses this schema's integer arrays (it has one)."""
    return any("shape" in spec and spec["type"] in ("int32", "int64") for spec in schema.values())


def _compress(values):
    flat = values.reshape(-1).astype(np.int64)
    codes = np.full(flat.size, 3, np.uint8)
    for code in (2, 1, 0):
        info = np.iinfo(_WIDTHS[code])
        codes[(flat >= info.min) & (flat <= info.max)] = code
    padded = np.zeros(-(-flat.size // 4) * 4, np.uint8)
    padded[:flat.size] = codes
    bitmap = (padded.reshape(-1, 4) << np.array([6, 4, 2, 0], np.uint8)).sum(axis=1).astype(np.uint8)
    sizes = np.array([1, 2, 4, 8])[codes]
    offsets = np.cumsum(sizes) - sizes
    values = np.empty(int(sizes.sum()), np.uint8)
    for code, dtype in enumerate(_WIDTHS):          # vectorised per width: rows hold many ints
        chosen = np.nonzero(codes == code)[0]
        if chosen.size:
            at = offsets[chosen][:, None] + np.arange(dtype.itemsize)
            values[at] = flat[chosen].astype(dtype).view(np.uint8).reshape(-1, dtype.itemsize)
    return struct.pack(">I", flat.size) + bitmap.tobytes() + values.tobytes()


def _uncompress(data, dtype):
    if len(data) < 4:
        raise ValueError("a compressed integer array is shorter than its count")
    (count,) = struct.unpack_from(">I", data)
    start = 4 + -(-count // 4)
    if start > len(data):
        raise ValueError(f"a compressed integer array of {count} values has no room for its bitmap")
    bitmap = np.frombuffer(data, np.uint8, count=start - 4, offset=4)
    codes = ((bitmap[:, None] >> np.array([6, 4, 2, 0], np.uint8)) & 3).reshape(-1)[:count]
    if count and (codes == codes[0]).all():       # one width for all: read them directly
        width = _WIDTHS[codes[0]]
        if start + count * width.itemsize != len(data):
            raise ValueError(f"a compressed integer array of {count} values needs "
                             f"{count * width.itemsize} bytes of values, the field holds {len(data) - start}")
        return _fit(np.frombuffer(data, width, count=count, offset=start).astype(np.int64), dtype)
    sizes = np.array([1, 2, 4, 8])[codes]
    if start + int(sizes.sum()) != len(data):
        raise ValueError(f"a compressed integer array of {count} values needs {int(sizes.sum())} "
                         f"bytes of values, the field holds {len(data) - start}")
    buf = np.frombuffer(data, np.uint8)
    offsets = start + np.cumsum(sizes) - sizes
    out = np.empty(count, np.int64)
    for code, width in enumerate(_WIDTHS):
        chosen = np.nonzero(codes == code)[0]
        if chosen.size:
            at = offsets[chosen][:, None] + np.arange(width.itemsize)
            out[chosen] = np.ascontiguousarray(buf[at]).view(width).reshape(-1)
    return _fit(out, dtype)


def _fit(values, dtype):
    info = np.iinfo(dtype)
    if values.size and (values.min() < info.min or values.max() > info.max):
        raise ValueError(f"a compressed value does not fit {np.dtype(dtype).name}")
    return values.astype(dtype)


def _field_bytes(name, spec, value, compress):
    """The stored bytes of one blob field's (already checked) value."""
    if spec["type"] == "bytes":
        return bytes(value)
    array = np.ascontiguousarray(value, dtype=np.dtype(spec["type"]).newbyteorder("<"))
    if compress and spec["type"] in ("int32", "int64"):
        return _compress(array)
    return array.tobytes()


def encode_blob(row, schema, blob_fields, compress=None):
    """The blob bytes of ``row`` (values already checked against ``schema``); integer arrays
    compressed when the schema calls for it (``compress=None``) or as ``compress`` says."""
    if not blob_fields:
        return DUMMY_BLOB
    if compress is None:
        compress = compresses_integers(schema)
    parts = [_field_bytes(f, schema[f], row[f], compress) for f in blob_fields]
    if len(parts) == 1:
        return parts[0]
    return b"".join(struct.pack(">Q", len(p)) + p for p in parts)


def _split(blob, blob_fields):
    if len(blob_fields) == 1:
        return {blob_fields[0]: blob}
    pieces, pos = {}, 0
    for field in blob_fields:
        if pos + 8 > len(blob):
            raise ValueError(f"the blob ends before field {field!r}'s length")
        (n,) = struct.unpack_from(">Q", blob, pos)
        if pos + 8 + n > len(blob):
            raise ValueError(f"blob field {field!r} claims {n} bytes, {len(blob) - pos - 8} remain")
        pieces[field] = blob[pos + 8:pos + 8 + n]
        pos += 8 + n
    if pos != len(blob):
        raise ValueError(f"{len(blob) - pos} bytes follow the last blob field")
    return pieces


def _shape_of(values, shape, field):
    known = int(np.prod([d for d in shape if d != -1]))
    if -1 in shape:
        if known == 0 or values.size % known:
            raise ValueError(f"blob field {field!r} has {values.size} values, which do not fill "
                             f"shape {shape}")
        return values.reshape([values.size // known if d == -1 else d for d in shape])
    if values.size != known:
        raise ValueError(f"blob field {field!r} has {values.size} values, its shape {shape} "
                         f"needs {known}")
    return values.reshape(shape)


def decode_blob(blob, schema, blob_fields, wanted):
    """``{field: value}`` for the blob fields in ``wanted``: bytes as a uint8 array, arrays
    in the schema's type and shape."""
    if not blob_fields:
        if blob != DUMMY_BLOB:
            raise ValueError("a row without blob fields must store 4 zero bytes")
        return {}
    compress = compresses_integers(schema)
    out = {}
    for field, data in _split(blob, blob_fields).items():
        if field not in wanted:
            continue
        spec = schema[field]
        if spec["type"] == "bytes":
            out[field] = np.frombuffer(data, np.uint8).copy()
            continue
        dtype = np.dtype(spec["type"])
        if compress and spec["type"] in ("int32", "int64"):
            values = _uncompress(data, dtype)
        else:
            if len(data) % dtype.itemsize:
                raise ValueError(f"blob field {field!r} holds {len(data)} bytes, not a whole "
                                 f"number of {dtype.name} values")
            values = np.frombuffer(data, dtype.newbyteorder("<")).astype(dtype)
        out[field] = _shape_of(values, spec["shape"], field)
    return out
