"""Casts that never wrap: narrowing a column's values raises instead of changing them.

NumPy's ``astype`` wraps integers (``int64 200 -> int8 -56``, ``-1 -> uint32 4294967295``),
truncates fractions and turns large floats into ``inf``. Every place where a dataset narrows
data to a declared type (a ``Schema``'s column types, ``GeneratorDataset(column_types=...)``,
TFRecord int64 lists read as a smaller integer type) goes through ``checked_cast`` instead,
which raises ``ValueError`` naming the column and the first value that does not fit.

The rule, per target kind:

* integer: integer or bool values must lie in the target's range; float values must be finite,
  whole and in range;
* float: finite values must stay finite (``1e300`` does not fit float32); precision may round,
  as any float conversion does;
* bool: only 0 and 1 (and True/False);
* text columns and a cast to the same dtype pass through unchanged.

>>> import numpy as np
>>> checked_cast(np.array([1, 2]), "int8", "label", "demo").dtype
dtype('int8')
>>> checked_cast(np.array([199, 200]), "int8", "label", "demo")
Traceback (most recent call last):
ValueError: demo: column 'label' holds 199, which does not fit int8 (range -128..127)
"""
import numpy as np


def _first(values, bad):
    return values.reshape(-1)[np.argmax(bad.reshape(-1))].item()


def _refuse(value, target, column, where, why):
    raise ValueError(f"{where}: column {column!r} holds {value!r}, which does not fit "
                     f"{target.name} ({why})")


def _check_integer_target(array, target, column, where):
    info = np.iinfo(target)
    if array.dtype.kind == "f":
        bad = ~np.isfinite(array)
        if bad.any():
            _refuse(_first(array, bad), target, column, where, "not a finite number")
        bad = array != np.trunc(array)
        if bad.any():
            _refuse(_first(array, bad), target, column, where, "not a whole number")
        # compare against powers of two: float(2**63 - 1) rounds up to 2**63, which does not fit
        bad = (array < float(info.min)) | (array >= float(info.max // 2 + 1) * 2)
    else:
        bad = (array < info.min) | (array > info.max)
    if bad.any():
        _refuse(_first(array, bad), target, column, where, f"range {info.min}..{info.max}")


def _check_float_target(array, target, column, where):
    if array.dtype.kind != "f" or target.itemsize >= array.dtype.itemsize:
        return
    finite = np.isfinite(array)
    bad = finite & (np.abs(array) > np.finfo(target).max)
    if bad.any():
        _refuse(_first(array, bad), target, column, where, f"largest magnitude {np.finfo(target).max}")


def checked_cast(values, target, column, where):
    """``values`` as an array of dtype ``target``; raises ``ValueError`` (naming ``column``
    and the value, prefixed by ``where``) instead of wrapping, truncating or overflowing."""
    array = np.asarray(values)
    target = np.dtype(target)
    if array.dtype == target:
        return array
    if target.kind in "SUO" or array.dtype.kind in "SUO":
        if (target.kind in "SU") != (array.dtype.kind in "SU"):
            raise ValueError(f"{where}: column {column!r} holds {array.dtype} values, which do not "
                             f"convert to {target.name}")
        if target.kind == "U" and array.dtype.kind == "S":     # bytes to text: decode as UTF-8
            try:
                return np.char.decode(array, "utf-8").astype(target)
            except UnicodeDecodeError as err:
                raise ValueError(f"{where}: column {column!r} holds bytes that are not UTF-8 text "
                                 f"({err.reason} at byte {err.start})") from None
        return array.astype(target)
    if array.size:
        if target.kind in "iu":
            _check_integer_target(array, target, column, where)
        elif target.kind == "f":
            _check_float_target(array, target, column, where)
        elif target.kind == "b":
            bad = (array != 0) & (array != 1)
            if bad.any():
                _refuse(_first(array, bad), target, column, where, "only 0 and 1 are booleans")
    return array.astype(target)
