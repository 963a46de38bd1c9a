"""The geometry of a 2-D convolution or pooling window: kernel, stride, dilation and padding
read the way MindSpore and PyTorch spell them, and the output size they give.

>>> geo = Geometry(32, 32, (3, 3), (2, 2), (1, 1), "same", None)
>>> (geo.oh, geo.ow, geo.top, geo.bottom)
(16, 16, 0, 1)
"""

__all__ = ["pair", "explicit_pads", "same_pads", "Geometry"]


def pair(value, what, owner="Conv2D"):
    """An int or a 2-tuple as a pair of positive ints; MindSpore's 4-tuples (1, 1, h, w) too."""
    if isinstance(value, int) and not isinstance(value, bool):
        pair = (value, value)
    elif isinstance(value, (tuple, list)) and len(value) in (2, 4) and \
            all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        pair = tuple(value[-2:])
    else:
        raise ValueError(f"{owner}: {what} must be an int or a tuple of 2 ints, got {value!r}")
    if min(pair) < 1:
        raise ValueError(f"{owner}: {what} must be positive, got {value!r}")
    return pair


def explicit_pads(pad):
    """``pad`` (int, (h, w) or (top, bottom, left, right)) as a 4-tuple of non-negative ints."""
    if isinstance(pad, int) and not isinstance(pad, bool):
        pads = (pad,) * 4
    elif isinstance(pad, (tuple, list)) and len(pad) == 2:
        pads = (pad[0], pad[0], pad[1], pad[1])
    elif isinstance(pad, (tuple, list)) and len(pad) == 4:
        pads = tuple(pad)
    else:
        raise ValueError(f"Conv2D: pad must be an int or a tuple of 2 or 4 ints, got {pad!r}")
    if not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in pads):
        raise ValueError(f"Conv2D: pad must hold non-negative ints, got {pad!r}")
    return pads


def same_pads(size, kernel, stride, dilation):
    """TF/MindSpore "same": output = ceil(size / stride); odd extra padding goes after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + dilation * (kernel - 1) + 1 - size, 0)
    return total // 2, total - total // 2


class Geometry:
    """Sizes of one convolution: kernel, stride, dilation, pads and the output size."""

    __slots__ = ("kh", "kw", "sh", "sw", "dh", "dw", "top", "bottom", "left", "right", "oh", "ow")

    def __init__(self, height, width, kernel, stride, dilation, pad_mode, pads):
        self.kh, self.kw = kernel
        self.sh, self.sw = stride
        self.dh, self.dw = dilation
        if pad_mode == "same":
            self.top, self.bottom = same_pads(height, self.kh, self.sh, self.dh)
            self.left, self.right = same_pads(width, self.kw, self.sw, self.dw)
        elif pad_mode == "pad":
            self.top, self.bottom, self.left, self.right = pads
        else:
            self.top = self.bottom = self.left = self.right = 0
        span_h = height + self.top + self.bottom - self.dh * (self.kh - 1) - 1
        span_w = width + self.left + self.right - self.dw * (self.kw - 1) - 1
        self.oh = span_h // self.sh + 1 if span_h >= 0 else 0
        self.ow = span_w // self.sw + 1 if span_w >= 0 else 0

    @property
    def symmetric(self):
        return self.top == self.bottom and self.left == self.right

    def kernel_args(self):
        """Arguments of ``kernels.im2col``/``col2im`` after the input was padded symmetrically."""
        ph, pw = (self.top, self.left) if self.symmetric else (0, 0)
        return self.kh, self.kw, self.sh, self.sw, ph, pw, self.dh, self.dw
