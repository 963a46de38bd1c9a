"""O2 vs O0: one ResNet training step's time and the accuracy after a short run (CPU)."""
import time
import numpy as np
import minitorch_dist as ms
from minitorch_dist import nn, ops
from minitorch_dist.amp import build_train_network, DynamicLossScaleManager


class Block(nn.Cell):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, pad_mode="same")
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, pad_mode="same")
        self.b2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.down = None if stride == 1 and cin == cout else nn.SequentialCell(
            nn.Conv2d(cin, cout, 1, stride, pad_mode="same"), nn.BatchNorm2d(cout))

    def construct(self, x):
        y = self.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return self.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Cell):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.SequentialCell(nn.Conv2d(3, 16, 3, 1, pad_mode="same"), nn.BatchNorm2d(16), nn.ReLU())
        self.layers = nn.SequentialCell(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2), Block(64, 64, 1))
        self.mean = ops.ReduceMean(keep_dims=False)
        self.fc = nn.Dense(64, classes)

    def construct(self, x):
        return self.fc(self.mean(self.layers(self.stem(x)), (2, 3)))


def data(n, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n).astype(np.int32)
    centres = rng.normal(size=(10, 3, 1, 1)).astype(np.float32)
    x = centres[y] + 0.8 * rng.normal(size=(n, 3, 16, 16)).astype(np.float32)
    return x, y


def build(level):
    ms.set_seed(0)
    net = ResNet()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), 0.02, 0.9)
    manager = DynamicLossScaleManager(2 ** 10, 2, 1000) if level == "O2" else None
    return net, build_train_network(net, opt, loss, level=level, loss_scale_manager=manager)


def main(steps=40, batch=32):
    """Both levels step in turn on the same batches (a loaded machine slows both alike)."""
    nets = {level: build(level) for level in ("O0", "O2")}
    times = {level: [] for level in nets}
    x, y = data(batch * 8, 1)
    for i in range(steps):
        j = (i % 8) * batch
        for level, (_, step) in nets.items():
            t0 = time.perf_counter()
            out = step(ms.Tensor(x[j:j + batch]), ms.Tensor(y[j:j + batch]))
            times[level].append(time.perf_counter() - t0)
            if isinstance(out, tuple) and bool(out[1]):
                print(f"{level}: step {i} overflowed and was skipped")
    xt, yt = data(256, 1)
    for level, (net, _) in nets.items():
        net.set_train(False)
        acc = (net(ms.Tensor(xt)).asnumpy().argmax(1) == yt).mean()
        print(f"{level}: {np.median(times[level][3:]) * 1e3:.1f} ms/step (median), "
              f"train-set accuracy after {steps} steps {acc:.3f}")
    print(f"O2/O0 step time ratio: {np.median(times['O2'][3:]) / np.median(times['O0'][3:]):.2f}")


if __name__ == "__main__":
    main()
