"""Lay one shard's rows out in MindSpore's pages and finish the file with its header and index.

Rows go to the current blob page and the current raw page. A row that does not fit the blob
page's or the raw page's remaining space starts a new row group, i.e. a new blob page
(and a new raw page when the raw page is the one that is full), as MindSpore's writer does.
Page ``k`` lies at ``header_size + k * page_size``; pages are numbered in the order they are
opened. Everything is written to ``name.part`` files, renamed only by ``finish``: a writer
that dies leaves no file that looks complete.
"""
import os
import shutil
import struct

from .shard_header import dump_header, page_entry
from .shard_index import write_index


class _Page:
    def __init__(self, page_id, kind, type_id, start_row):
        self.page_id, self.kind, self.type_id = page_id, kind, type_id
        self.start_row, self.end_row, self.used, self.groups = start_row, start_row, 0, []


class ShardPages:
    """The pages of shard ``shard_id`` being written to ``path`` (see the module docstring)."""

    def __init__(self, path, shard_id, header_size, page_size):
        self.path, self.shard_id = path, shard_id
        self.header_size, self.page_size = header_size, page_size
        self._file = open(path + ".part", "w+b")
        self.pages, self._blob, self._raw = [], None, None
        self.locations, self.index_values = [], []
        self.compression_size = 0

    @classmethod
    def resume(cls, shard):
        """Continue a committed ``ShardFile``: its pages, rows and index, in a ``.part`` copy."""
        header = shard.header
        pages = cls(shard.path, header["shard_id"], header["header_size"], header["page_size"])
        with open(shard.path, "rb") as src:
            shutil.copyfileobj(src, pages._file)
        for entry in header["page"]:
            page = _Page(entry["page_id"], entry["page_type"], entry["page_type_id"], entry["start_row_id"])
            page.end_row, page.used = entry["end_row_id"], entry["page_size"]
            if page.kind == "RAW_DATA":
                page.groups = [(g["id"], g["offset"]) for g in entry["row_group_ids"]]
                pages._raw = page
            else:
                pages._blob = page
            pages.pages.append(page)
        pages.locations = list(shard.locations)
        pages.index_values = list(shard.index_values)
        return pages

    def _open_page(self, kind):
        same = [p for p in self.pages if p.kind == kind]
        page = _Page(len(self.pages), kind, len(same), len(self.locations))
        self.pages.append(page)
        return page

    def _put(self, page, data):
        self._file.seek(self.header_size + page.page_id * self.page_size + page.used)
        self._file.write(struct.pack("<Q", len(data)) + data)
        start = page.used
        page.used += 8 + len(data)
        return start, page.used

    def add(self, raw, blob, index_values, where):
        """Append one row (its MessagePack raw bytes and its blob)."""
        raw_size, blob_size = 8 + len(raw), 8 + len(blob)
        if max(raw_size, blob_size) > self.page_size:
            raise ValueError(f"{where}: the row needs {max(raw_size, blob_size)} bytes, more than the "
                             f"page size {self.page_size}; raise it with FileWriter.set_page_size")
        raw_full = self._raw is None or self._raw.used + raw_size > self.page_size
        if self._blob is None or self._blob.used + blob_size > self.page_size or raw_full:
            self._blob = self._open_page("BLOB_DATA")
            if raw_full:
                self._raw = self._open_page("RAW_DATA")
            self._raw.groups.append((self._blob.type_id, self._raw.used))
        row = len(self.locations)
        b0, b1 = self._put(self._blob, blob)
        r0, r1 = self._put(self._raw, raw)
        self._blob.end_row = row + 1
        self.locations.append((row, self._raw.page_id, r0, r1, self._blob.type_id,
                               self._blob.page_id, b0, b1))
        self.index_values.append(index_values)

    def header(self, meta):
        """This shard's header dict; ``meta`` holds the fields all shards share."""
        pages = [page_entry(p.page_id, self.shard_id, p.kind, p.type_id,
                            p.start_row if p.kind == "BLOB_DATA" else 0,
                            p.end_row if p.kind == "BLOB_DATA" else 0,
                            p.groups if p.kind == "RAW_DATA" else [(0, 0)], p.used)
                 for p in self.pages]
        return dict(meta, page=pages, shard_id=self.shard_id, header_size=self.header_size,
                    page_size=self.page_size)

    def write_header(self, header):
        """Write the header and cut the file to the end of its last page (still ``.part``)."""
        data = dump_header(header)
        if len(data) > self.header_size:
            raise ValueError(f"FileWriter.commit: the header of {self.path!r} needs {len(data)} "
                             f"bytes, more than header_size {self.header_size}; raise it with "
                             "FileWriter.set_header_size")
        end = self.header_size
        if self.pages:
            end += self.pages[-1].page_id * self.page_size + self.pages[-1].used
        self._file.seek(0)
        self._file.write(data)
        self._file.truncate(end)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()

    def finish(self, schema, index_fields):
        """Write the index, then give both files their real names."""
        write_index(self.path, schema, index_fields, self.locations, self.index_values)
        os.replace(self.path + ".part", self.path)

    def abandon(self):
        """Close and remove the partial file (a failed or abandoned writer)."""
        if not self._file.closed:
            self._file.close()
        for leftover in (self.path + ".part", self.path + ".db.part"):
            if os.path.exists(leftover):
                os.remove(leftover)
