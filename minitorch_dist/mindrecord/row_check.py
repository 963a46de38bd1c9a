"""Schema and row checks for ``FileWriter``: what MindSpore's writer accepts, refused loudly.

MindSpore's ``FileWriter`` logs and drops a row that does not match the schema; here such a
row raises ``ValueError`` naming the row and field, and nothing of that call is written.
``split_row`` gives a checked row's scalar fields (Python values, for the raw page) and its
blob fields (arrays and bytes, for the blob).
"""
import numpy as np

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


def _number(value, name, spec, where):
    """A checked scalar (Python int/float) or array (in the schema's dtype) for a number field."""
    kind, shape = spec["type"], spec.get("shape")
    array = np.asarray(value)
    if array.dtype.kind not in "iuf" or (kind.startswith("int") and array.dtype.kind == "f"):
        raise ValueError(f"{where}: field {name!r} ({kind}) got {array.dtype} values")
    target = np.dtype(kind)
    if array.dtype.kind in "iu" and array.size and target.kind == "i":
        info = np.iinfo(target)
        if array.min() < info.min or array.max() > info.max:
            bad = array.reshape(-1)[(array.reshape(-1) < info.min) | (array.reshape(-1) > info.max)][0]
            raise ValueError(f"{where}: field {name!r} ({kind}) holds {int(bad)}, outside {kind}'s range")
    if array.dtype.kind == "f" and target.itemsize == 4 and array.size and \
            np.any(np.isfinite(array) & (np.abs(array) > np.finfo(np.float32).max)):
        raise ValueError(f"{where}: field {name!r} (float32) holds a value beyond float32's range")
    if shape is None:
        if array.ndim != 0:
            raise ValueError(f"{where}: field {name!r} ({kind}, no shape) is a scalar, got an "
                             f"array of shape {array.shape}")
        return int(array) if target.kind == "i" else float(array)
    if not _shape_matches(array.shape, shape):
        raise ValueError(f"{where}: field {name!r} has shape {list(array.shape)}, the schema says "
                         f"{shape}")
    return array.astype(target)


def split_row(row, schema, where):
    """``(scalars, blobs)``: the checked values of one row (a dict) for ``schema``."""
    if not isinstance(row, dict):
        raise ValueError(f"{where}: a row must be a dict {{field: value}}, got {type(row).__name__}")
    missing = [f for f in schema if f not in row]
    extra = [f for f in row if f not in schema]
    if missing or extra:
        raise ValueError(f"{where}: the row's fields do not match the schema: missing {missing}, "
                         f"not in the schema {extra}")
    scalars, blobs = {}, {}
    for name, spec in schema.items():
        value, kind = row[name], spec["type"]
        if kind == "string":
            if not isinstance(value, str):
                raise ValueError(f"{where}: field {name!r} (string) got {type(value).__name__}")
            scalars[name] = value
        elif kind == "bytes":
            if not isinstance(value, (bytes, bytearray)):
                raise ValueError(f"{where}: field {name!r} (bytes) got {type(value).__name__}")
            blobs[name] = bytes(value)
        elif "shape" in spec:
            blobs[name] = _number(value, name, spec, where)
        else:
            scalars[name] = _number(value, name, spec, where)
    return scalars, blobs
