"""Parameter: a trainable tensor with a name, owned by a Cell."""
from ..backend import get_device
from ..tensor import Tensor


class Parameter(Tensor):
    """A tensor the optimizer updates. Its name defaults to its attribute path in the network.

    >>> import minitorch_dist as ms
    >>> from minitorch_dist.common.initializer import initializer
    >>> w = ms.Parameter(initializer("zeros", [2, 3], ms.float32), name="w")
    >>> w.name, w.shape, w.requires_grad
    ('w', (2, 3), True)
    """

    deferred_init = None        # how to draw the values later (nn.utils.no_init_parameters)
    _unplaced = False           # True until it settles on a device (see __init__)

    def __init__(self, default_input, name=None, requires_grad=True, layerwise_parallel=False,
                 parallel_optimizer=True, device=None):
        deferred = getattr(default_input, "deferred_init", None)
        if deferred is not None:
            dev = default_input.device if device is None else get_device(device)
            xp = dev.xp
            self.data = xp.broadcast_to(xp.zeros((), default_input.data.dtype), deferred.shape)
            self.device, self.deferred_init = dev, deferred
            self.grad, self.grad_fn, self._out_index = None, None, 0
        elif isinstance(default_input, Tensor):
            src = default_input.device
            dev = src if device is None else get_device(device)
            data = default_input.data.copy() if dev is src else dev.copy_from(default_input.data, src)
            self.data, self.device = data, dev
            self.grad, self.grad_fn, self._out_index = None, None, 0
        else:
            Tensor.__init__(self, default_input, device=device)
        if self.dtype.kind != "f" and requires_grad:
            requires_grad = False   # integer parameters (counters, ids) are never trained
        self.requires_grad = bool(requires_grad)
        self.name = name
        self._auto_name = name is None
        self.layerwise_parallel = layerwise_parallel
        self.parallel_optimizer = parallel_optimizer
        self.pipeline_stages = set()
        # Until it is placed, a parameter created on the context's device moves, once, to the
        # device of the first primitive that uses it elsewhere (seed 000: weights of host-side
        # MatMuls live on the host instead of crossing the bus every step).
        self._unplaced = device is None

    def place_on(self, device, owner=None):
        """Move this parameter's data to ``device`` for good (counted as one transfer)."""
        device = get_device(device)
        if device is not self.device:
            self.data = device.copy_from(self.data, self.device)
            self.device = device
            self.grad = None
            if owner is not None:
                owner.bytes_in += self.data.nbytes
        self._unplaced = False
        return self

    def prepare_use(self, device, owner):
        """Before primitive ``owner`` on ``device`` reads this parameter: draw deferred
        values (``Tensor.prepare_use``), and, while it is unplaced, settle on ``device`` for
        good instead of being copied there at every use."""
        if self.deferred_init is not None:     # Tensor.prepare_use, inline: a frame less a use
            self.init_data()
        if self._unplaced and device is not self.device:
            self.place_on(device, owner=owner)

    # ---- values not drawn yet (nn.utils.no_init_parameters) ----------------------------
    def asnumpy(self):
        """A NumPy copy of the values; a parameter made under ``no_init_parameters`` draws
        them first, exactly as its first use would (never the zeros it holds until then)."""
        if self.deferred_init is not None:
            self.init_data()
        return super().asnumpy()

    numpy = asnumpy

    def set_data(self, data):
        """Replace the values in place (same shape). A parameter whose values are not drawn
        yet gets its own memory for them (nothing to draw: every value is replaced)."""
        if self.released:
            raise RuntimeError(f"Parameter {self.name!r}: set_data on a parameter released "
                               "on this process (another pipeline stage holds it); load it "
                               "on the rank of its stage")
        if self.deferred_init is not None:
            xp = self.device.xp
            self.data = xp.zeros(self.shape, self.dtype)
            self.deferred_init = None
        return super().set_data(data)

    def set_param_ps(self, init_in_server=False):
        """MindSpore's parameter-server mode (a parameter kept on server processes) does not
        exist here: refused, saying what to use instead."""
        raise NotImplementedError(
            f"Parameter {self.name!r}.set_param_ps: parameter-server training is not supported "
            "here; keep a large table on the host with nn.EmbeddingLookup(..., target='CPU') "
            "and optimizer.target = 'CPU', or split it over the ranks with "
            "slice_mode='table_row_slice'")

    def add_pipeline_stage(self, stage):
        """Mark this parameter as used by pipeline ``stage`` (a shared parameter has several)."""
        if isinstance(stage, bool) or not isinstance(stage, int):
            raise TypeError(f"pipeline stage must be an int, got {stage!r}")
        if stage < 0:
            raise ValueError(f"pipeline stage must be a non-negative int, got {stage!r}")
        self.pipeline_stages.add(stage)

    # A pipeline rank holds only its own stage's parameters: the others keep their shape and
    # dtype but no memory (a read-only zero-stride view), and checkpoints leave them out.
    released = False

    def release(self):
        """Drop this parameter's values on this process (another pipeline stage owns it)."""
        xp = self.device.xp
        self.data = xp.broadcast_to(xp.zeros((), self.dtype), self.shape)
        self.grad = None
        self.released = True
        return self

    def clone(self, name=None):
        if self.deferred_init is not None:      # the copy draws the same values when used
            return Parameter(self, name or self.name, self.requires_grad)
        return Parameter(Tensor._make(self.data.copy(), self.device), name or self.name,
                         self.requires_grad)

    def __repr__(self):
        return f"Parameter(name={self.name}, shape={self.shape}, dtype={self.dtype}, " \
               f"requires_grad={self.requires_grad})"


class ParameterTuple(tuple):
    """A tuple of Parameters (MindSpore's container for optimizer and grad weights)."""

    def __new__(cls, params):
        params = tuple(params)
        for p in params:
            if not isinstance(p, Parameter):
                raise TypeError(f"ParameterTuple holds Parameters, got {type(p).__name__}")
        return super().__new__(cls, params)
