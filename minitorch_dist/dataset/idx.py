"""The IDX file format of MNIST: read and write, plain or gzip-compressed.

Layout (all big-endian): two zero bytes, a type code, the number of dimensions ``d``,
then ``d`` uint32 sizes, then the elements in C order.
"""
import gzip
import os
import struct
import zlib

import numpy as np

# IDX type code -> big-endian element type
IDX_TYPES = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
             0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
_CODES = {dt.newbyteorder("="): code for code, dt in IDX_TYPES.items()}


def _read_bytes(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":            # gzip magic, whatever the file is called
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise ValueError(f"IDX file {path} is a damaged gzip file: {err}") from None
    return raw


def read_idx(path):
    """The array stored in the IDX file ``path`` (native byte order, read-only).

    Raises ValueError naming the file when the magic number, the header or the data size
    is wrong (a truncated download, an HTML error page saved under the MNIST name, ...).
    """
    raw = _read_bytes(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in IDX_TYPES:
        raise ValueError(f"{path} is not an IDX file: bad magic number {raw[:4].hex() or '(empty)'} "
                         "(expected 0000 followed by a type code and the number of dimensions)")
    dtype, ndim = IDX_TYPES[raw[2]], raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"IDX file {path} is truncated: its header needs {header} bytes, "
                         f"the file has {len(raw)}")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        problem = "truncated" if len(raw) - header < expected else "longer than its header says"
        raise ValueError(f"IDX file {path} is {problem}: shape {shape} needs {expected} data bytes, "
                         f"found {len(raw) - header}")
    array = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=False)


def write_idx(path, array, compress=None):
    """Write ``array`` to ``path`` in IDX format (gzip if ``compress`` or the name ends ``.gz``).

    >>> import numpy as np, os, tempfile
    >>> scratch = tempfile.TemporaryDirectory()      # removed at the end
    >>> path = os.path.join(scratch.name, "x-idx1-ubyte")
    >>> write_idx(path, np.array([3, 1, 4], dtype=np.uint8))
    >>> read_idx(path).tolist()
    [3, 1, 4]
    >>> scratch.cleanup()
    """
    array = np.asarray(array)
    native = array.dtype.newbyteorder("=")
    if native not in _CODES:
        raise TypeError(f"write_idx: IDX stores uint8, int8, int16, int32, float32 or float64, "
                        f"got {array.dtype}")
    if array.ndim > 255:
        raise ValueError(f"write_idx: at most 255 dimensions, got {array.ndim}")
    code = _CODES[native]
    header = struct.pack(">BBBB", 0, 0, code, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    data = np.ascontiguousarray(array, dtype=IDX_TYPES[code])
    if compress is None:
        compress = os.fspath(path).endswith(".gz")
    with (gzip.GzipFile(path, "wb", mtime=0) if compress else open(path, "wb")) as f:
        f.write(header)
        f.write(memoryview(data.reshape(-1)).cast("B"))   # no extra copy of the data
