"""Showing a schedule: an ASCII timetable and a matplotlib timeline.

Both come from the simulator (``simulate.py``), so they show *when* each action runs, with the
idle slots (the bubble) visible, not merely the order of each rank's list.

>>> from minitorch_dist.parallel.pipeline import generate_schedule
>>> print(format_schedule(generate_schedule("1f1b", 2, 3)))
1f1b: 2 ranks x 1 chunk, 3 micro-batches; makespan 8, bubble 25.0%
slot     0   1   2   3   4   5   6   7
rank 0  0F0 0F1  .  0B0 0F2 0B1  .  0B2
rank 1   .  1F0 1B0 1F1 1B1 1F2 1B2  .
"""
from fractions import Fraction

from .actions import F
from .simulate import simulate

__all__ = ["format_schedule", "plot_schedule"]

IDLE, BUSY = ".", "-"


def _slot(value, what):
    """``value`` as an int slot index; the table needs whole-number times."""
    if Fraction(value).denominator != 1:
        raise ValueError(f"format_schedule: the table needs whole-number times, but {what} is "
                         f"at {value}; use integer costs (or plot_schedule for any costs)")
    return int(value)


def format_schedule(schedule, comm=False, header=True, forward_cost=1, backward_cost=1,
                    send_cost=0):
    """An ASCII table of ``schedule``: one row per rank, one column per time slot.

    Each compute is shown in the slot where it starts (a compute lasting several slots fills
    the others with ``-``); idle slots are ``.``. With ``comm=True`` a cell also lists the
    SEND/RECV actions the rank posts right after that compute (those posted before its first
    compute open its first cell). ``header`` adds a title line (kind, makespan, bubble) and a
    line of slot numbers. The costs are passed to ``simulate`` and must be whole numbers.
    """
    result = simulate(schedule, forward_cost=forward_cost, backward_cost=backward_cost,
                      send_cost=send_cost)
    width = _slot(result.makespan, "the end")
    rows = {}
    for rank, actions in schedule.actions.items():
        cells = [IDLE] * width
        pending, last = [], None        # comm actions waiting for a cell to go in
        for action in actions:
            if action.is_comm:
                if comm:
                    pending.append(str(action))
                continue
            if last is not None and pending:
                cells[last] += " " + " ".join(pending)
                pending = []
            start, end = result.times[action]
            first = _slot(start, action)
            cells[first] = " ".join(pending + [str(action)])
            pending = []
            for t in range(first + 1, _slot(end, action)):
                cells[t] = BUSY
            last = first
        if pending and last is not None:
            cells[last] += " " + " ".join(pending)
        elif pending:                   # a rank with messages but no compute at all
            cells = [" ".join(pending)] + cells
        rows[rank] = cells
    columns = max([width] + [len(c) for c in rows.values()])
    cell_width = max([len(str(columns - 1))] + [len(c) for cells in rows.values() for c in cells])
    label_width = len(f"rank {schedule.num_ranks - 1}")

    def line(label, cells):
        return (label.ljust(label_width) + "  " +
                " ".join(c.center(cell_width) for c in cells)).rstrip()

    lines = []
    if header:
        chunk = "chunk" if schedule.chunks == 1 else "chunks"
        lines.append(f"{schedule.kind}: {schedule.num_ranks} ranks x {schedule.chunks} {chunk}, "
                     f"{schedule.num_microbatches} micro-batches; makespan {result.makespan}, "
                     f"bubble {float(result.bubble_fraction):.1%}")
        lines.append(line("slot", [str(t) for t in range(columns)]))
    lines += [line(f"rank {rank}", cells) for rank, cells in rows.items()]
    return "\n".join(lines)


# one hue per direction, lighter for later chunks so interleaved stages can be told apart
_FORWARD_COLOURS = ("#1f77b4", "#6baed6", "#9ecae1", "#c6dbef")
_BACKWARD_COLOURS = ("#d62728", "#fc8d59", "#fdbb84", "#fdd49e")


def plot_schedule(schedule, ax=None, forward_cost=1, backward_cost=1, send_cost=0,
                  show_labels=True):
    """A timeline of ``schedule``: one lane per rank, F and B boxes, bubble in the title.

    Each box spans the simulated (start, end) of one compute and is labelled with its
    micro-batch (``show_labels``); forwards are blue, backwards red, lighter for a rank's
    later chunks. Draws into ``ax`` (a new figure if None) and returns the figure. Costs are
    those of ``simulate`` (numbers or ``stage -> number`` callables).
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    result = simulate(schedule, forward_cost=forward_cost, backward_cost=backward_cost,
                      send_cost=send_cost)
    if ax is None:
        width = min(16.0, 4.0 + 0.25 * float(result.makespan))
        _, ax = plt.subplots(figsize=(width, 0.6 * schedule.num_ranks + 1.4))
    for rank in range(schedule.num_ranks):
        for start, end, action in result.timeline(rank):
            chunk = schedule.stages_of(rank).index(action.stage)
            palette = _FORWARD_COLOURS if action.kind == F else _BACKWARD_COLOURS
            colour = palette[min(chunk, len(palette) - 1)]
            ax.broken_barh([(float(start), float(end - start))], (rank - 0.4, 0.8),
                           facecolors=colour, edgecolors="white", linewidth=0.8)
            if show_labels:
                ax.text(float(start + end) / 2, rank, str(action.microbatch), ha="center",
                        va="center", fontsize=8, color="white" if chunk == 0 else "black")
    ax.set_yticks(range(schedule.num_ranks))
    ax.set_yticklabels([f"rank {r}" for r in range(schedule.num_ranks)])
    ax.set_ylim(schedule.num_ranks - 0.5, -0.5)          # rank 0 on top
    ax.set_xlim(0, float(result.makespan) or 1.0)
    ax.set_xlabel("time")
    ax.set_title(f"{schedule.kind}: {schedule.num_ranks} ranks x {schedule.chunks} chunks, "
                 f"{schedule.num_microbatches} micro-batches; bubble "
                 f"{float(result.bubble_fraction):.1%}")
    ax.legend(handles=[Patch(color=_FORWARD_COLOURS[0], label="F (forward)"),
                       Patch(color=_BACKWARD_COLOURS[0], label="B (backward)")],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return ax.figure
