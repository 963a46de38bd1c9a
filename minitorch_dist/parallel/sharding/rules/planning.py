"""The entry points over the rules: validate and plan, list candidates, pick the default.

``plan`` is what sharding calls for every primitive once the strategy is known;
``candidates`` is what sharding propagation chooses among for an unannotated primitive;
``default_strategy`` is SEMI_AUTO_PARALLEL's data parallelism for an unannotated one.
``local_call``/``run_local`` run a plan's local step on one rank.

>>> from minitorch_dist import ops
>>> mm = ops.MatMul()
>>> p = plan(mm, ((2, 4), (4, 1)), [(16, 32), (32, 16)], [None, None], {}, world=8)
>>> p.device_matrix, p.input_maps, p.output_maps
((2, 4, 1), ((2, 1), (1, 0)), ((2, 0),))
>>> [str(step) for step in p.forward_comm]
['AllReduce(sum) over device-matrix axes (1,) on output 0']
"""
from .base import Call, coordinates, is_count, rule_for
from ..layout_api import is_layout_strategy
from .errors import ShardingError
from .layout_plan import layout_plan

__all__ = ["plan", "candidates", "default_strategy", "local_call", "run_local", "check_strategy"]


def _check_world(call, world):
    if not is_count(world):
        raise call.error(f"the world size must be a positive int, got {world!r}")
    return int(world)


def _well_formed(strategy):
    return isinstance(strategy, (tuple, list)) and all(
        isinstance(s, (tuple, list)) and all(is_count(n) for n in s) for s in strategy)


def check_strategy(call, strategy, what="in_strategy", sizes=None):
    """``strategy`` as a tuple of tuples of ints, checked against the call's tensor shapes:
    one tuple per tensor input, one count per dimension, each count dividing its dimension.
    ``sizes``: ``(shapes, label)`` when the strategy splits something else (a rule's
    ``strategy_shapes``)."""
    if not _well_formed(strategy):
        raise call.error(f"{what} must be a tuple of tuples of positive split counts, one tuple "
                         f"per tensor input, e.g. ((2, 1), (1, 4)); got {strategy!r}")
    strategy = tuple(tuple(int(n) for n in s) for s in strategy)
    shapes, label = sizes if sizes is not None else (call.shapes, None)
    if len(strategy) != len(shapes):
        raise call.error(f"{what} {strategy} has {len(strategy)} tuple(s) but {call.kind} was called "
                         f"with {len(call.shapes)} tensor input(s) of shapes {tuple(call.shapes)}; "
                         "give one tuple per tensor input")
    for i, (s, shape) in enumerate(zip(strategy, shapes)):
        where = f"tensor input {i} (shape {shape})" if label is None else f"{label} {shape}"
        if len(s) != len(shape):
            raise call.error(f"{what} {strategy}: tuple {i} {s} has {len(s)} entries but {where} has "
                             f"{len(shape)} dimensions; give one split count per dimension")
        for d, (n, k) in enumerate(zip(shape, s)):
            if n % k:
                raise call.error(f"{what} {strategy}: dimension {d} of {where} has size {n}, which "
                                 f"cannot be split into {k} equal slices; a split count must divide "
                                 "its dimension")
    return strategy


def plan(prim, strategy, in_shapes, inputs, attrs, world, out_strategy=None):
    """The ``ShardPlan`` of calling ``prim`` with ``strategy`` on ``world`` devices.

    ``in_shapes``: the full shape of each positional input, None for non-tensor ones;
    ``inputs``: the positional values as called (tensors may be anything, they are not
    read); ``attrs``: the call's keyword arguments. ``strategy`` may also be ``Layout`` s
    (``layout_plan``). Raises ShardingError (a ValueError)
    naming the primitive and what was expected.
    """
    if is_layout_strategy(strategy) or (out_strategy is not None
                                        and is_layout_strategy(out_strategy)):
        if not is_layout_strategy(strategy):
            raise ShardingError(f"{prim.name}: out_strategy is a Layout, so in_strategy must be "
                                f"Layouts too; got {strategy!r}")
        return layout_plan(prim, strategy, in_shapes, inputs, attrs, world, out_strategy)
    rule = rule_for(prim)
    call = Call(prim, in_shapes, inputs, attrs)
    world = _check_world(call, world)
    rule.check_call(call)
    if strategy is None:
        if out_strategy is not None:
            raise call.error("out_strategy was given without in_strategy; MindSpore requires an "
                             "in_strategy whenever out_strategy is set")
        raise call.error("no in_strategy to plan with; give one (or use default_strategy)")
    strategy = check_strategy(call, strategy, sizes=rule.strategy_shapes(call))
    if out_strategy is not None:
        if not _well_formed(out_strategy):
            raise call.error(f"out_strategy must be a tuple of tuples of positive split counts, one "
                             f"tuple per output, e.g. ((8, 1),); got {out_strategy!r}")
        out_strategy = tuple(tuple(int(n) for n in s) for s in out_strategy)
    result = rule.build(call, strategy, world, out_strategy)
    if out_strategy is not None and not rule.supports_out_strategy:
        natural = tuple(result.splits(m) for m in result.output_maps)
        if out_strategy != natural:
            raise call.error(f"out_strategy {out_strategy} is not supported: only MatMul takes an "
                             f"out_strategy of its own; with in_strategy {strategy} the output is "
                             f"split {natural}")
    return result


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def _splits_using(sizes, world):
    """Every assignment of split counts to ``sizes`` (each dividing its size) whose product is
    ``world``, in lexicographic order."""
    if not sizes:
        if world == 1:
            yield ()
        return
    first, rest = sizes[0], sizes[1:]
    for d in _divisors(world):
        if first % d == 0:
            for tail in _splits_using(rest, world // d):
                yield (d,) + tail


def default_strategy(prim, in_shapes, inputs, attrs, world):
    """MindSpore's strategy for an unannotated primitive: data parallel, i.e. the batch
    (first) dimension of the inputs that carry it split ``world`` ways, when that is a
    valid strategy; otherwise every input whole (all ones)."""
    rule = rule_for(prim)
    call = Call(prim, in_shapes, inputs, attrs)
    world = _check_world(call, world)
    rule.check_call(call)
    sizes = rule.op_dims(call)
    ones = rule.strategy_from(call, (1,) * len(sizes))
    k = rule.batch_op_dim(call)
    if k is None or world == 1:
        return ones
    splits = [1] * len(sizes)
    splits[k] = world
    strategy = rule.strategy_from(call, tuple(splits))
    try:
        plan(prim, strategy, in_shapes, inputs, attrs, world)
    except ShardingError:
        return ones
    return strategy


def candidates(prim, in_shapes, inputs, attrs, world):
    """The valid strategies sharding propagation chooses among, deduplicated, in this
    order: the data-parallel default (all ones where that is not valid); then every
    strategy whose device count divides ``world``, most devices first (the leftover devices
    form the repeated axis) and, for one count, the work dimensions' splits in
    lexicographic order; all ones last.

    >>> from minitorch_dist import ops
    >>> candidates(ops.Reshape(), [(4, 6, 5)], [None], {"shape": (24, 5)}, 8)
    [((1, 1, 1),), ((4, 1, 1),), ((2, 1, 1),)]
    """
    rule = rule_for(prim)
    call = Call(prim, in_shapes, inputs, attrs)
    world = _check_world(call, world)
    rule.check_call(call)
    sizes = tuple(rule.op_dims(call))
    found = [default_strategy(prim, in_shapes, inputs, attrs, world)]
    for used in sorted(_divisors(world), reverse=True)[:-1]:
        found += [rule.strategy_from(call, s) for s in _splits_using(sizes, used)]
    found.append(rule.strategy_from(call, (1,) * len(sizes)))
    out, seen = [], set()
    for strategy in found:
        if strategy in seen:
            continue
        seen.add(strategy)
        try:
            plan(prim, strategy, in_shapes, inputs, attrs, world)
        except ShardingError:
            continue
        out.append(strategy)
    return out


def local_call(shard_plan, inputs, attrs, rank):
    """(inputs, attrs) for the local primitive call on ``rank`` (see ``ShardPlan``)."""
    return shard_plan.local_inputs(list(inputs), dict(attrs), coordinates(shard_plan.device_matrix, rank))


def run_local(shard_plan, prim, inputs, attrs, rank):
    """One rank's local step without communication: ``local_inputs``, the primitive on the
    local slices (``prim.run``, no primitive hook), then ``local_output`` if the plan has one.
    Returns what the primitive returned (a Tensor or a tuple of them)."""
    coords = coordinates(shard_plan.device_matrix, rank)
    local_inputs, local_attrs = shard_plan.local_inputs(list(inputs), dict(attrs), coords)
    out = prim.run(*local_inputs, **local_attrs)
    if shard_plan.local_output is not None:
        out = shard_plan.local_output(out, list(inputs), dict(attrs), coords)
    return out
