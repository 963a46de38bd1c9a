"""Which shard files make up a MindRecord dataset, opened and checked to agree.

A single path stands for its whole set: its header's ``shard_addresses`` lists the names of
all the shards of the set, and they are looked up beside it (MindSpore's ``load_dataset``
rule). A list of paths is read as given, file by file. Every file of a set must agree on the
schema and the set, and hold its own place in it (``shard_id``).
"""
import os

from .shard_file import ShardFile


def open_shard_set(dataset_files, what):
    """``[ShardFile]`` for a path (its whole set) or a list of paths (those files)."""
    if isinstance(dataset_files, (str, os.PathLike)):
        first = ShardFile(os.fspath(dataset_files))
        folder = os.path.dirname(os.fspath(dataset_files))
        # names beside the given file (MindSpore looks them up so, whatever folder they name)
        names = [os.path.basename(n) for n in first.header["shard_addresses"]]
        paths = [os.path.join(folder, name) for name in names]
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise ValueError(f"{what}: {os.fspath(dataset_files)!r} is one of {len(paths)} shard "
                             f"files, but {missing[0]!r} is missing; pass a list of the files to read "
                             "only some of them")
        shards = [first if os.path.abspath(p) == os.path.abspath(first.path) else ShardFile(p)
                  for p in paths]
    elif isinstance(dataset_files, (list, tuple)) and dataset_files:
        bad = [p for p in dataset_files if not isinstance(p, (str, os.PathLike))]
        if bad:
            raise TypeError(f"{what}: dataset_files must hold paths, got {bad[0]!r}")
        shards = [ShardFile(os.fspath(p)) for p in dataset_files]
    else:
        raise TypeError(f"{what}: dataset_files must be a path or a non-empty list of paths, got "
                        f"{dataset_files!r}")
    schema = shards[0].schema
    for shard in shards[1:]:
        if shard.schema != schema:
            raise ValueError(f"{what}: {shard.path!r} has schema {shard.schema}, but "
                             f"{shards[0].path!r} has {schema}; files of one dataset share a schema")
    for shard in shards:
        names, shard_id = shard.header["shard_addresses"], shard.header["shard_id"]
        if os.path.basename(names[shard_id]) != os.path.basename(shard.path):
            raise ValueError(f"{what}: MindRecord file {shard.path!r} says it is shard {shard_id} "
                             f"of {names}, named {names[shard_id]!r}; a renamed file no longer "
                             "matches its set and index")
    return shards
