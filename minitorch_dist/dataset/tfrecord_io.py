"""The TFRecord file format: record framing with CRC32C checks, and ``tf.train.Example``.

A TFRecord file is a sequence of records, each::

    uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)

(little-endian; ``masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8``). The data of each record
is a serialized ``tf.train.Example`` protobuf::

    Example  { Features features = 1; }
    Features { map<string, Feature> feature = 1; }
    Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                            Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }   FloatList { repeated float value = 1 [packed]; }
    Int64List { repeated int64 value = 1 [packed]; }

That message is small, so it is coded here directly (protobuf's wire format: varint keys,
length-delimited fields) rather than through the ``protobuf`` package and a compiled
``example.proto``. CRC32C uses the ``crc32c`` package (hardware-accelerated) when it is
installed (``pip install minitorch_dist[tfrecord]``) and an exact pure-Python table otherwise.

>>> import numpy as np, os, tempfile
>>> scratch = tempfile.TemporaryDirectory()      # removed at the end
>>> path = os.path.join(scratch.name, "a.tfrecord")
>>> write_tfrecord(path, [{"x": np.array([1, -2]), "y": np.array([0.5], np.float32)}])
>>> [(k, v.tolist()) for k, v in sorted(parse_example(next(read_records(path))).items())]
[('x', [1, -2]), ('y', [0.5])]
>>> scratch.cleanup()
"""
import mmap
import os
import struct

import numpy as np

try:                                   # optional C implementation (SSE4.2 / ARMv8 CRC)
    from crc32c import crc32c as _crc32c_c
except ImportError:                    # pragma: no cover - depends on the environment
    _crc32c_c = None

_POLY = 0x82F63B78                     # Castagnoli, reflected
_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)
del _n, _c


def crc32c_python(data):
    """CRC32C of ``data`` (bytes-like) in pure Python (about 10 MB/s).

    >>> hex(crc32c_python(b"123456789"))      # the standard check value
    '0xe3069283'
    """
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c(data):
    """CRC32C of ``data``, through the ``crc32c`` package when it is installed."""
    return _crc32c_c(bytes(data)) if _crc32c_c is not None else crc32c_python(data)


def masked_crc(data):
    """TFRecord's masked CRC32C (a CRC of data that holds CRCs is masked so it stays useful)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# ---- framing ----------------------------------------------------------------------------------
def open_file(path):
    """The bytes of ``path`` (memory-mapped: records are read on demand)."""
    if not os.path.isfile(path):
        raise ValueError(f"TFRecord file {path!r} does not exist")
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def record_offsets(path):
    """Byte offsets of the records of ``path`` (framing and length CRCs checked)."""
    data = open_file(path)
    offsets, pos, n = [], 0, len(data)
    while pos < n:
        _check_header(data, pos, path, len(offsets))
        (length,) = struct.unpack_from("<Q", data, pos)
        if pos + 16 + length > n:
            raise ValueError(f"TFRecord file {path!r}: record {len(offsets)} at byte {pos} is "
                             f"truncated (needs {length} data bytes and a CRC, {n - pos - 12} left)")
        offsets.append(pos)
        pos += 16 + length
    return np.array(offsets, dtype=np.int64)


def _check_header(data, pos, path, index):
    if len(data) - pos < 12:
        raise ValueError(f"TFRecord file {path!r}: record {index} at byte {pos} is truncated "
                         f"(only {len(data) - pos} bytes left for its 12-byte header)")
    if masked_crc(data[pos:pos + 8]) != struct.unpack_from("<I", data, pos + 8)[0]:
        raise ValueError(f"TFRecord file {path!r}: record {index} at byte {pos} has a corrupt "
                         "length (its CRC does not match): not a TFRecord file, or damaged")


def record_at(data, pos, path, index=0):
    """The payload of the record at byte ``pos`` of ``data``, both CRCs checked."""
    _check_header(data, pos, path, index)
    (length,) = struct.unpack_from("<Q", data, pos)
    end = pos + 12 + length
    if end + 4 > len(data):
        raise ValueError(f"TFRecord file {path!r}: record {index} at byte {pos} is truncated")
    payload = data[pos + 12:end]
    if masked_crc(payload) != struct.unpack_from("<I", data, end)[0]:
        raise ValueError(f"TFRecord file {path!r}: record {index} at byte {pos} is corrupt "
                         "(the CRC of its data does not match)")
    return payload


def read_records(path):
    """The payload (bytes) of every record of the TFRecord file ``path``, in order."""
    data = open_file(path)
    pos, index = 0, 0
    while pos < len(data):
        payload = record_at(data, pos, path, index)
        yield payload
        pos, index = pos + 16 + len(payload), index + 1


def count_records(path):
    """How many records ``path`` holds (framing and length CRCs checked, data not parsed)."""
    return len(record_offsets(path))


def frame_record(payload):
    """One record's bytes: header, ``payload``, CRC."""
    payload = bytes(payload)
    header = struct.pack("<Q", len(payload))
    return (header + struct.pack("<I", masked_crc(header)) + payload
            + struct.pack("<I", masked_crc(payload)))


# ---- protobuf wire format -----------------------------------------------------------------------
def _varint(value):
    value &= (1 << 64) - 1                      # negative int64: two's complement, 10 bytes
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(buf, pos, where):
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise ValueError(f"{where}: a varint runs past the end of its message")
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError(f"{where}: a varint is longer than 10 bytes")


def _fields(buf, where):
    """(field number, wire type, value) of a message; length-delimited values are memoryviews."""
    pos, n = 0, len(buf)
    while pos < n:
        key, pos = _read_varint(buf, pos, where)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos, where)
        elif wire == 2:
            length, pos = _read_varint(buf, pos, where)
            if pos + length > n:
                raise ValueError(f"{where}: field {number} runs past the end of its message")
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = bytes(buf[pos:pos + 4]), pos + 4
        elif wire == 1:
            value, pos = bytes(buf[pos:pos + 8]), pos + 8
        else:
            raise ValueError(f"{where}: unsupported protobuf wire type {wire} (field {number})")
        yield number, wire, value


def _decode_varints(buf):
    """All varints of a packed field at once (NumPy), as int64 (two's complement)."""
    b = np.frombuffer(buf, np.uint8)
    if b.size == 0:
        return np.zeros(0, np.int64)
    if b[-1] >= 0x80:
        raise ValueError("a packed int64 list ends in the middle of a varint")
    ends = np.flatnonzero(b < 0x80)
    starts = np.concatenate(([0], ends[:-1] + 1))
    group_start = np.repeat(starts, ends - starts + 1)
    shift = (7 * (np.arange(b.size) - group_start)).astype(np.uint64)
    parts = (b & 0x7F).astype(np.uint64) << shift
    return np.add.reduceat(parts, starts).view(np.int64)


def _parse_feature(buf, where):
    for number, wire, value in _fields(buf, where):
        if number == 1 and wire == 2:          # BytesList
            return [bytes(v) for n, w, v in _fields(value, where) if n == 1 and w == 2]
        if number == 2 and wire == 2:          # FloatList: packed, or one fixed32 per value
            parts = [np.frombuffer(v, "<f4") for n, w, v in _fields(value, where) if n == 1]
            return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)
        if number == 3 and wire == 2:          # Int64List: packed, or one varint per value
            parts = [_decode_varints(v) if w == 2 else np.array([v], np.uint64).view(np.int64)
                     for n, w, v in _fields(value, where) if n == 1]
            return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    raise ValueError(f"{where}: a Feature has no bytes_list, float_list or int64_list")


def parse_example(payload, where="tf.train.Example"):
    """``{name: values}`` of a serialized Example: int64 lists and float32 lists as 1-D arrays,
    bytes lists as lists of ``bytes``."""
    features = {}
    for number, wire, value in _fields(memoryview(payload), where):
        if number != 1 or wire != 2:
            continue                            # unknown Example fields are skipped, as protobuf does
        for n, w, entry in _fields(value, where):
            if n != 1 or w != 2:
                continue
            name, feature = None, None
            for en, ew, ev in _fields(entry, where):
                if en == 1 and ew == 2:
                    name = bytes(ev).decode("utf-8")
                elif en == 2 and ew == 2:
                    feature = ev
            if name is None or feature is None:
                raise ValueError(f"{where}: a feature map entry lacks its name or its value")
            features[name] = _parse_feature(feature, f"{where}, feature {name!r}")
    return features


def _length_delimited(number, payload):
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def encode_feature(value):
    """A Feature message for ``value``: ints -> int64_list, floats -> float_list,
    bytes / str (or a list of them) -> bytes_list."""
    if isinstance(value, (bytes, str)):
        value = [value]
    if isinstance(value, list) and value and all(isinstance(v, (bytes, str)) for v in value):
        items = b"".join(_length_delimited(1, v.encode() if isinstance(v, str) else v) for v in value)
        return _length_delimited(1, items)
    array = np.asarray(value).ravel()
    if array.dtype.kind in "iub":
        packed = b"".join(_varint(int(v)) for v in array.astype(np.int64))
        return _length_delimited(3, _length_delimited(1, packed) if array.size else b"")
    if array.dtype.kind == "f":
        packed = array.astype("<f4").tobytes()
        return _length_delimited(2, _length_delimited(1, packed) if array.size else b"")
    raise TypeError(f"cannot store {array.dtype} values in a tf.train.Feature; use ints, floats "
                    "or bytes")


def encode_example(features):
    """A serialized Example from ``{name: values}`` (see :func:`encode_feature`)."""
    entries = b"".join(
        _length_delimited(1, _length_delimited(1, name.encode()) + _length_delimited(2, encode_feature(v)))
        for name, v in features.items())
    return _length_delimited(1, entries)


def write_tfrecord(path, examples):
    """Write ``examples`` (dicts ``{name: values}``) to the TFRecord file ``path``, one record
    each, in TensorFlow's format (``tf.io.TFRecordWriter`` + ``tf.train.Example``).

    The records go to ``path + ".part"``, renamed to ``path`` only when all are written (as
    checkpoints are): a writer that fails or is killed never leaves a shorter file that reads
    as a complete one."""
    path = os.fspath(path)
    partial = path + ".part"
    try:
        with open(partial, "wb") as f:
            for features in examples:
                if not isinstance(features, dict) or not features:
                    raise TypeError(f"write_tfrecord: every example must be a non-empty dict of "
                                    f"features, got {features!r}")
                f.write(frame_record(encode_example(features)))
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        if os.path.exists(partial):
            os.remove(partial)
        raise
    os.replace(partial, path)
