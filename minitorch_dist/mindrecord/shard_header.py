"""The header of a MindSpore MindRecord shard file: read, check, and write it.

A shard file starts with a uint64 (little-endian) length and that many bytes of JSON; the
header region is ``header_size`` bytes, then page ``k`` starts at ``header_size + k *
page_size``. The file ends where its last page's ``page_size`` bytes end, so its size is
known from the header. The JSON (MindSpore 2.x, ``"version": "3.0"``) holds::

    header_size, index_fields ([{"index_field", "schema_id"}] or null), page (a list of
    pages), page_size, compression_size, schema ([{"blob_fields", "desc", "schema"}]),
    shard_addresses (file names of the set), shard_id, statistics, version

and each page ``{"end_row_id", "page_id", "page_size", "page_type" ("BLOB_DATA" |
"RAW_DATA"), "page_type_id", "row_group_ids" ([{"id", "offset"}]), "shard_id",
"start_row_id"}``. ``read_header`` checks all of it (types, ranges, page numbering, the
file size) and raises ``ValueError`` naming the file on the first thing that is wrong.
"""
import json
import struct

FIELD_TYPES = ("int32", "int64", "float32", "float64", "string", "bytes")
MIN_HEADER, MAX_HEADER = 16 * 1024, 128 * 1024 * 1024
MIN_PAGE, MAX_PAGE = 32 * 1024, 256 * 1024 * 1024
VERSION = "3.0"


def _need(cond, path, what):
    if not cond:
        raise ValueError(f"MindRecord file {path!r} is damaged or not a MindRecord file: {what}")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _check_schema(schema, path):
    _need(isinstance(schema, dict) and schema, path, "its schema is not a non-empty object")
    for name, spec in schema.items():
        _need(isinstance(spec, dict) and spec.get("type") in FIELD_TYPES
              and set(spec) <= {"type", "shape"}, path, f"field {name!r} has the spec {spec!r}")
        if "shape" in spec:
            shape = spec["shape"]
            _need(isinstance(shape, list) and shape and all(_is_int(d) and (d > 0 or d == -1)
                                                            for d in shape)
                  and shape.count(-1) <= 1 and spec["type"] not in ("string", "bytes"),
                  path, f"field {name!r} has the shape {shape!r}")


def _check_page(page, index, path, header):
    keys = {"end_row_id", "page_id", "page_size", "page_type", "page_type_id", "row_group_ids",
            "shard_id", "start_row_id"}
    _need(isinstance(page, dict) and set(page) == keys, path, f"page entry {index} is malformed")
    _need(all(_is_int(page[k]) and page[k] >= 0 for k in keys - {"page_type", "row_group_ids"}),
          path, f"page {index} has a negative or non-integer number")
    _need(page["page_id"] == index, path, f"page entry {index} has page_id {page['page_id']}")
    _need(page["page_type"] in ("BLOB_DATA", "RAW_DATA"), path,
          f"page {index} has the type {page['page_type']!r}")
    _need(page["page_size"] <= header["page_size"], path,
          f"page {index} holds {page['page_size']} bytes, more than the page size")
    _need(page["start_row_id"] <= page["end_row_id"], path, f"page {index}'s rows run backwards")
    groups = page["row_group_ids"]
    _need(isinstance(groups, list) and all(
        isinstance(g, dict) and set(g) == {"id", "offset"} and _is_int(g["id"]) and _is_int(g["offset"])
        and g["id"] >= 0 and 0 <= g["offset"] <= page["page_size"] for g in groups),
        path, f"page {index} has malformed row groups")


def parse_header(data, path, file_size):
    """The checked header dict from the file's first bytes ``data`` (at least the header)."""
    _need(len(data) >= 8, path, f"it has {file_size} bytes, fewer than a header's length field")
    (length,) = struct.unpack_from("<Q", data)
    _need(length + 8 <= min(len(data), MAX_HEADER), path,
          f"its header length field says {length} bytes")
    try:
        header = json.loads(bytes(data[8:8 + length]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"MindRecord file {path!r} is damaged or not a MindRecord file: its "
                         f"header is not valid JSON ({err})") from None
    keys = {"header_size", "index_fields", "page", "page_size", "compression_size", "schema",
            "shard_addresses", "shard_id", "statistics", "version"}
    _need(isinstance(header, dict) and keys <= set(header), path,
          f"its header lacks {sorted(keys - set(header)) if isinstance(header, dict) else keys}")
    _need(header["version"] == VERSION, path, f"header version {header['version']!r} "
          f"(this reader knows MindSpore's {VERSION!r})")
    _need(_is_int(header["header_size"]) and MIN_HEADER <= header["header_size"] <= MAX_HEADER
          and header["header_size"] >= length + 8, path, f"header_size {header['header_size']!r}")
    _need(_is_int(header["page_size"]) and MIN_PAGE <= header["page_size"] <= MAX_PAGE, path,
          f"page_size {header['page_size']!r}")
    _need(_is_int(header["compression_size"]) and header["compression_size"] >= 0, path,
          "compression_size")
    schemas = header["schema"]
    _need(isinstance(schemas, list) and len(schemas) == 1 and isinstance(schemas[0], dict)
          and {"blob_fields", "schema"} <= set(schemas[0]), path, "it does not hold one schema")
    schema = schemas[0]["schema"]
    _check_schema(schema, path)
    blob = schemas[0]["blob_fields"]
    expected_blob = sorted(n for n, s in schema.items() if s["type"] == "bytes" or "shape" in s)
    _need(blob == expected_blob, path, f"blob_fields {blob!r} do not match the schema "
          f"(expected {expected_blob})")
    names = header["shard_addresses"]
    _need(isinstance(names, list) and names and all(isinstance(n, str) and n for n in names),
          path, "shard_addresses is not a list of file names")
    _need(_is_int(header["shard_id"]) and 0 <= header["shard_id"] < len(names), path,
          f"shard_id {header['shard_id']!r} for {len(names)} shard files")
    _check_index_fields(header["index_fields"], schema, path)
    pages = header["page"]
    _need(isinstance(pages, list), path, "its page list is not a list")
    for i, page in enumerate(pages):
        _check_page(page, i, path, header)
        _need(page["shard_id"] == header["shard_id"], path, f"page {i} belongs to another shard")
    end = header["header_size"] + (header["page_size"] * (len(pages) - 1) + pages[-1]["page_size"]
                                   if pages else 0)
    allowed = (end, length + 8) if not pages else (end,)    # MindSpore's empty shard stops at its JSON
    _need(file_size in allowed, path, f"it has {file_size} bytes; its header says {end} (the file was "
          "truncated, extended, or its writer did not commit)")
    return header


def _check_index_fields(fields, schema, path):
    if fields is None:
        return
    _need(isinstance(fields, list), path, "index_fields is not a list")
    for entry in fields:
        _need(isinstance(entry, dict) and entry.get("schema_id") == 0
              and entry.get("index_field") in schema, path, f"index field {entry!r}")
        spec = schema[entry["index_field"]]
        _need("shape" not in spec and spec["type"] != "bytes", path,
              f"index field {entry['index_field']!r} is not a scalar field")


def dump_header(header):
    """The header bytes (length + JSON) in MindSpore's key order and spacing."""
    order = ("header_size", "index_fields", "page", "page_size", "compression_size", "schema",
             "shard_addresses", "shard_id", "statistics", "version")
    parts = [json.dumps(k) + ":" + json.dumps(header[k], sort_keys=True, separators=(",", ":"),
                                              ensure_ascii=False) for k in order]
    data = ("{" + ",".join(parts) + "}").encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def page_entry(page_id, shard_id, page_type, type_id, start_row, end_row, groups, size):
    """One page of the header's list (keys sorted, as MindSpore writes them)."""
    return {"end_row_id": end_row, "page_id": page_id, "page_size": size, "page_type": page_type,
            "page_type_id": type_id, "row_group_ids": [{"id": g, "offset": o} for g, o in groups],
            "shard_id": shard_id, "start_row_id": start_row}
