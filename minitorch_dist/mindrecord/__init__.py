"""``mindspore.mindrecord``: write and read MindRecord datasets (``FileWriter``, ``FileReader``).

``ds.MindDataset`` reads what ``FileWriter`` writes. The API, the schema rules and the file
format are MindSpore's: shard files with a JSON header and raw/blob pages, each with its SQLite
``.db`` index (``shard_header``, ``shard_file``, ``shard_index``). Files MindSpore writes read
here and files written here read in MindSpore. The format has no checksum: reading checks
every length, the header, the file size and the index against the pages, and a failure is a
``ValueError`` naming the file.
"""
from .filewriter import FileWriter
from .filereader import FileReader
from .row_check import FIELD_TYPES

SUCCESS = 0      # MindSpore's status values, for code that compares against them
FAILED = 1

__all__ = ["FileWriter", "FileReader", "FIELD_TYPES", "SUCCESS", "FAILED"]
