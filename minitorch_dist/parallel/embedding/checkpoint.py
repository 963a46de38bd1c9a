"""Merge the checkpoints of a job with row-sliced embedding tables into one full checkpoint.

Each rank of a ``slice_mode="table_row_slice"`` job saves its own checkpoint as usual
(``ms.save_checkpoint(train_net, f"rank{r}.ckpt")``): the row-sliced tables, and the
optimizer state made for them (``moments.<table>``, ``linear.<table>``, ...), hold that
rank's rows only; everything else is replicated. ``merge_row_sliced_checkpoints`` stacks
the slices in rank order (blocks of ``ceil(vocab / N)`` rows, see ``embedding_slice``) and
keeps one copy of the rest (checked equal on every rank), so that a one-process network
with the whole table loads the result with ``ms.load_checkpoint`` /
``ms.load_param_into_net``. ``row_sliced_names(cell)`` lists which names are slices.
"""
import numpy as np

from ...train.checkpoint_identity import is_identity_entry

__all__ = ["row_sliced_names", "merge_row_sliced_checkpoints"]


def row_sliced_names(cell):
    """The checkpoint names of ``cell``'s row-sliced tables and of optimizer state shaped
    like them (a training cell brings its optimizer: its slots follow the parameters)."""
    from ...train.checkpoint import checkpoint_entries
    sliced = {id(p) for _, p in cell.parameters_and_names()
              if getattr(p, "row_slice", None) is not None}
    for _, sub in cell.cells_and_names():
        slots = getattr(sub, "_slots", None)    # an optimizer: state aligned with parameters
        if isinstance(slots, dict):
            for states in slots.values():
                sliced.update(id(s) for p, s in zip(sub.parameters, states) if id(p) in sliced)
    return [name for name, p in checkpoint_entries(cell) if id(p) in sliced]


def merge_row_sliced_checkpoints(rank_files, output_file, sliced, atol=0.0):
    """Write the full checkpoint of a row-sliced job to ``output_file``; returns ``{name: Tensor}``.

    ``rank_files``: one checkpoint per rank, in rank order. ``sliced``: the names that are
    row slices, or a Cell of the sliced job (``row_sliced_names(cell)``). The other entries
    must be equal in every file (up to ``atol``).
    """
    from ...nn.cell import Cell
    from ...nn.parameter import Parameter
    from ...tensor import Tensor
    from ...train.checkpoint import load_checkpoint, save_checkpoint
    rank_files = list(rank_files)
    if not rank_files:
        raise ValueError("merge_row_sliced_checkpoints: no rank checkpoint files given")
    names = set(row_sliced_names(sliced) if isinstance(sliced, Cell) else sliced)
    loaded = [load_checkpoint(path) for path in rank_files]
    missing = sorted(names - set(loaded[0]))
    if missing:
        raise ValueError(f"merge_row_sliced_checkpoints: {rank_files[0]} has no entries "
                         f"{missing}; expected the row-sliced tables and their optimizer state")
    _check_rank_order(loaded, rank_files)
    merged = {}
    for name, value in loaded[0].items():
        if is_identity_entry(name):
            continue            # the merged file holds whole tables: no rank's slices
        copies = [_entry(ckpt, name, path) for ckpt, path in zip(loaded, rank_files)]
        if name in names:
            merged[name] = Parameter(Tensor(_stack_rows(name, copies, rank_files)), name,
                                     requires_grad=value.requires_grad)
        else:
            merged[name] = value if isinstance(value, str) else \
                _same_everywhere(name, copies, rank_files, atol)
    save_checkpoint(merged, output_file)
    return merged


def _check_rank_order(loaded, paths):
    """Files that record their rank (``__rank_identity__``) must come in rank order."""
    for position, (ckpt, path) in enumerate(zip(loaded, paths)):
        rows = [v.checkpoint_origin["slice"]["row_slice"] for v in ckpt.values()
                if not isinstance(v, str) and getattr(v, "checkpoint_origin", None)
                and (v.checkpoint_origin.get("slice") or {}).get("row_slice")]
        for part in rows:
            if part["rank"] != position or part["size"] != len(paths):
                raise ValueError(f"merge_row_sliced_checkpoints: {path} holds the rows of "
                                 f"rank {part['rank']} of {part['size']}, but it is file "
                                 f"{position} of {len(paths)}; pass one file per rank, in "
                                 "rank order")


def _entry(ckpt, name, path):
    if name not in ckpt:
        raise ValueError(f"merge_row_sliced_checkpoints: {path} has no entry {name!r}; the "
                         "rank checkpoints must come from the same network")
    return ckpt[name]


def _stack_rows(name, copies, paths):
    """The slices of ``name`` stacked in rank order, checked against the ceil-block layout."""
    arrays = [c.asnumpy() for c in copies]
    vocab, size = sum(a.shape[0] for a in arrays), len(arrays)
    block = -(-vocab // size)
    expected = [max(0, min(block, vocab - r * block)) for r in range(size)]
    if [a.shape[0] for a in arrays] != expected or len({a.shape[1:] for a in arrays}) != 1:
        got = [a.shape for a in arrays]
        raise ValueError(f"merge_row_sliced_checkpoints: the slices of {name!r} have shapes "
                         f"{got}, but {size} ranks of a {vocab}-row table hold {expected} rows "
                         f"(blocks of ceil({vocab} / {size})); are the files {paths} in rank "
                         "order?")
    return np.concatenate(arrays)


def _same_everywhere(name, copies, paths, atol):
    first = copies[0].asnumpy()
    for copy, path in zip(copies[1:], paths[1:]):
        again = copy.asnumpy()
        if first.shape != again.shape or first.dtype != again.dtype or (
                not np.allclose(first, again, rtol=0, atol=atol) if first.dtype.kind == "f"
                else not np.array_equal(first, again)):
            raise ValueError(f"merge_row_sliced_checkpoints: {name!r} is not row-sliced but "
                             f"differs between {paths[0]} and {path} ({first.dtype}"
                             f"{list(first.shape)} vs {again.dtype}{list(again.shape)}); pass "
                             "its name in sliced if it is a row slice")
    return copies[0]
