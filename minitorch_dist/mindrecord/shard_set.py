"""Which shard files make up a MindRecord dataset, opened and checked to agree.

A single path stands for its whole set: the footer of that file lists the names of all the
shards ``FileWriter`` wrote, and they are looked up beside it (MindSpore's ``load_dataset``
rule). A list of paths is read as given, file by file.
"""
import os

from .shard_format import ShardFile


def open_shard_set(dataset_files, what):
    """``[ShardFile]`` for a path (its whole set) or a list of paths (those files)."""
    if isinstance(dataset_files, (str, os.PathLike)):
        first = ShardFile(os.fspath(dataset_files))
        folder = os.path.dirname(os.fspath(dataset_files))
        names = first.meta.get("shard_files") or [os.path.basename(first.path)]
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
    return shards
