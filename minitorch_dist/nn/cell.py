"""Cell: the building block of networks (MindSpore's name for a module).

A Cell's ``construct`` defines the forward computation and calling the cell runs it.
Parameters, sub-cells and primitives set as attributes are registered automatically, so
``trainable_params()`` finds every weight and the placement report names every primitive
by its attribute path ("layer1.matmul").
"""
from collections import OrderedDict

from ..backend import get_device
from ..extension import extension, installed_extensions
from ..thread_state import ThreadState
from ..offload import offload_on, offloaded_call
from ..ops.primitive import Primitive
from ..recompute import recomputed_call
from ..runtime import _once
from .parameter import Parameter

# A parallel executor (the pipeline runtime) may decide how each cell call runs: skipped on
# this rank, or fed with activations received from another rank. It calls ``cell.construct``.
_call_hook = ThreadState(hook=None)   # per thread (ranks as threads)


def set_cell_hook(hook):
    """Install ``hook(cell, inputs, kwargs)`` in front of every cell call (None removes it);
    returns the previous hook."""
    previous = _call_hook.hook
    _call_hook.hook = hook
    return previous


class Cell:
    """Base class of layers and networks.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist import nn, ops
    >>> class Scale(nn.Cell):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = ms.Parameter(ms.Tensor([2.0]))
    ...         self.mul = ops.Mul()
    ...     def construct(self, x):
    ...         return self.mul(x, self.w)
    >>> net = Scale()
    >>> net(ms.Tensor([3.0])).asnumpy().tolist(), [p.name for p in net.trainable_params()]
    ([6.0], ['w'])
    """

    # Wrappers (WithLossCell, TrainOneStepCell, ...) set this False so the primitives of the
    # network they wrap keep names relative to that network.
    _name_scope = True

    def __init__(self, auto_prefix=True, flags=None):
        object.__setattr__(self, "_params", OrderedDict())
        object.__setattr__(self, "_cells", OrderedDict())
        object.__setattr__(self, "_primitives", OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_pipeline_stage", None)
        object.__setattr__(self, "_auto_prefix", bool(auto_prefix))
        if flags is not None:
            if not isinstance(flags, dict):
                raise TypeError(f"{type(self).__name__}: flags must be a dict, got {flags!r}")
            self.add_flags(**flags)

    # ---- registration -----------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_params" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.__init__ must call super().__init__() "
                                 f"before setting attribute {name!r}")
        for registry in (self._params, self._cells, self._primitives):
            registry.pop(name, None)
        if isinstance(value, Parameter):
            if value.name is None:
                value.name = name
            self._params[name] = value
        elif isinstance(value, Cell):
            self._cells[name] = value
            if self._name_scope:
                _prefix_primitive_names(value, name)
                if self._auto_prefix:
                    value.update_parameters_name(name + ".")
        elif isinstance(value, Primitive):
            self._primitives[name] = value
            if value.instance_name is None:
                value.instance_name = name
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for registry in (self._params, self._cells, self._primitives):
            registry.pop(name, None)
        object.__delattr__(self, name)

    def insert_param_to_cell(self, name, param):
        setattr(self, name, param)

    def insert_child_to_cell(self, name, cell):
        setattr(self, name, cell)

    # ---- running ----------------------------------------------------------------------
    def construct(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define construct()")

    def __call__(self, *inputs, **kwargs):
        hook = _call_hook.hook
        if hook is not None:      # a pipeline's or a sharded run's: it honours recompute
            return hook(self, inputs, kwargs)
        if self.__dict__.get("_recompute"):
            return recomputed_call(self._call_unhooked, inputs, kwargs, owner=self)
        if not self._cells and offload_on():     # memory_offload="ON": a layer's activations
            return offloaded_call(self._call_unhooked, self, inputs, kwargs)
        return installed_extensions[0].call_cell(self, inputs, kwargs)   # extension(), inline

    def _call_unhooked(self, *inputs, **kwargs):
        return extension().call_cell(self, inputs, kwargs)

    def shard(self, in_strategy, out_strategy=None, parameter_plan=None, device="Ascend",
              level=0):
        """MindSpore's ``Cell.shard``: this cell run with its inputs laid out as asked; the
        parallel layer serves it (``parallel/shard_function.py``)."""
        return extension().shard_function(self, in_strategy, out_strategy, parameter_plan,
                                          device, level)

    def set_inputs(self, *inputs, **kwargs):
        """MindSpore's ``Cell.set_inputs``: declare the shapes this cell takes (a ``None`` or
        ``Symbol`` dimension is dynamic); later calls are checked against them. The
        parallel layer serves it (``parallel/dynamic_shape.py``)."""
        extension().declare_inputs(self, inputs, kwargs)

    def to_float(self, dst_type):
        """MindSpore's per-cell mixed precision (``nn/layers/mixed_precision.py``)."""
        from .layers.mixed_precision import to_float
        return to_float(self, dst_type)

    def set_train(self, mode=True):
        """Training mode (dropout active, batch norm uses batch statistics) or not."""
        for _, cell in self.cells_and_names():
            object.__setattr__(cell, "training", bool(mode))
        return self

    def set_grad(self, requires_grad=True):
        """MindSpore's switch for building the backward graph of this cell. Gradients are
        recorded on demand here, so ``set_grad(False)`` saves nothing: it is recorded in
        ``requires_grad`` and noted once."""
        if not isinstance(requires_grad, bool):
            raise TypeError(f"{type(self).__name__}.set_grad: requires_grad must be True or False, "
                            f"got {requires_grad!r}")
        object.__setattr__(self, "requires_grad", requires_grad)
        if not requires_grad:
            from ..runtime import _once
            _once("Cell.set_grad", "Cell.set_grad(False) is recorded and changes nothing: "
                  "gradients are recorded only where a gradient is asked for")
        return self

    def add_flags(self, **flags):
        """MindSpore's cell flags: set as attributes and listed by :meth:`get_flags`."""
        self.__dict__.setdefault("_mindspore_flags", {}).update(flags)
        for name, value in flags.items():
            object.__setattr__(self, name, value)
        return self

    def get_flags(self):
        """The flags set by ``flags=`` or :meth:`add_flags`."""
        return dict(self.__dict__.get("_mindspore_flags", {}))

    # ---- traversal --------------------------------------------------------------------
    def cells_and_names(self, cells=None, name_prefix=""):
        """Every cell in the tree (this one first, named "") with its attribute path."""
        seen = set() if cells is None else cells
        if id(self) in seen:
            return
        seen.add(id(self))
        yield name_prefix, self
        for name, cell in self._cells.items():
            if not self._name_scope:    # wrappers do not add their attribute names to paths
                child = name_prefix
            else:
                child = f"{name_prefix}.{name}" if name_prefix else name
            yield from cell.cells_and_names(seen, child)

    def name_cells(self):
        return OrderedDict(self._cells)

    def cells(self):
        return list(self._cells.values())

    def parameters_and_names(self, name_prefix="", expand=True):
        """Unique parameters with their attribute paths (the first path a parameter held
        twice is met under). Names are given when a cell is assigned to its parent
        (``update_parameters_name``), as in MindSpore; listing names only a parameter made
        after that (a SINGA layer creates its weights at its first call) whose name is still
        its bare attribute name. So names do not depend on which cell listed them, nor on
        whether a rank saved a checkpoint."""
        seen = set()
        cells = self.cells_and_names(name_prefix=name_prefix) if expand else [(name_prefix, self)]
        for path, cell in cells:
            for name, param in cell._params.items():
                if id(param) in seen:
                    continue
                seen.add(id(param))
                full = f"{path}.{name}" if path else name
                if param._auto_name and param.name == name and full != name:
                    param.name = full
                yield full, param

    def update_parameters_name(self, prefix="", recurse=True):
        """Name every parameter ``prefix`` + its path in this cell, as MindSpore does when a
        cell is assigned to a parent built with ``auto_prefix=True`` (the default): a
        parameter named ``"weight"`` in a layer held as ``dense_layer_1`` becomes
        ``"dense_layer_1.weight"``, given name or not, so names are unique and say where the
        parameter lives (model-zoo code selects parameters by them, e.g. ``'wide' in name``).

        >>> import minitorch_dist as ms
        >>> from minitorch_dist import nn
        >>> class Layer(nn.Cell):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.weight = ms.Parameter(ms.Tensor([1.0]), name="weight")
        >>> class Net(nn.Cell):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.first = Layer()
        >>> [p.name for p in Net().get_parameters()]
        ['first.weight']
        """
        if not isinstance(prefix, str):
            raise TypeError(f"update_parameters_name: prefix must be a str, got {prefix!r}")
        for path, param in self.parameters_and_names(expand=recurse):
            param.name = prefix + path

    def get_parameters(self, expand=True):
        for _, param in self.parameters_and_names(expand=expand):
            yield param

    def trainable_params(self, recurse=True):
        """Parameters with ``requires_grad``, in registration order."""
        return [p for p in self.get_parameters(expand=recurse) if p.requires_grad]

    def untrainable_params(self, recurse=True):
        return [p for p in self.get_parameters(expand=recurse) if not p.requires_grad]

    def parameters_dict(self, recurse=True):
        return OrderedDict((p.name, p) for p in self.get_parameters(expand=recurse))

    def primitives_and_names(self):
        for path, cell in self.cells_and_names():
            for name, prim in cell._primitives.items():
                yield (f"{path}.{name}" if path else name), prim

    # ---- placement --------------------------------------------------------------------
    def to(self, device):
        """Move every parameter of this cell to ``device`` (in place); returns self."""
        dev = get_device(device)
        for param in self.get_parameters():
            param.place_on(dev)
        return self

    @property
    def pipeline_stage(self):
        return self._pipeline_stage

    @pipeline_stage.setter
    def pipeline_stage(self, stage):
        if isinstance(stage, bool) or not isinstance(stage, int):
            raise TypeError(f"{type(self).__name__}.pipeline_stage must be an int, got {stage!r}")
        if stage < 0:
            raise ValueError(f"{type(self).__name__}.pipeline_stage must be a non-negative int, "
                             f"got {stage}")
        object.__setattr__(self, "_pipeline_stage", stage)

    def infer_param_pipeline_stage(self):
        """The trainable parameters of this rank's pipeline stage: those of the cells whose
        ``pipeline_stage`` (or an ancestor's) is the stage of this rank, and those given the
        stage with ``Parameter.add_pipeline_stage``. Build the stage's optimizer from them.

        Without pipeline parallelism (``pipeline_stages`` 1) every trainable parameter. A
        trainable parameter that belongs to no stage is a RuntimeError, as in MindSpore.
        """
        return extension().stage_parameters(self)

    # ---- memory -----------------------------------------------------------------------
    def recompute(self, mode=True, **kwargs):
        """MindSpore's ``Cell.recompute()``: the cell keeps only its inputs and runs its
        forward again during backward instead of keeping its activations
        (``minitorch_dist/recompute.py``): the same gradients, bit for bit, with less peak
        memory. ``mode=False`` turns it off. MindSpore's ``mp_comm_recompute``,
        ``parallel_optimizer_comm_recompute`` and ``recompute_slice_activation`` (bools)
        tune which communication of its static graph is recomputed: here the whole cell is
        recomputed, communication included, so they are checked and noted once. Returns
        self.

        >>> from minitorch_dist import nn
        >>> nn.Dense(2, 2).recompute().get_flags()
        {}
        """
        if not isinstance(mode, bool):
            raise TypeError(f"{type(self).__name__}.recompute: mode must be True or False, got "
                            f"{mode!r}")
        known = ("mp_comm_recompute", "parallel_optimizer_comm_recompute",
                 "recompute_slice_activation")
        for key, value in kwargs.items():
            if key not in known:
                raise TypeError(f"{type(self).__name__}.recompute: unknown argument {key!r}; "
                                f"expected mode and {list(known)}")
            if not isinstance(value, bool):
                raise TypeError(f"{type(self).__name__}.recompute: {key} must be True or False, "
                                f"got {value!r}")
            _once(f"Cell.recompute.{key}", "Cell.recompute(%s=...) is noted: the whole cell is "
                  "recomputed here, its communication included", key)
        object.__setattr__(self, "_recompute", mode)
        return self

    # ---- communication ----------------------------------------------------------------
    def set_comm_fusion(self, fusion_type, recurse=True):
        """Give every parameter of this cell (and of its sub-cells with ``recurse``) the
        fusion id ``fusion_type`` (``Parameter.comm_fusion``): under data parallel and
        optimizer parallel the gradients (and slices) of one id travel in one collective
        (``docs/memory_and_communication.md``). Returns self.

        >>> from minitorch_dist import nn
        >>> layer = nn.Dense(2, 2).set_comm_fusion(3)
        >>> [p.comm_fusion for p in layer.trainable_params()]
        [3, 3]
        """
        if isinstance(fusion_type, bool) or not isinstance(fusion_type, int):
            raise TypeError(f"{type(self).__name__}.set_comm_fusion: fusion_type must be an "
                            f"int, got {fusion_type!r}")
        if fusion_type < 0:
            raise ValueError(f"{type(self).__name__}.set_comm_fusion: fusion_type must be >= 0, "
                             f"got {fusion_type}")
        for param in self.get_parameters(expand=bool(recurse)):
            param.comm_fusion = fusion_type
        return self

    # ---- display ----------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"{type(self).__name__}<{self.extra_repr()}>"]
        for name, cell in self._cells.items():
            child = repr(cell).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child}")
        return "\n".join(lines)


def _prefix_primitive_names(cell, prefix):
    for path, prim in cell.primitives_and_names():
        prim.instance_name = f"{prefix}.{path}"
