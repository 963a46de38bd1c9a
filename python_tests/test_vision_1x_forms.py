"""MindSpore 1.x's import paths for the data transforms, and the pipelines that use them:
the CIFAR-10 pipeline of MindSpore's distributed samples (c_transforms), the model zoo's
ImageNet-style pipeline on encoded files (RandomCropDecodeResize), and the Pillow-based
py_transforms (Decode -> Pillow image ... ToTensor -> CHW float)."""
import io
import os

import numpy as np
import pytest
from PIL import Image

import minitorch_dist as ms
import minitorch_dist.dataset as ds
import minitorch_dist.dataset.transforms.c_transforms as C
import minitorch_dist.dataset.transforms.py_transforms as P
import minitorch_dist.dataset.vision.c_transforms as CV
import minitorch_dist.dataset.vision.py_transforms as PV

RNG = np.random.default_rng(1)
IMAGES = RNG.integers(0, 256, (12, 32, 32, 3), dtype=np.uint8)
LABELS = RNG.integers(0, 10, 12)


def test_1x_and_2x_names_are_the_same_transforms():
    assert CV.Resize is ds.vision.Resize and CV.RandomCrop is ds.vision.RandomCrop
    assert C.TypeCast is ds.transforms.TypeCast and C.OneHot is ds.transforms.OneHot
    assert P.Compose is ds.transforms.Compose


def test_the_distributed_samples_cifar_pipeline(tmp_path):
    ds.write_cifar10_bin(os.path.join(tmp_path, "data_batch_1.bin"), IMAGES, LABELS)
    ms.set_seed(0)
    data = ds.Cifar10Dataset(str(tmp_path), shuffle=False)
    ops = [CV.RandomCrop((32, 32), (4, 4, 4, 4)), CV.RandomHorizontalFlip(),
           CV.Resize((64, 64)), CV.Rescale(1.0 / 255.0, 0.0),
           CV.Normalize((0.4465, 0.4822, 0.4914), (0.2010, 0.1994, 0.2023)), CV.HWC2CHW()]
    data = data.map(operations=C.TypeCast(ms.int32), input_columns="label")
    data = data.map(operations=ops, input_columns="image").batch(4, drop_remainder=True)
    batches = list(data.create_tuple_iterator(output_numpy=True))
    assert len(batches) == 3
    image, label = batches[0]
    assert image.shape == (4, 3, 64, 64) and image.dtype == np.float32
    assert label.dtype == np.int32 and label.tolist() == LABELS[:4].tolist()
    # the same steps by hand on the first image, with the crop/flip the transforms drew
    crop, flip = ops[0], ops[1]
    u_crop = type(crop).__new__(type(crop))
    u_crop.__dict__.update(crop.__dict__)
    u_crop._seed = None
    u_flip = type(flip).__new__(type(flip))
    u_flip.__dict__.update(flip.__dict__)
    u_flip._seed = None
    top, left = (u_crop.uniforms(1)[0] * (9, 9)).astype(int)
    window = np.pad(IMAGES[0], ((4, 4), (4, 4), (0, 0)))[top:top + 32, left:left + 32]
    if u_flip.uniforms(1)[0, 0] < 0.5:
        window = window[:, ::-1]
    big = np.asarray(Image.fromarray(np.ascontiguousarray(window)).resize((64, 64), Image.BILINEAR))
    mean = np.array([0.4465, 0.4822, 0.4914], np.float32)
    std = np.array([0.2010, 0.1994, 0.2023], np.float32)
    ref = ((big.astype(np.float32) * np.float32(1 / 255) - mean) / std).transpose(2, 0, 1)
    np.testing.assert_allclose(image[0], ref, rtol=1e-6, atol=1e-6)


def _encoded(image, fmt="PNG"):
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format=fmt)
    return np.frombuffer(buffer.getvalue(), np.uint8)


def test_model_zoo_imagenet_style_pipeline_on_encoded_files():
    files = [_encoded(image) for image in IMAGES[:4]]
    data = ds.GeneratorDataset(lambda: ((f, np.int32(k)) for f, k in zip(files, LABELS)),
                               ["image", "label"], shuffle=False)
    train = data.map([CV.RandomCropDecodeResize(24, scale=(0.08, 1.0), ratio=(0.75, 1.333)),
                      CV.RandomHorizontalFlip(prob=0.5),
                      CV.Normalize(mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                   std=[0.229 * 255, 0.224 * 255, 0.225 * 255]),
                      CV.HWC2CHW()], "image")
    shapes = [row[0].shape for row in train.create_tuple_iterator(output_numpy=True)]
    assert shapes == [(3, 24, 24)] * 4
    evaluate = data.map([CV.Decode(), CV.Resize(40), CV.CenterCrop(32)], "image")
    first = next(iter(evaluate.create_tuple_iterator(output_numpy=True)))[0]
    ref = np.asarray(Image.fromarray(IMAGES[0]).resize((40, 40), Image.BILINEAR))[4:36, 4:36]
    assert np.array_equal(first, ref)


def test_py_transforms_work_on_pillow_images():
    files = [_encoded(image) for image in IMAGES[:3]]
    data = ds.GeneratorDataset(lambda: ((f,) for f in files), ["image"], shuffle=False)
    chain = P.Compose([PV.Decode(), PV.Resize((16, 16)), PV.CenterCrop(12), PV.ToTensor(),
                       PV.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))])
    out = [row[0] for row in data.map(chain, "image").create_tuple_iterator(output_numpy=True)]
    small = np.asarray(Image.fromarray(IMAGES[0]).resize((16, 16), Image.BILINEAR))[2:14, 2:14]
    ref = (small.transpose(2, 0, 1).astype(np.float32) / 255 - 0.5) / 0.25
    np.testing.assert_allclose(out[0], ref, atol=1e-6)
    assert isinstance(PV.Decode()(files[0]), Image.Image)
    assert isinstance(PV.RandomHorizontalFlip()(Image.fromarray(IMAGES[0])), Image.Image)
    assert isinstance(PV.Resize(8)(IMAGES[0]), np.ndarray)       # arrays stay arrays


def test_center_crop_larger_than_the_image_pads_in_both_1x_forms():
    image = IMAGES[0][:5, :6]
    expected = np.zeros((8, 8, 3), np.uint8)
    expected[2:7, 1:7] = image                  # 3 rows: 2 above, 1 below; 2 columns: 1 each
    assert np.array_equal(CV.CenterCrop(8)(image), expected)
    out = PV.CenterCrop(8)(Image.fromarray(image))
    assert isinstance(out, Image.Image) and np.array_equal(np.asarray(out), expected)


def test_one_hot_in_both_forms():
    assert C.OneHot(4)(np.array(2, np.int32)).tolist() == [0, 0, 1, 0]
    rows = C.OneHot(4, smoothing_rate=0.2).apply_batch(np.array([0, 3]))
    np.testing.assert_allclose(rows[0], [0.85, 0.05, 0.05, 0.05], rtol=1e-6)
    assert P.OneHotOp(3)(np.array(1)).tolist() == [0, 1, 0]
    data = ds.NumpySlicesDataset({"label": np.array([1, 2, 0])}, shuffle=False)
    data = data.map(C.OneHot(3), "label").batch(3)
    assert next(iter(data.create_tuple_iterator(output_numpy=True)))[0].tolist() == \
        [[0, 1, 0], [0, 0, 1], [1, 0, 0]]


@pytest.mark.parametrize("call, error, words", [
    (lambda: C.OneHot(3)(np.array(3)), ValueError, ["OneHot", "0..2"]),
    (lambda: C.OneHot(3)(np.array(1.5)), TypeError, ["OneHot", "integer labels"]),
    (lambda: C.OneHot(0), ValueError, ["OneHot", "num_classes"]),
    (lambda: PV.ToPIL()(np.zeros((4, 4), np.float32)), TypeError, ["ToPIL", "uint8"]),
])
def test_bad_input_names_the_transform(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert all(word in str(info.value) for word in words), str(info.value)
