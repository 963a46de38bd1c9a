"""Axis arguments: a possibly negative axis checked against a rank and made non-negative.

One rule and one error message for every primitive, collective and sharding rule that takes
an axis: an int in ``[-ndim, ndim)``, counted from the end when negative, as NumPy does.
"""
import operator

__all__ = ["normalize_axis", "normalize_axes"]


def normalize_axis(axis, ndim, owner, shape=None, error=None, what="axis"):
    """``axis`` in ``[-ndim, ndim)`` as a non-negative int.

    ``owner`` (a primitive's name, say) starts the error message; ``shape``, when given, is
    the tensor the axis refers to (``ndim`` may exceed its rank by one for a new axis, as in
    ``ExpandDims``). A non-int raises ``TypeError`` and an axis out of range ``ValueError``,
    or both raise ``error`` when one is given (``ShardingError``, say). ``what`` names the
    argument ("begin_norm_axis").

    >>> normalize_axis(-1, 3, "Softmax")
    2
    >>> normalize_axis(2, 2, "ReduceSum", shape=(4, 5))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: ReduceSum: axis 2 is out of range for a tensor of shape (4, 5) (expected -2 ...
    """
    if isinstance(axis, bool) or not hasattr(axis, "__index__"):
        raise (error or TypeError)(f"{owner}: {what} must be an int, got {axis!r}")
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise (error or ValueError)(f"{owner}: {what} {axis} is out of range for "
                                    f"{_range_text(ndim, shape, what)}")
    return axis + ndim if axis < 0 else axis


def normalize_axes(axis, ndim, owner, shape=None, error=None):
    """``axis`` (None or ``()`` for every axis, an int, or a tuple or list of ints) as a
    sorted tuple of non-negative axes; naming one dimension twice is a ``ValueError``.

    >>> normalize_axes((-1, 0), 3, "ReduceMean"), normalize_axes(None, 2, "ReduceMean")
    ((0, 2), (0, 1))
    """
    if axis is None or axis == ():
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        if not all(hasattr(a, "__index__") and not isinstance(a, bool) for a in axis):
            raise (error or TypeError)(f"{owner}: axis must be None, an int or a tuple of "
                                       f"ints, got {axis!r}")
        axes = tuple(axis)
    elif isinstance(axis, bool) or not hasattr(axis, "__index__"):
        raise (error or TypeError)(f"{owner}: axis must be None, an int or a tuple of ints, "
                                   f"got {axis!r}")
    else:
        axes = (axis,)
    normalized = tuple(sorted(normalize_axis(a, ndim, owner, shape, error) for a in axes))
    if len(set(normalized)) != len(normalized):
        raise (error or ValueError)(f"{owner}: axis {axis!r} names the same dimension twice")
    return normalized


def _range_text(ndim, shape, what):
    """The tensor (its shape where known) and the valid range, then the rank that range
    comes from when the axis counts the tensor's own dimensions (not one more, for a new
    axis)."""
    expected = f"{-ndim} <= {what} < {ndim}"
    if shape is None:
        return f"a tensor with {ndim} dimensions (expected {expected})"
    shape = tuple(shape)
    if len(shape) != ndim:
        return f"a tensor of shape {shape} (expected {expected})"
    return f"a tensor of shape {shape} (expected {expected}), which has {ndim} dimensions"
