"""``ms.placement_report()``: where every primitive instance ran and what it cost, and where
the optimizers applied their updates."""
import operator

import numpy as np

from .backend import get_device
from .backend.device import Device
from .ops.primitive import display_name, primitives_that_ran
from .tensor import Tensor

_updates = {}   # name -> row dict, in order of first update
_pending = []   # UpdateCounts holding calls not yet added to _updates


class PlacementReport(list):
    """A list of dicts (one per primitive instance) that prints as a table.

    ``updates`` lists the optimizers' parameter updates (see :func:`record_update`); they
    print as a second table under the primitives.
    """

    columns = ("name", "device", "calls", "forward_ms", "backward_ms", "bytes_in", "bytes_out")
    update_columns = ("update", "device", "calls", "update_ms", "bytes")

    def __init__(self, rows=(), updates=()):
        super().__init__(rows)
        self.updates = list(updates)

    def __str__(self):
        text = _table(self.columns, [[r["display"]] + [r[c] for c in self.columns[1:]] for r in self])
        if self.updates:
            text += "\n\n" + _table(self.update_columns,
                                    [[r["name"], r["device"], r["calls"], r["update_ms"], r["bytes"]]
                                     for r in self.updates])
        return text

    def by_device(self):
        """Total calls per device name."""
        totals = {}
        for r in self:
            totals[r["device"]] = totals.get(r["device"], 0) + r["calls"]
        return totals


def _table(header, rows):
    rows = [tuple(header)] + [tuple(_fmt(v) for v in row) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value):
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def placement_report():
    """One row per primitive instance that ran: op, device, calls, time, bytes moved; then
    the optimizers' updates, one row per name given to :func:`record_update`.

    A row's ``name`` is the instance's scope (``layer1.matmul``), ``op`` its type (``MatMul``)
    and ``display`` both, as the table prints it: ``layer1.matmul (MatMul)``. ``target`` is
    its ``set_device`` target (None: it follows its inputs). ``bytes_in`` counts inputs copied
    onto the primitive's device before it ran; ``bytes_out`` counts gradients copied back to
    where those inputs came from. Instances are held weakly: one that has been garbage
    collected drops out of the report.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> add = ops.Add()
    >>> add.instance_name = "head.add"
    >>> _ = add(ms.Tensor([1.0]), ms.Tensor([2.0]))
    >>> [(row["display"], row["device"]) for row in ms.placement_report() if row["op"] == "Add"][-1]
    ('head.add (Add)', 'CPU')
    """
    rows = []
    for prim in primitives_that_ran():
        if not prim.calls:
            continue
        rows.append({
            "name": prim.name,
            "op": type(prim).__name__,
            "display": display_name(prim),
            "device": prim.device_used.name if prim.device_used is not None else "-",
            "target": prim.primitive_target,
            "calls": prim.calls,
            "forward_ms": prim.forward_time * 1e3,
            "backward_ms": prim.backward_time * 1e3,
            "bytes_in": prim.bytes_in,
            "bytes_out": prim.bytes_out,
        })
    _flush_pending()
    updates = [{"name": name, "device": r["device"], "calls": r["calls"],
                "update_ms": r["seconds"] * 1e3, "bytes": r["bytes"]} for name, r in _updates.items()]
    return PlacementReport(rows, updates)


def record_update(name, device, seconds, nbytes):
    """Count one optimizer update for the placement report.

    ``name`` says what was updated (``"SGD.embedding_table"``), ``device`` where the update
    ran (a Device or "CPU"/"GPU"), ``seconds`` how long it took and ``nbytes`` the gradient
    bytes it applied (for a sparse gradient, its rows and indices only). Repeated calls with
    one name add up.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist.placement import record_update
    >>> ms.reset_placement_stats()
    >>> record_update("SGD.embedding_table", "CPU", 0.002, 4096)
    >>> record_update("SGD.embedding_table", "CPU", 0.001, 4096)
    >>> ms.placement_report().updates
    [{'name': 'SGD.embedding_table', 'device': 'CPU', 'calls': 2, 'update_ms': 3.0, 'bytes': 8192}]
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"record_update: name must be a non-empty string, got {name!r}")
    if type(nbytes) is int and nbytes >= 0:     # the optimizers' case, once per parameter
        count = nbytes
    else:
        try:
            count = operator.index(nbytes)
        except TypeError:
            count = -1
        if isinstance(nbytes, bool) or count < 0:
            raise ValueError(f"record_update: nbytes must be a non-negative int, got {nbytes!r}")
    record_updates([(name, device, float(seconds), count)])


def record_updates(rows):
    """``record_update`` for the parameters of one fused optimizer call in one call: ``rows``
    holds ``(name, device, seconds, nbytes)`` tuples whose names (non-empty strings) and
    byte counts (arrays' ``nbytes``) the optimizer made, so only the device is looked at."""
    if _pending:        # calls counted before these come first, as they happened
        _flush_pending()
    _add_rows(rows)


def _add_rows(rows, calls=1):
    """The rows of ``calls`` calls, their seconds and bytes summed already."""
    last_device = last_name = None      # the rows of one call share a device, mostly
    for name, device, spent, count in rows:
        if device is not last_device or last_name is None:
            last_name = device.name if type(device) is Device else \
                get_device(device).name if device is not None else "-"
            last_device = device
        device_name = last_name
        row = _updates.get(name)
        if row is None:
            row = _updates[name] = {"device": device_name, "calls": 0, "seconds": 0.0, "bytes": 0}
        row["device"] = device_name
        row["calls"] += calls
        row["seconds"] += spent
        row["bytes"] += count


class UpdateCounts:
    """The placement rows of one fused optimizer call that repeats with the same parameters
    (``nn/optim/fused.py`` keeps one per batch of its plan), counted per call and added to
    the report only when it is read: a step pays two additions, not a row per parameter.

    ``names``, ``devices`` and ``nbytes`` give each row's name, device and gradient bytes
    (the same every call: a gradient has its parameter's shape and dtype). Each row gets the
    calls' time shared by gradient bytes, as ``record_updates`` rows are. Rows recorded at
    once (``record_updates``), the report and ``reset_placement_stats`` first settle what is
    counted here, so the report's order and last devices are those of the calls."""

    __slots__ = ("names", "devices", "nbytes", "calls", "seconds")

    def __init__(self, names, devices, nbytes):
        self.names, self.devices, self.nbytes = tuple(names), tuple(devices), tuple(nbytes)
        self.calls, self.seconds = 0, 0.0

    def count(self, seconds):
        """One more call that took ``seconds``."""
        if not self.calls:
            _pending.append(self)
        self.calls += 1
        self.seconds += seconds

    def _settle(self):
        calls, seconds, total = self.calls, self.seconds, sum(self.nbytes) or 1
        self.calls, self.seconds = 0, 0.0
        _add_rows([(name, device, seconds * n / total, n * calls)
                   for name, device, n in zip(self.names, self.devices, self.nbytes)], calls)


def _flush_pending():
    counts = list(_pending)
    _pending.clear()
    for c in counts:
        c._settle()


def gradient_nbytes(grad):
    """Bytes of a gradient as an optimizer applies it: an array's or Tensor's ``nbytes``; a
    ``RowTensor``'s indices and values (its rows, never the dense table); 0 for None.

    >>> import numpy as np
    >>> import minitorch_dist as ms
    >>> rows = ms.RowTensor(ms.Tensor(np.array([3, 7])), ms.Tensor(np.ones((2, 4), np.float32)), (1000, 4))
    >>> gradient_nbytes(rows), gradient_nbytes(np.ones((2, 4), np.float32)), gradient_nbytes(None)
    (48, 32, 0)
    """
    if grad is None:
        return 0
    data = grad.data if type(grad) is Tensor else grad
    if type(data) is np.ndarray:      # the common case, without failed attribute lookups
        return data.nbytes
    if hasattr(grad, "indices") and hasattr(grad, "values"):
        return int(grad.indices.data.nbytes + grad.values.data.nbytes)
    if isinstance(grad, Tensor):
        grad = grad.data
    return int(getattr(grad, "nbytes", 0))


def reset_placement_stats():
    """Zero every primitive's counters and forget the recorded updates (the report starts
    empty again)."""
    for prim in primitives_that_ran():
        prim.calls = 0
        prim.forward_time = prim.backward_time = 0.0
        prim.bytes_in = prim.bytes_out = 0
    for counts in _pending:
        counts.calls, counts.seconds = 0, 0.0
    _pending.clear()
    _updates.clear()
