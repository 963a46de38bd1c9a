"""``ms.placement_report()``: where every primitive instance ran and what it cost."""
from .ops.primitive import primitives_that_ran


class PlacementReport(list):
    """A list of dicts (one per primitive instance) that prints as a table."""

    columns = ("name", "device", "calls", "forward_ms", "backward_ms", "bytes_in", "bytes_out")

    def __str__(self):
        rows = [self.columns] + [tuple(_fmt(r[c]) for c in self.columns) for r in self]
        widths = [max(len(row[i]) for row in rows) for i in range(len(self.columns))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def by_device(self):
        """Total calls per device name."""
        totals = {}
        for r in self:
            totals[r["device"]] = totals.get(r["device"], 0) + r["calls"]
        return totals


def _fmt(value):
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def placement_report():
    """One row per primitive instance that ran: op, device, calls, time, bytes moved.

    ``bytes_in`` counts inputs copied onto the primitive's device before it ran;
    ``bytes_out`` counts gradients copied back to where those inputs came from.
    Instances are held weakly: one that has been garbage collected drops out of the report.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import ops
    >>> add = ops.Add()
    >>> _ = add(ms.Tensor([1.0]), ms.Tensor([2.0]))
    >>> [row["device"] for row in ms.placement_report() if row["name"] == add.name]
    ['CPU']
    """
    rows = PlacementReport()
    for prim in primitives_that_ran():
        if not prim.calls:
            continue
        rows.append({
            "name": prim.name,
            "op": type(prim).__name__,
            "device": prim.device_used.name if prim.device_used is not None else "-",
            "target": prim.primitive_target,
            "calls": prim.calls,
            "forward_ms": prim.forward_time * 1e3,
            "backward_ms": prim.backward_time * 1e3,
            "bytes_in": prim.bytes_in,
            "bytes_out": prim.bytes_out,
        })
    return rows


def reset_placement_stats():
    """Zero every primitive's counters (the report starts empty again)."""
    for prim in primitives_that_ran():
        prim.calls = 0
        prim.forward_time = prim.backward_time = 0.0
        prim.bytes_in = prim.bytes_out = 0
