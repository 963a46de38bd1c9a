"""The autograd-aware copy between devices that dispatch inserts for misplaced inputs."""
from time import perf_counter

from ..autograd import Node, is_grad_enabled
from ..row_tensor import RowTensor
from ..tensor import Tensor
from .primitive import Primitive, Context, count_call


class DeviceCopy(Primitive):
    """Copies an array to another device; backward copies the gradient back.

    Bytes are charged to the primitive that needed the copy (``owner``): forward copies as
    its ``bytes_in``, the gradient going back as its ``bytes_out``.
    """

    def backward(self, ctx, grad):
        if isinstance(grad, RowTensor):
            # a sparse gradient travels as its rows: indices and values, never the dense table
            indices = ctx.src.copy_from(grad.indices.data, ctx.device)
            values = ctx.src.copy_from(grad.values.data, ctx.device)
            ctx.owner.bytes_out += indices.nbytes + values.nbytes
            return (RowTensor(Tensor._make(indices, ctx.src), Tensor._make(values, ctx.src),
                              grad.dense_shape),)
        back = ctx.src.copy_from(grad, ctx.device)
        ctx.owner.bytes_out += back.nbytes
        return (back,)


_TENSOR_TO = DeviceCopy()
_TENSOR_TO.instance_name = "Tensor.to"


def copy_to(tensor, device, owner=None):
    """``tensor`` on ``device``; the copy is recorded so gradients flow back across it."""
    if tensor.device is device:
        return tensor
    start = perf_counter()
    data = device.copy_from(tensor.data, tensor.device)
    prim = _TENSOR_TO
    (owner or prim).bytes_in += data.nbytes
    requires = tensor.requires_grad and is_grad_enabled()
    node = None
    if requires:
        ctx = Context(device)
        ctx.src = tensor.device
        ctx.owner = owner or prim
        node = Node(prim, ctx, (tensor,))
    out = Tensor._make(data, device, requires, node)
    if owner is None:
        count_call(prim, device, perf_counter() - start)
    return out
