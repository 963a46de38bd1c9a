"""Small real data without a download: scikit-learn's bundled 8x8 handwritten digits.

1,797 grey 8x8 images of the digits 0-9 (values 0..16), shipped inside scikit-learn.
:func:`load_digits` turns them into MNIST-like uint8 HWC images, and
:func:`write_digits_as_mnist` writes them as MNIST IDX files so a script written for
``MnistDataset`` runs unchanged on them.
"""
import numpy as np

from .mnist import write_mnist_idx

_SPLIT_SEED = 20240501   # fixed: the split is the same on every machine and every rank


def _sklearn_digits():
    try:
        from sklearn.datasets import load_digits as sklearn_load_digits
    except ImportError:
        raise ImportError("load_digits needs scikit-learn, which ships the digits data: "
                          "pip install scikit-learn") from None
    return sklearn_load_digits()


def _split_indices(labels, test_fraction):
    """Stratified, deterministic split: about ``test_fraction`` of each digit goes to test."""
    rng = np.random.default_rng(_SPLIT_SEED)
    test = []
    for digit in np.unique(labels):
        members = np.flatnonzero(labels == digit)
        test.extend(rng.permutation(members)[:int(round(test_fraction * len(members)))])
    is_test = np.zeros(len(labels), dtype=bool)
    is_test[test] = True
    return np.flatnonzero(~is_test), np.flatnonzero(is_test)


def load_digits(split="train", test_fraction=0.2, as_mnist_shape=True):
    """The scikit-learn digits as ``(images, labels)`` NumPy arrays.

    ``split``: "train", "test" or "all". The split is stratified and fixed (the same on every
    run and rank), samples keep their original order. With ``as_mnist_shape`` (default) the
    images are uint8 HWC ``(N, 8, 8, 1)`` scaled to 0..255, like MNIST, so the ``ds.vision``
    transforms apply; otherwise scikit-learn's flat ``(N, 64)`` float64 features in 0..16.
    Labels are uint8 digits. (Not a doctest: scikit-learn is an optional dependency.) ::

        images, labels = load_digits("test")   # (359, 8, 8, 1) uint8, (359,) uint8
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"load_digits: split must be 'train', 'test' or 'all', got {split!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"load_digits: test_fraction must be in (0, 1), got {test_fraction!r}")
    bunch = _sklearn_digits()
    features, labels = bunch.data, bunch.target.astype(np.uint8)
    if split != "all":
        train, test = _split_indices(labels, test_fraction)
        chosen = train if split == "train" else test
        features, labels = features[chosen], labels[chosen]
    if not as_mnist_shape:
        return features, labels
    images = np.rint(features * (255.0 / 16.0)).astype(np.uint8).reshape(-1, 8, 8, 1)
    return images, labels


def upsample_to_mnist(images):
    """8x8 HWC digits as 28x28 MNIST-like images: each pixel becomes 3x3, then a 2-pixel border.

    MNIST centres its digits in a 20x20 box inside 28x28; this gives a 24x24 digit in 28x28, so
    networks written for MNIST (SINGA's CNN, seed 000's 784-input MLP) run unchanged.

    >>> import numpy as np
    >>> upsample_to_mnist(np.ones((1, 8, 8, 1), np.uint8)).shape
    (1, 28, 28, 1)
    """
    big = images.repeat(3, axis=1).repeat(3, axis=2)
    return np.pad(big, ((0, 0), (2, 2), (2, 2), (0, 0)))


def write_digits_as_mnist(directory, test_fraction=0.2, compress=False, mnist_size=False):
    """Write the digits as MNIST files (``train-*`` and ``t10k-*``) into ``directory``.

    Returns ``directory``; then ``ds.MnistDataset(directory, usage="train")`` reads the 8x8
    digits, or 28x28 ones with ``mnist_size=True`` (see :func:`upsample_to_mnist`).
    """
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images, labels = load_digits(split, test_fraction)
        if mnist_size:
            images = upsample_to_mnist(images)
        write_mnist_idx(directory, images, labels, prefix=prefix, compress=compress)
    return directory
