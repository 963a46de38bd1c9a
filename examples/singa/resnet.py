"""A ResNet written the way SINGA's examples write it, for the SINGA facade.

SINGA's ``examples/cnn/autograd/resnet_cifar10.py``, ``resnet_dist.py`` and
``cifar10_multiprocess.py`` do ``from resnet import resnet50`` and call the network on a
batch (``out = model(tx)``), a module SINGA's repository no longer ships. This is that
module, in SINGA 3.x style: ``layer.Layer`` blocks, the downsample convolution and batch
norm held only by a closure, the blocks kept in lists and registered with
``register_layers``, and a plain attribute (``self.inplanes``) set before
``super().__init__()``. Those are the patterns the facade has to train correctly.

The network is the usual ResNet (He et al.): a 7x7 stride-2 stem with max pooling, four
stages of Basic or Bottleneck blocks, global average pooling (so any input of 32 pixels or
more works) and a ``Linear`` classifier. ``width`` scales every stage's channels (64 is
ResNet's; tests use 8).

>>> import numpy as np
>>> from minitorch_dist.singa import tensor
>>> net = resnet18(num_classes=10, width=4)
>>> net(tensor.from_numpy(np.zeros((2, 3, 32, 32), np.float32))).shape
(2, 10)
>>> sorted(n for n in net.get_params() if "downsample" in n)[:2]
['BasicBlock_2.downsample.bn.bias', 'BasicBlock_2.downsample.bn.scale']
"""
from minitorch_dist.singa import autograd, layer

__all__ = ["ResNet", "BasicBlock", "Bottleneck", "resnet18", "resnet34", "resnet50",
           "resnet101", "resnet152"]


def conv3x3(in_planes, out_planes, stride=1):
    """3x3 convolution with padding 1, no bias (SINGA's older argument form)."""
    return layer.Conv2d(in_planes, out_planes, 3, stride=stride, padding=1, bias=False)


class BasicBlock(layer.Layer):
    """Two 3x3 convolutions with a residual connection."""

    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = layer.BatchNorm2d(planes)
        self.relu1 = layer.ReLU()
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = layer.BatchNorm2d(planes)
        self.add = layer.Add()
        self.relu2 = layer.ReLU()
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        residual = x
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            residual = self.downsample(x)
        return self.relu2(self.add(out, residual))


class Bottleneck(layer.Layer):
    """1x1, 3x3, 1x1 convolutions (the last one ``expansion`` times wider), residual."""

    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = layer.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = layer.BatchNorm2d(planes)
        self.relu1 = layer.ReLU()
        self.conv2 = layer.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = layer.BatchNorm2d(planes)
        self.relu2 = layer.ReLU()
        self.conv3 = layer.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = layer.BatchNorm2d(planes * self.expansion)
        self.add = layer.Add()
        self.relu3 = layer.ReLU()
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        residual = x
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            residual = self.downsample(x)
        return self.relu3(self.add(out, residual))


class ResNet(layer.Layer):
    """``ResNet(block, layers, num_classes=1000, num_channels=3, width=64)``; calling it
    on an NCHW batch returns the logits."""

    def __init__(self, block, layers, num_classes=1000, num_channels=3, width=64):
        self.inplanes = width               # before super().__init__(), as SINGA's ResNet
        super().__init__()
        self.num_classes = num_classes
        self.conv1 = layer.Conv2d(num_channels, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = layer.BatchNorm2d(width)
        self.relu = layer.ReLU()
        self.maxpool = layer.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1, layers1 = self._make_layer(block, width, layers[0])
        self.layer2, layers2 = self._make_layer(block, 2 * width, layers[1], stride=2)
        self.layer3, layers3 = self._make_layer(block, 4 * width, layers[2], stride=2)
        self.layer4, layers4 = self._make_layer(block, 8 * width, layers[3], stride=2)
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(num_classes)
        self.register_layers(*layers1, *layers2, *layers3, *layers4)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            conv = layer.Conv2d(self.inplanes, planes * block.expansion, 1, stride=stride,
                                bias=False)
            bn = layer.BatchNorm2d(planes * block.expansion)

            def _downsample(x):
                return bn(conv(x))

            downsample = _downsample
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))

        def forward(x):
            for lyr in layers:
                x = lyr(x)
            return x

        return forward, layers

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = autograd.globalaveragepool(x)
        return self.fc(self.flatten(x))


def resnet18(**kwargs):
    """ResNet-18: BasicBlocks [2, 2, 2, 2]."""
    return ResNet(BasicBlock, [2, 2, 2, 2], **kwargs)


def resnet34(**kwargs):
    """ResNet-34: BasicBlocks [3, 4, 6, 3]."""
    return ResNet(BasicBlock, [3, 4, 6, 3], **kwargs)


def resnet50(**kwargs):
    """ResNet-50: Bottlenecks [3, 4, 6, 3]."""
    return ResNet(Bottleneck, [3, 4, 6, 3], **kwargs)


def resnet101(**kwargs):
    """ResNet-101: Bottlenecks [3, 4, 23, 3]."""
    return ResNet(Bottleneck, [3, 4, 23, 3], **kwargs)


def resnet152(**kwargs):
    """ResNet-152: Bottlenecks [3, 8, 36, 3]."""
    return ResNet(Bottleneck, [3, 8, 36, 3], **kwargs)
