"""``mindspore.mindrecord``: write and read MindRecord datasets (``FileWriter``, ``FileReader``).

``ds.MindDataset`` reads what ``FileWriter`` writes. The API and schema rules are MindSpore's;
the file format is this project's own (``shard_format``): files written by MindSpore itself
are refused with an error naming the file.
"""
from .filewriter import FileWriter
from .filereader import FileReader
from .shard_format import FIELD_TYPES

SUCCESS = 0      # MindSpore's status values, for code that compares against them
FAILED = 1

__all__ = ["FileWriter", "FileReader", "FIELD_TYPES", "SUCCESS", "FAILED"]
