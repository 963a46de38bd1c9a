"""Which rank a per-rank checkpoint belongs to, carried from the file to the values read.

A checkpoint saved by one rank of a parallel job may hold slices: an operator-sharded
parameter saved with ``integrated_save=False``, a row-sliced embedding table, their
optimizer state. Such a file says whose slices they are: the string entry
``__rank_identity__`` (JSON, written by the parallel layer: the saving rank, the world
size, the parallel mode and, per sliced entry, its layout and the rank whose block it
holds). Older files carry the per-parameter layouts only (``sharding_layout.<name>``).

``load_checkpoint`` hands each value it reads a ``checkpoint_origin``: the file, the
identity, and that entry's slice record (None for a whole value). Loading into a network
(``load_param_into_net``) then checks the slice against the parameter it would fill: a
slice of another rank or layout is refused with an error naming both sides, and a value
with a slice's shape from a file that does not say whose slice it is is refused with how
to re-save it. Whole values, and files of one process, load as before.
"""
import json

__all__ = ["IDENTITY", "LEGACY_LAYOUT_PREFIX", "read_identity", "attach_origins",
           "is_identity_entry"]

IDENTITY = "__rank_identity__"
LEGACY_LAYOUT_PREFIX = "sharding_layout."      # parallel/sharding/checkpoint.LAYOUT_PREFIX


def is_identity_entry(name):
    """True for the entries that describe a per-rank file rather than hold a value."""
    return name == IDENTITY or name.startswith(LEGACY_LAYOUT_PREFIX)


def _json(text, what, path):
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as err:
        raise ValueError(f"load_checkpoint: the {what} entry of {path!r} is corrupt: {err}") \
            from None
    if not isinstance(value, dict):
        raise ValueError(f"load_checkpoint: the {what} entry of {path!r} is not a JSON object")
    return value


def read_identity(manifest_entries, path):
    """``(identity or None, {name: slice record})`` from a checkpoint's manifest entries
    (all of them, whatever the caller filters: the records describe the values)."""
    strings = {e["name"]: e.get("value") for e in manifest_entries if e.get("kind") == "string"}
    identity = _json(strings[IDENTITY], IDENTITY, path) if IDENTITY in strings else None
    slices = {}
    for name, text in strings.items():
        if name.startswith(LEGACY_LAYOUT_PREFIX):
            slices[name[len(LEGACY_LAYOUT_PREFIX):]] = _json(text, name, path)
    if identity is not None:
        layouts = identity.get("layouts", {})
        if not isinstance(layouts, dict):
            raise ValueError(f"load_checkpoint: the {IDENTITY} entry of {path!r} has no "
                             "valid 'layouts' map")
        slices.update(layouts)
    return identity, slices


def attach_origins(params, manifest_entries, path):
    """Give every tensor value of ``params`` its ``checkpoint_origin``."""
    identity, slices = read_identity(manifest_entries, path)
    for name, value in params.items():
        if not isinstance(value, str):
            value.checkpoint_origin = {"file": path, "identity": identity,
                                       "slice": slices.get(name)}
    return params
