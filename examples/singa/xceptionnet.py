"""An Xception written the way SINGA's examples write it, for the SINGA facade.

The structure is SINGA's ``examples/cnn/model/xceptionnet.py`` (Chollet's Xception): an
entry flow of strided blocks, a middle flow of residual blocks, an exit flow, each block a
list of ``ReLU``/``SeparableConv2d``/``BatchNorm2d`` layers registered with
``register_layers`` plus a 1x1 ``Conv2d`` + ``BatchNorm2d`` skip path joined by
``layer.Add``. Two things are adjustable so that it trains on small CPU inputs: ``widths``
(the channel counts; the default is the paper's) and ``middle`` (how many middle-flow blocks,
8 in the paper). The head pools globally, so a 32x32 CIFAR image works as well as 299x299.

>>> import numpy as np
>>> from minitorch_dist.singa import tensor
>>> net = Xception(num_classes=10, widths=(4, 8, 8, 8, 8, 8, 8, 8), middle=1)
>>> net(tensor.from_numpy(np.zeros((2, 3, 32, 32), np.float32))).shape
(2, 10)
>>> "block1.SeparableConv2d_0.depthwise_conv.W" in net.get_params()
True
"""
from minitorch_dist.singa import autograd, layer

__all__ = ["Block", "Xception", "PAPER_WIDTHS"]

PAPER_WIDTHS = (32, 64, 128, 256, 728, 1024, 1536, 2048)


class Block(layer.Layer):
    """``reps`` separable convolutions (each after a ReLU, before a BatchNorm), a max pool
    when ``strides`` > 1, and a residual: the input itself or a strided 1x1 convolution."""

    def __init__(self, in_filters, out_filters, reps, strides=1, padding=0,
                 start_with_relu=True, grow_first=True):
        super().__init__()
        if out_filters != in_filters or strides != 1:
            self.skip = layer.Conv2d(in_filters, out_filters, 1, stride=strides,
                                     padding=padding, bias=False)
            self.skipbn = layer.BatchNorm2d(out_filters)
        else:
            self.skip = None
        self.layers = []
        filters = in_filters
        if grow_first:
            self.layers += [layer.ReLU(), layer.SeparableConv2d(in_filters, out_filters, 3,
                                                                stride=1, padding=1,
                                                                bias=False),
                            layer.BatchNorm2d(out_filters)]
            filters = out_filters
        for _ in range(reps - 1):
            self.layers += [layer.ReLU(), layer.SeparableConv2d(filters, filters, 3, stride=1,
                                                                padding=1, bias=False),
                            layer.BatchNorm2d(filters)]
        if not grow_first:
            self.layers += [layer.ReLU(), layer.SeparableConv2d(in_filters, out_filters, 3,
                                                                stride=1, padding=1,
                                                                bias=False),
                            layer.BatchNorm2d(out_filters)]
        if not start_with_relu:
            self.layers = self.layers[1:]
        if strides != 1:
            self.layers.append(layer.MaxPool2d(3, strides, padding + 1))
        self.register_layers(*self.layers)
        self.add = layer.Add()

    def forward(self, x):
        y = x
        for lyr in self.layers:
            y = lyr(y)
        skip = self.skipbn(self.skip(x)) if self.skip is not None else x
        return self.add(y, skip)


class Xception(layer.Layer):
    """``Xception(num_classes=1000, num_channels=3, widths=PAPER_WIDTHS, middle=8)``."""

    def __init__(self, num_classes=1000, num_channels=3, widths=PAPER_WIDTHS, middle=8):
        super().__init__()
        w = list(widths)
        if len(w) != 8:
            raise ValueError(f"Xception: widths needs 8 channel counts, got {widths!r}")
        self.num_classes = num_classes
        self.conv1 = layer.Conv2d(num_channels, w[0], 3, 2, 0, bias=False)
        self.bn1 = layer.BatchNorm2d(w[0])
        self.relu1 = layer.ReLU()
        self.conv2 = layer.Conv2d(w[0], w[1], 3, 1, 1, bias=False)
        self.bn2 = layer.BatchNorm2d(w[1])
        self.relu2 = layer.ReLU()
        self.block1 = Block(w[1], w[2], 2, 2, padding=0, start_with_relu=False)
        self.block2 = Block(w[2], w[3], 2, 2, padding=0)
        self.block3 = Block(w[3], w[4], 2, 2, padding=0)
        self.middle = [Block(w[4], w[4], 3, 1) for _ in range(middle)]
        self.register_layers(*self.middle)
        self.block12 = Block(w[4], w[5], 2, 2, grow_first=False)
        self.conv3 = layer.SeparableConv2d(w[5], w[6], 3, 1, 1)
        self.bn3 = layer.BatchNorm2d(w[6])
        self.relu3 = layer.ReLU()
        self.conv4 = layer.SeparableConv2d(w[6], w[7], 3, 1, 1)
        self.bn4 = layer.BatchNorm2d(w[7])
        self.relu4 = layer.ReLU()
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(num_classes)

    def features(self, x):
        """Entry, middle and exit flows up to the last batch norm."""
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.relu2(self.bn2(self.conv2(x)))
        x = self.block3(self.block2(self.block1(x)))
        for block in self.middle:
            x = block(x)
        x = self.block12(x)
        x = self.relu3(self.bn3(self.conv3(x)))
        return self.bn4(self.conv4(x))

    def logits(self, features):
        """ReLU, global average pooling and the classifier."""
        x = autograd.globalaveragepool(self.relu4(features))
        return self.fc(self.flatten(x))

    def forward(self, x):
        return self.logits(self.features(x))
