"""The SQLite index beside each MindRecord shard file (``name.mindrecord.db``), as MindSpore's
``ShardIndexGenerator`` writes it.

Table ``SHARD_NAME(NAME)`` holds the shard file's name; table ``INDEXES`` holds one row per
record: ``ROW_ID``, where its raw and blob bytes lie (``PAGE_ID_RAW``, ``PAGE_OFFSET_RAW``,
``PAGE_OFFSET_RAW_END``, ``ROW_GROUP_ID``, ``PAGE_ID_BLOB``, ``PAGE_OFFSET_BLOB``,
``PAGE_OFFSET_BLOB_END``; offsets within the page, length prefixes included) and, per index
field ``k`` (``add_index``, or every scalar field when none was added), ``INC_k`` (0) and
``<field>_0`` with the field's value. Reading compares all of it with the pages, so a damaged
page table, index or index-field value is caught, naming the file.
"""
import os
import sqlite3

LOCATION = ("ROW_ID", "PAGE_ID_RAW", "PAGE_OFFSET_RAW", "PAGE_OFFSET_RAW_END", "ROW_GROUP_ID",
            "PAGE_ID_BLOB", "PAGE_OFFSET_BLOB", "PAGE_OFFSET_BLOB_END")
_SQL_TYPE = {"int32": "INTEGER", "int64": "INTEGER", "float32": "REAL", "float64": "REAL",
             "string": "TEXT"}


def column_name(field):
    return f"{field}_0"


def read_index(shard_path, index_fields):
    """``(locations, values)``: the location tuples by row id and, per row, the index fields'
    values; ``ValueError`` naming the ``.db`` file when it is missing or not the shard's."""
    db_path = shard_path + ".db"
    if not os.path.isfile(db_path):
        raise ValueError(f"MindRecord index {db_path!r} is missing: MindSpore writes it beside "
                         f"{os.path.basename(shard_path)!r} and both are needed")
    fields = [column_name(f) for f in index_fields]
    try:
        with open(db_path, "rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                raise sqlite3.DatabaseError("not an SQLite database")
        db = sqlite3.connect(f"file:{db_path}?mode=ro&immutable=1", uri=True)
        try:
            names = db.execute("SELECT NAME FROM SHARD_NAME").fetchall()
            query = f"SELECT {', '.join(LOCATION + tuple(fields))} FROM INDEXES ORDER BY ROW_ID"
            rows = db.execute(query).fetchall()
        finally:
            db.close()
    except (sqlite3.Error, UnicodeDecodeError) as err:     # a damaged TEXT value fails to decode
        raise ValueError(f"MindRecord index {db_path!r} is damaged or not MindSpore's index "
                         f"({err})") from None
    if names != [(os.path.basename(shard_path),)]:
        raise ValueError(f"MindRecord index {db_path!r} names the shard file {names!r}, not "
                         f"{os.path.basename(shard_path)!r}")
    n = len(LOCATION)
    return [tuple(r[:n]) for r in rows], [tuple(r[n:]) for r in rows]


def write_index(shard_path, schema, index_fields, locations, values):
    """Write ``shard_path + ".db"`` (to a temporary name, renamed when complete)."""
    db_path = shard_path + ".db"
    tmp = db_path + ".part"
    if os.path.exists(tmp):
        os.remove(tmp)
    columns = ", ".join(f"{c} INT NOT NULL" for c in LOCATION)
    extra = "".join(f", INC_{k} INT, {column_name(f)} {_SQL_TYPE[schema[f]['type']]}"
                    for k, f in enumerate(index_fields))
    key = ", ".join(["ROW_ID"] + [f"INC_{k}" for k in range(len(index_fields))])
    names = list(LOCATION) + [x for k, f in enumerate(index_fields) for x in (f"INC_{k}", column_name(f))]
    db = sqlite3.connect(tmp)
    try:
        db.execute(f"CREATE TABLE INDEXES({columns}{extra}, PRIMARY KEY({key}))")
        db.execute("CREATE TABLE SHARD_NAME(NAME TEXT NOT NULL)")
        db.execute("INSERT INTO SHARD_NAME (NAME) VALUES (?)", (os.path.basename(shard_path),))
        marks = ", ".join("?" * len(names))
        db.executemany(f"INSERT INTO INDEXES ({', '.join(names)}) VALUES ({marks})",
                       [tuple(loc) + tuple(x for v in vals for x in (0, v))
                        for loc, vals in zip(locations, values)])
        db.commit()
    finally:
        db.close()
    os.replace(tmp, db_path)
