"""``ds.Schema``: the columns a file-backed source yields (name, dtype, shape), as in MindSpore.

``TFRecordDataset`` and ``GeneratorDataset`` take one through ``schema=``. The JSON form is
MindSpore's: ``{"datasetType": "TF", "numRows": n, "columns": {name: {"type": "int32",
"rank": 1, "shape": [2]}}}``; a schema file holds that text.

>>> import minitorch_dist.dataset as ds, minitorch_dist.common.dtype as mstype
>>> schema = ds.Schema()
>>> schema.add_column("feat_ids", de_type=mstype.int32)
>>> schema.add_column("label", de_type="float32", shape=[1])
>>> [(c["name"], c["type"], c["shape"]) for c in schema.columns]
[('feat_ids', 'int32', None), ('label', 'float32', [1])]
"""
import json
import os

import numpy as np

# The element types MindSpore's data engine names; "string" columns hold text.
DE_TYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
            "float16", "float32", "float64", "string")


def de_type_name(de_type, what="de_type"):
    """The engine's name (``"int32"``) for a dtype given as ``mstype.int32``, a NumPy dtype or
    a name; ``"string"`` for text (``str``/``bytes``/``mstype.string``).

    >>> de_type_name(np.float32), de_type_name("int64"), de_type_name(str)
    ('float32', 'int64', 'string')
    """
    if isinstance(de_type, str):
        name = {"bool_": "bool", "str": "string", "bytes": "string"}.get(de_type, de_type)
    elif de_type in (str, bytes, np.str_, np.bytes_):
        name = "string"
    else:
        try:
            dtype = np.dtype(de_type)
        except TypeError:
            raise TypeError(f"{what}: cannot interpret {de_type!r} as a data type; expected e.g. "
                            f"mstype.int32 or one of {list(DE_TYPES)}") from None
        name = "string" if dtype.kind in "SU" else dtype.name
    if name not in DE_TYPES:
        raise ValueError(f"{what}: unsupported data type {de_type!r}; expected one of {list(DE_TYPES)}")
    return name


def numpy_dtype(name):
    """The NumPy dtype a column of engine type ``name`` holds (text: ``np.str_``)."""
    return np.dtype(np.str_) if name == "string" else np.dtype(name)


def check_shape(shape, what):
    """``None`` or a list of positive ints with at most one -1 (a dimension read from the data)."""
    if shape is None:
        return None
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise TypeError(f"{what}: shape must be a list of ints, got {shape!r}")
    dims = list(shape)
    if not dims or any(isinstance(d, bool) or not isinstance(d, (int, np.integer))
                       or (d < 1 and d != -1) for d in dims):
        raise ValueError(f"{what}: shape must be a non-empty list of positive ints (one may be "
                         f"-1), got {shape!r}")
    if dims.count(-1) > 1:
        raise ValueError(f"{what}: only one dimension of shape may be -1, got {shape!r}")
    return [int(d) for d in dims]


def fit_shape(values, shape, column, where):
    """Give the 1-D ``values`` the column's ``shape`` (1-D when it has none)."""
    if shape is None:
        return values
    known = int(np.prod([d for d in shape if d != -1]))
    if -1 in shape:
        if known == 0 or values.size % known:
            raise ValueError(f"{where}: column {column!r} has {values.size} values, which do not "
                             f"fill shape {shape}")
    elif values.size != known:
        raise ValueError(f"{where}: column {column!r} has {values.size} values but the schema's "
                         f"shape {shape} needs {known}")
    return values.reshape(shape)


class Schema:
    """An ordered list of columns, each ``{"name", "type", "shape"}``; ``num_rows`` optional.

    ``schema_file`` (a path to MindSpore's JSON schema) fills it at construction.
    """

    def __init__(self, schema_file=None):
        self.columns = []
        self.num_rows = None
        self.dataset_type = "TF"
        if schema_file is not None:
            if not isinstance(schema_file, (str, os.PathLike)):
                raise TypeError(f"Schema: schema_file must be a path, got {type(schema_file).__name__}")
            if not os.path.isfile(schema_file):
                raise ValueError(f"Schema: schema file {os.fspath(schema_file)!r} does not exist")
            self._load_file(os.fspath(schema_file))

    def _load_file(self, path):
        """Fill from the schema file ``path``; every failure names the file."""
        with open(path, "rb") as f:
            raw = f.read()
        try:
            content = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise ValueError(f"Schema: schema file {path!r} is not UTF-8 text (byte {err.start} is "
                             f"{raw[err.start:err.start + 1]!r}); expected MindSpore's schema JSON") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"Schema: schema file {path!r} is not valid JSON: {err}") from None
        try:
            self.from_json(content)
        except (ValueError, TypeError) as err:
            detail = str(err).removeprefix("Schema: ")
            raise type(err)(f"Schema: schema file {path!r}: {detail}") from None

    def add_column(self, name, de_type, shape=None):
        """Append a column; ``de_type`` is ``mstype.int32``, a NumPy dtype or a type name."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"Schema.add_column: name must be a non-empty str, got {name!r}")
        if any(c["name"] == name for c in self.columns):
            raise ValueError(f"Schema.add_column: column {name!r} is already in the schema")
        self.columns.append({"name": name, "type": de_type_name(de_type, f"column {name!r}"),
                             "shape": check_shape(shape, f"column {name!r}")})

    def parse_columns(self, columns):
        """Replace the columns by ``columns``: a dict ``{name: {"type", "shape"}}`` or a list of
        ``{"name", "type", "shape"}`` dicts (MindSpore's two JSON spellings)."""
        if isinstance(columns, dict):
            items = [dict(spec, name=name) for name, spec in columns.items()]
        elif isinstance(columns, list):
            items = columns
        else:
            raise TypeError(f"Schema: columns must be a dict or a list, got {type(columns).__name__}")
        self.columns = []
        for spec in items:
            if not isinstance(spec, dict) or "name" not in spec or "type" not in spec:
                raise ValueError(f"Schema: every column needs a 'name' and a 'type', got {spec!r}")
            unknown = set(spec) - {"name", "type", "shape", "rank", "t_impl"}
            if unknown:
                raise ValueError(f"Schema: column {spec['name']!r} has unknown keys {sorted(unknown)}")
            self.add_column(spec["name"], spec["type"], spec.get("shape"))

    def from_json(self, json_obj):
        """Fill from MindSpore's schema JSON (a dict)."""
        if not isinstance(json_obj, dict) or "columns" not in json_obj:
            raise ValueError("Schema: the JSON needs a 'columns' entry")
        unknown = set(json_obj) - {"columns", "numRows", "datasetType"}
        if unknown:
            raise ValueError(f"Schema: unknown JSON keys {sorted(unknown)}; expected columns, "
                             "numRows, datasetType")
        self.parse_columns(json_obj["columns"])
        rows = json_obj.get("numRows")
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
            raise ValueError(f"Schema: numRows must be a non-negative int, got {rows!r}")
        self.num_rows = rows or None
        self.dataset_type = json_obj.get("datasetType", "TF")

    def to_json(self):
        """The schema as MindSpore's JSON text."""
        columns = {}
        for c in self.columns:
            spec = {"type": c["type"]}
            if c["shape"] is not None:
                spec.update(rank=len(c["shape"]), shape=list(c["shape"]))
            columns[c["name"]] = spec
        out = {"datasetType": self.dataset_type, "columns": columns}
        if self.num_rows:
            out["numRows"] = self.num_rows
        return json.dumps(out, indent=2)

    @staticmethod
    def get_num_rows(schema):
        """``numRows`` of a Schema (None when it has none)."""
        return schema.num_rows if isinstance(schema, Schema) else None

    def names(self):
        return [c["name"] for c in self.columns]

    def __len__(self):
        return len(self.columns)

    def __repr__(self):
        return f"Schema({self.to_json()})"


def as_schema(schema, what):
    """A ``Schema`` from a Schema or the path of a schema file; None stays None."""
    if schema is None or isinstance(schema, Schema):
        if schema is not None and not schema.columns:
            raise ValueError(f"{what}: the schema has no columns; add them with schema.add_column")
        return schema
    if isinstance(schema, (str, os.PathLike)):
        return Schema(schema)
    raise TypeError(f"{what}: schema must be a ds.Schema or the path of a schema JSON file, "
                    f"got {type(schema).__name__}")
