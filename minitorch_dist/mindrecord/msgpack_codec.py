"""The MessagePack subset a MindRecord raw page holds: one map of scalar fields per row.

MindSpore serialises each row's non-blob fields with nlohmann::json's ``to_msgpack``. That
encoder picks the smallest form of each value: integers as fixint/int8..int64/uint8..uint64,
floats as float32 when the double converts to float32 and back unchanged (else float64),
text as fixstr/str8/16/32, maps with their keys in sorted order. ``pack`` writes the same
bytes, so rows written here are byte-identical to MindSpore's; ``unpack`` reads any valid
encoding of these types and raises ``ValueError`` on anything else (bad bytes, trailing data).
"""
import struct


def _pack_int(v):
    if v >= 0:
        if v < 0x80:
            return bytes([v])
        for limit, code, fmt in ((0xFF, 0xCC, ">B"), (0xFFFF, 0xCD, ">H"),
                                 (0xFFFFFFFF, 0xCE, ">I"), (0xFFFFFFFFFFFFFFFF, 0xCF, ">Q")):
            if v <= limit:
                return bytes([code]) + struct.pack(fmt, v)
    else:
        if v >= -32:
            return struct.pack(">b", v)
        for limit, code, fmt in ((-0x80, 0xD0, ">b"), (-0x8000, 0xD1, ">h"),
                                 (-0x80000000, 0xD2, ">i"), (-0x8000000000000000, 0xD3, ">q")):
            if v >= limit:
                return bytes([code]) + struct.pack(fmt, v)
    raise ValueError(f"the integer {v} does not fit 64 bits")


def _pack_float(v):
    try:
        single = struct.pack(">f", v)
    except OverflowError:              # beyond float32's range
        single = None
    if single is not None and struct.unpack(">f", single)[0] == v:     # NaN stays float64
        return b"\xca" + single
    return b"\xcb" + struct.pack(">d", v)


def _pack_str(text):
    data = text.encode("utf-8")
    n = len(data)
    if n < 32:
        head = bytes([0xA0 | n])
    elif n <= 0xFF:
        head = b"\xd9" + bytes([n])
    elif n <= 0xFFFF:
        head = b"\xda" + struct.pack(">H", n)
    else:
        head = b"\xdb" + struct.pack(">I", n)
    return head + data


def pack(row):
    """The bytes of ``row`` (a dict of str -> int/float/str), keys sorted as nlohmann does."""
    n = len(row)
    out = [bytes([0x80 | n]) if n < 16 else b"\xde" + struct.pack(">H", n)]
    for key in sorted(row):
        value = row[key]
        out.append(_pack_str(key))
        if isinstance(value, str):
            out.append(_pack_str(value))
        elif isinstance(value, bool):
            out.append(b"\xc3" if value else b"\xc2")
        elif isinstance(value, int):
            out.append(_pack_int(value))
        elif isinstance(value, float):
            out.append(_pack_float(value))
        else:
            raise ValueError(f"field {key!r}: cannot store a {type(value).__name__} in a raw page")
    return b"".join(out)


_FIXED = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i",
          0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
_STR_LEN = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I"}
_MAP_LEN = {0xDE: ">H", 0xDF: ">I"}


class _Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError("the MessagePack data ends inside a value")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def number(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def value(self):
        code = self.take(1)[0]
        if code < 0x80 or code >= 0xE0:
            return code if code < 0x80 else code - 0x100
        if 0xA0 <= code <= 0xBF or code in _STR_LEN:
            n = code & 0x1F if code <= 0xBF else self.number(_STR_LEN[code])
            try:
                return bytes(self.take(n)).decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError("a text value is not valid UTF-8") from None
        if code in _FIXED:
            return self.number(_FIXED[code])
        if code in (0xC2, 0xC3):
            return code == 0xC3
        if code == 0xC0:
            return None
        raise ValueError(f"unexpected MessagePack type byte 0x{code:02x}")

    def row(self):
        code = self.take(1)[0]
        if 0x80 <= code <= 0x8F:
            n = code & 0x0F
        elif code in _MAP_LEN:
            n = self.number(_MAP_LEN[code])
        else:
            raise ValueError(f"a row must be a MessagePack map, found type byte 0x{code:02x}")
        row = {}
        for _ in range(n):
            key = self.value()
            if not isinstance(key, str) or key in row:
                raise ValueError(f"bad or repeated field name {key!r}")
            row[key] = self.value()
        return row


def unpack(data):
    """The dict encoded in ``data`` (bytes); ``ValueError`` unless it is exactly one map."""
    reader = _Reader(data)
    row = reader.row()
    if reader.pos != len(data):
        raise ValueError(f"{len(data) - reader.pos} bytes follow the row's map")
    return row
