"""One MindSpore MindRecord shard file, opened for random access to its rows.

Layout (see ``shard_header`` for the header): blob pages hold, per row, a uint64 length and
the row's blob (``blob_codec``); raw pages hold, per row, a uint64 length and the row's
scalar fields as a MessagePack map (``msgpack_codec``). Rows are grouped: row group ``g`` is
the rows of blob page ``g`` (``page_type_id``), whose raw entries lie consecutively in a
raw page from the offset that page's ``row_group_ids`` gives for ``g``.

The format has no checksum. Opening walks every page and checks each length against the page,
then compares the result with the SQLite index (``shard_index``); reading a row checks its
map against the schema and its index-field values against the index. What stays undetectable:
a changed byte inside a blob, or inside a scalar field that is not an index field, that
still decodes to a valid value of the field's type.
"""
import mmap
import os
import struct

import numpy as np

from . import msgpack_codec
from .blob_codec import decode_blob
from .shard_header import parse_header
from .shard_index import read_index

DUMMY_FIELD = "id"        # MindSpore's raw map for a schema with only blob fields: {"id": 0}


def _both_nan(value, stored):
    """SQLite keeps a NaN index value as NULL."""
    return isinstance(value, float) and value != value and (stored is None or stored != stored)


class ShardFile:
    """A committed shard file: ``schema``, ``header``, ``len()`` rows, ``row(i, columns)``."""

    def __init__(self, path):
        if not os.path.isfile(path):
            raise ValueError(f"MindRecord file {path!r} does not exist")
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self._data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        if self._data[:8] == b"MTDMREC1":
            raise ValueError(f"MindRecord file {path!r} is in the format of earlier minitorch_dist "
                             "versions, which now write MindSpore's own format; write the data again "
                             "with minitorch_dist.mindrecord.FileWriter")
        claimed = struct.unpack_from("<Q", self._data)[0] if size >= 8 else 0
        self.header = parse_header(self._data[:min(size, 8 + min(claimed, 1 << 27))], path, size)
        entry = self.header["schema"][0]
        self.schema, self.blob_fields = entry["schema"], entry["blob_fields"]
        self.raw_fields = sorted(set(self.schema) - set(self.blob_fields))
        self.index_fields = [e["index_field"] for e in self.header["index_fields"] or ()]
        self.locations = self._walk_pages()
        locations, self.index_values = read_index(path, self.index_fields)
        if locations != self.locations:
            raise ValueError(f"MindRecord index {path + '.db'!r} does not match the pages of "
                             f"{path!r} ({len(locations)} indexed rows, {len(self.locations)} "
                             "in the pages, or different offsets)")

    def _damaged(self, what):
        return ValueError(f"MindRecord file {self.path!r} is damaged: {what}")

    def _page_start(self, page):
        return self.header["header_size"] + page["page_id"] * self.header["page_size"]

    def _entries(self, page, offset, count):
        """``count`` (start, end) byte ranges of length-prefixed entries from ``offset``."""
        base, limit = self._page_start(page), page["page_size"]
        out = []
        for _ in range(count):
            if offset + 8 > limit:
                raise self._damaged(f"page {page['page_id']} ends inside an entry's length")
            (n,) = struct.unpack_from("<Q", self._data, base + offset)
            if n > limit - offset - 8:
                raise self._damaged(f"an entry of page {page['page_id']} claims {n} bytes")
            out.append((offset, offset + 8 + n))
            offset += 8 + n
        return out

    def _walk_pages(self):
        """The index's location tuple of every row, from the pages alone."""
        pages = self.header["page"]
        blobs = [p for p in pages if p["page_type"] == "BLOB_DATA"]
        raws = [p for p in pages if p["page_type"] == "RAW_DATA"]
        if [p["page_type_id"] for p in blobs] != list(range(len(blobs))) or \
                [p["page_type_id"] for p in raws] != list(range(len(raws))):
            raise self._damaged("its pages are not numbered in order")
        groups = [(raw, g["id"], g["offset"]) for raw in raws for g in raw["row_group_ids"]]
        if [g for _, g, _ in groups] != list(range(len(blobs))):
            raise self._damaged("its raw pages do not list one row group per blob page, in order")
        locations, next_row = [], 0
        for (raw, group, offset), blob in zip(groups, blobs):
            if blob["start_row_id"] != next_row:
                raise self._damaged(f"blob page {blob['page_id']} starts at row {blob['start_row_id']}")
            count = blob["end_row_id"] - blob["start_row_id"]
            blob_entries = self._entries(blob, 0, count)
            if (blob_entries[-1][1] if blob_entries else 0) != blob["page_size"]:
                raise self._damaged(f"blob page {blob['page_id']}'s rows do not fill its size")
            raw_entries = self._entries(raw, offset, count)
            for k, ((r0, r1), (b0, b1)) in enumerate(zip(raw_entries, blob_entries)):
                locations.append((next_row + k, raw["page_id"], r0, r1, group, blob["page_id"], b0, b1))
            next_row += count
        self._check_raw_pages_filled(raws, locations)
        return locations

    def _check_raw_pages_filled(self, raws, locations):
        ends = {}
        for loc in locations:
            ends[loc[1]] = max(ends.get(loc[1], 0), loc[3])
        for raw in raws:
            if ends.get(raw["page_id"], 0) != raw["page_size"]:
                raise self._damaged(f"raw page {raw['page_id']}'s rows do not fill its size")

    def __len__(self):
        return len(self.locations)

    def _bytes(self, page_id, start, end):
        base = self.header["header_size"] + page_id * self.header["page_size"]
        return bytes(self._data[base + start + 8:base + end])

    def raw_fields_of(self, index):
        """Row ``index``'s scalar fields as a dict, checked against the schema and the index."""
        _, raw_page, r0, r1, _, _, _, _ = self.locations[index]
        try:
            row = msgpack_codec.unpack(self._bytes(raw_page, r0, r1))
        except ValueError as err:
            raise self._damaged(f"row {index}'s fields do not decode ({err})") from None
        expected = self.raw_fields or [DUMMY_FIELD]
        if sorted(row) != expected:
            raise self._damaged(f"row {index} has the fields {sorted(row)}, the schema {expected}")
        for field, stored in zip(self.index_fields, self.index_values[index]):
            if row[field] != stored and not _both_nan(row[field], stored):
                raise self._damaged(f"row {index}'s {field!r} is {row[field]!r}, its index says "
                                    f"{stored!r}")
        return row

    def _scalar(self, field, value, index):
        kind = self.schema[field]["type"]
        ok = (isinstance(value, str) if kind == "string" else
              isinstance(value, int) and not isinstance(value, bool) if kind.startswith("int") else
              isinstance(value, (int, float)) and not isinstance(value, bool))
        if ok and kind.startswith("int"):
            info = np.iinfo(kind)
            ok = info.min <= value <= info.max
        if ok and kind == "float32" and np.isfinite(value):
            ok = abs(value) <= np.finfo(np.float32).max
        if not ok:
            raise self._damaged(f"row {index}'s {field!r} ({kind}) holds {value!r}")
        return np.array(value) if kind == "string" else np.array(value, dtype=kind)

    def row(self, index, columns):
        """Row ``index`` as a tuple of arrays for ``columns`` (names, in order)."""
        raw = self.raw_fields_of(index)
        values = {f: self._scalar(f, raw[f], index) for f in columns if f in raw and f in self.schema}
        wanted = [c for c in columns if c in self.blob_fields]
        if wanted or not self.blob_fields:
            _, _, _, _, _, blob_page, b0, b1 = self.locations[index]
            try:
                values.update(decode_blob(self._bytes(blob_page, b0, b1), self.schema,
                                          self.blob_fields, wanted))
            except ValueError as err:
                raise self._damaged(f"row {index}'s blob does not decode ({err})") from None
        return tuple(values[c] for c in columns)
