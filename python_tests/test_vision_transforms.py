"""The image transforms (``ds.vision``) against references: Pillow for what Pillow does
(resizing with every filter, crops, flips, colour enhancement, decoding), NumPy formulas
for the rest. Every transform gives the same images on a stack as one image at a time,
random ones draw the same numbers under the same seed, and bad input names the transform
and the shape it expects."""
import colorsys
import io

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageOps

import minitorch_dist as ms
import minitorch_dist.dataset as ds
from minitorch_dist.dataset import vision
from minitorch_dist.dataset.vision import color

RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, (5, 32, 40, 3), dtype=np.uint8)
PIL_FILTERS = [(vision.Inter.LINEAR, Image.BILINEAR), (vision.Inter.CUBIC, Image.BICUBIC),
               (vision.Inter.AREA, Image.BOX), (vision.Inter.ANTIALIAS, Image.LANCZOS)]


def _pil(image):
    return Image.fromarray(image)


@pytest.mark.parametrize("inter, pil_filter", PIL_FILTERS, ids=lambda v: str(v))
@pytest.mark.parametrize("size", [(224, 200), (20, 17), (50, 13), (32, 40)])
def test_resize_equals_pillow_bit_for_bit(inter, pil_filter, size):
    ours = vision.Resize(size, inter).apply_batch(IMAGES)
    for image, out in zip(IMAGES, ours):
        assert np.array_equal(out, np.asarray(_pil(image).resize(size[::-1], pil_filter)))
    assert ours.dtype == np.uint8


def test_resize_float_images_equal_pillow_mode_f():
    image = RNG.random((32, 40), dtype=np.float32)
    ours = vision.Resize((50, 13))(image)
    ref = np.asarray(Image.fromarray(image, "F").resize((13, 50), Image.BILINEAR))
    np.testing.assert_allclose(ours, ref, atol=1e-6)


def test_resize_nearest_and_shorter_side():
    ours = vision.Resize((20, 17), vision.Inter.NEAREST)(IMAGES[0])
    rows = np.floor((np.arange(20) + 0.5) * 32 / 20).astype(int)
    cols = np.floor((np.arange(17) + 0.5) * 40 / 17).astype(int)
    assert np.array_equal(ours, IMAGES[0][rows][:, cols])
    assert vision.Resize(16)(IMAGES[0]).shape == (16, 20, 3)       # shorter side 32 -> 16


def test_center_crop_and_pad_equal_numpy_and_pillow():
    out = vision.CenterCrop((20, 25))(IMAGES[0])
    assert np.array_equal(out, IMAGES[0][6:26, 7:32])
    padded = vision.Pad((1, 2, 3, 4), fill_value=7)(IMAGES[0])
    assert np.array_equal(padded, np.asarray(ImageOps.expand(_pil(IMAGES[0]), (1, 2, 3, 4), fill=(7, 7, 7))))
    edge = vision.Pad(2, padding_mode=vision.Border.EDGE)(IMAGES[0])
    assert np.array_equal(edge, np.pad(IMAGES[0], ((2, 2), (2, 2), (0, 0)), mode="edge"))


def _centre_padded(image, height, width):
    """MindSpore's rule as a formula: zeros around, the odd pixel on top / on the left."""
    grow_h, grow_w = max(0, height - image.shape[0]), max(0, width - image.shape[1])
    out = np.zeros((image.shape[0] + grow_h, image.shape[1] + grow_w) + image.shape[2:], image.dtype)
    top, left = (grow_h + 1) // 2, (grow_w + 1) // 2
    out[top:top + image.shape[0], left:left + image.shape[1]] = image
    return out


@pytest.mark.parametrize("size", [(35, 40), (32, 43), (37, 46), (36, 30), 41])
def test_center_crop_larger_than_the_image_pads_with_zeros_first(size):
    height, width = (size, size) if isinstance(size, int) else size
    padded = _centre_padded(IMAGES[0], height, width)
    top, left = (padded.shape[0] - height) // 2, (padded.shape[1] - width) // 2
    expected = padded[top:top + height, left:left + width]
    got = vision.CenterCrop(size)(IMAGES[0])
    assert got.shape == (height, width, 3) and np.array_equal(got, expected)
    assert np.array_equal(vision.CenterCrop(size).apply_batch(IMAGES)[3],
                          vision.CenterCrop(size)(IMAGES[3]))
    grey_out = vision.CenterCrop(size)(IMAGES[0][..., 0])
    assert np.array_equal(grey_out, expected[..., 0])


def test_center_crop_puts_the_odd_padding_pixel_on_top_and_left():
    out = vision.CenterCrop((4, 5))(np.full((1, 2, 3), 9, np.uint8))
    rows, cols = np.nonzero(out[..., 0])
    assert rows.tolist() == [2, 2] and cols.tolist() == [2, 3]    # 2 rows above, 1 below


def _draws(transform, count):
    """The numbers a fresh ``transform`` draws first (each instance starts from the seed)."""
    twin = type(transform).__new__(type(transform))
    twin.__dict__.update(transform.__dict__)
    twin._seed = None
    return twin.uniforms(count)


def test_random_crop_with_padding_is_a_window_of_the_padded_image():
    ms.set_seed(11)
    crop = vision.RandomCrop((32, 32), (4, 4, 4, 4))
    u = _draws(crop, len(IMAGES))
    out = crop.apply_batch(IMAGES)
    for image, draw, got in zip(IMAGES, u, out):
        padded = np.pad(image, ((4, 4), (4, 4), (0, 0)))
        top, left = int(draw[0] * 9), int(draw[1] * 17)
        assert np.array_equal(got, padded[top:top + 32, left:left + 32])
        assert np.array_equal(got, np.asarray(_pil(padded).crop((left, top, left + 32, top + 32))))


def test_random_horizontal_flip_mirrors_the_drawn_images():
    ms.set_seed(2)
    flip = vision.RandomHorizontalFlip(0.5)
    u = _draws(flip, len(IMAGES))[:, 0]
    out = flip.apply_batch(IMAGES)
    for image, draw, got in zip(IMAGES, u, out):
        ref = np.asarray(ImageOps.mirror(_pil(image))) if draw < 0.5 else image
        assert np.array_equal(got, ref)
    assert 0 < (u < 0.5).sum() < len(u)          # both cases happened
    assert np.array_equal(vision.RandomVerticalFlip(1.0)(IMAGES[0]), IMAGES[0][::-1])


def test_random_resized_crop_equals_pillow_crop_then_resize():
    ms.set_seed(5)
    rrc = vision.RandomResizedCrop((24, 20), scale=(0.2, 0.9))
    twin = type(rrc).__new__(type(rrc))
    twin.__dict__.update(rrc.__dict__)
    boxes = twin.boxes(len(IMAGES), 32, 40)
    out = rrc.apply_batch(IMAGES)
    for image, (top, left, h, w), got in zip(IMAGES, boxes, out):
        assert 0.2 * 1280 * 0.9 <= h * w <= 0.9 * 1280 * 1.1         # the area drawn (rounded)
        ref = _pil(image).crop((left, top, left + w, top + h)).resize((20, 24), Image.BILINEAR)
        assert np.array_equal(got, np.asarray(ref))


@pytest.mark.parametrize("factor", [0.3, 0.8, 1.7])
def test_color_adjust_steps_equal_pillow_image_enhance(factor):
    image = IMAGES[0]
    n = np.array([factor])
    steps = [(lambda x: color.blend(np.zeros_like(x), x, n), ImageEnhance.Brightness),
             (lambda x: color.blend(np.full_like(x, int(color.grey(x).mean() + 0.5)), x, n),
              ImageEnhance.Contrast),
             (lambda x: color.blend(color.grey(x)[..., None], x, n), ImageEnhance.Color)]
    for ours, enhancer in steps:
        got = ours(image[None])[0].astype(np.uint8)
        assert np.array_equal(got, np.asarray(enhancer(_pil(image)).enhance(factor)))


PILLOW_STEPS = (ImageEnhance.Brightness, ImageEnhance.Contrast, ImageEnhance.Color)


@pytest.mark.parametrize("step", [0, 1, 2], ids=["brightness", "contrast", "saturation"])
def test_random_color_adjust_with_one_factor_equals_pillow(step):
    ms.set_seed(4)
    ranges = [(1, 1)] * 3
    ranges[step] = 0.5
    adjust = vision.RandomColorAdjust(*ranges)
    factors = _twin(adjust).factors(len(IMAGES))
    out = adjust.apply_batch(IMAGES)
    for image, f, got in zip(IMAGES, factors, out):
        ref = PILLOW_STEPS[step](_pil(image)).enhance(float(np.float32(f[step])))
        assert np.array_equal(got, np.asarray(ref))


def test_random_color_adjust_follows_the_drawn_order_as_pillow():
    ms.set_seed(4)
    adjust = vision.RandomColorAdjust(brightness=0.5, contrast=0.5, saturation=0.5)
    factors, order = _twin(adjust).parameters(len(IMAGES))
    out = adjust.apply_batch(IMAGES)
    for image, f, steps, got in zip(IMAGES, factors, order, out):
        ref = _pil(image)
        for step in steps[steps != 3]:                  # hue (3) is off here
            ref = PILLOW_STEPS[step](ref).enhance(float(np.float32(f[step])))
        assert np.array_equal(got, np.asarray(ref))


def test_random_color_adjust_order_varies_per_image_and_repeats_under_a_seed():
    # fixed factors, so only the order can make two images' results differ
    images = np.repeat(IMAGES[:1], 24, axis=0)
    def run(seed):
        ms.set_seed(seed)
        return vision.RandomColorAdjust(brightness=(2, 2), contrast=(0.3, 0.3)).apply_batch(images)
    first_b = ImageEnhance.Contrast(ImageEnhance.Brightness(_pil(images[0])).enhance(2.0)).enhance(0.3)
    first_c = ImageEnhance.Brightness(ImageEnhance.Contrast(_pil(images[0])).enhance(0.3)).enhance(2.0)
    out = run(5)
    is_b = [np.array_equal(o, np.asarray(first_b)) for o in out]
    is_c = [np.array_equal(o, np.asarray(first_c)) for o in out]
    assert all(b or c for b, c in zip(is_b, is_c)) and any(is_b) and any(is_c)
    assert np.array_equal(out, run(5))
    ms.set_seed(5)
    orders = vision.RandomColorAdjust(0.1, 0.1, 0.1, 0.1).parameters(200)[1]
    assert np.array_equal(np.sort(orders, axis=1), np.tile(np.arange(4), (200, 1)))
    assert len({tuple(o) for o in orders}) == 24               # every permutation occurs


def _twin(transform):
    """A copy of a fresh (not yet drawn) ``transform`` that draws what it will draw first."""
    twin = type(transform).__new__(type(transform))
    twin.__dict__.update(transform.__dict__)
    return twin


def test_hue_rotation_equals_colorsys():
    pixels = IMAGES[0][:4, :4].reshape(1, 4, 4, 3)
    got = color.rotate_hue(pixels, [0.2])[0].reshape(-1, 3)
    for rgb, out in zip(pixels.reshape(-1, 3) / 255.0, got):
        h, s, v = colorsys.rgb_to_hsv(*rgb)
        ref = np.rint(np.array(colorsys.hsv_to_rgb((h + 0.2) % 1.0, s, v)) * 255)
        assert np.abs(out - ref).max() <= 1


def test_random_color_adjust_identity_and_ranges():
    assert np.array_equal(vision.RandomColorAdjust()(IMAGES[0]), IMAGES[0])
    adjust = vision.RandomColorAdjust(brightness=0.4, contrast=(0.5, 0.6), hue=0.1)
    f = adjust.factors(1000)
    assert f[:, 0].min() >= 0.6 and f[:, 0].max() <= 1.4
    assert f[:, 1].min() >= 0.5 and f[:, 1].max() <= 0.6
    assert np.all(f[:, 2] == 1) and np.abs(f[:, 3]).max() <= 0.1
    assert adjust.apply_batch(IMAGES).shape == IMAGES.shape


def test_slice_patches_cut_row_by_row_and_pad():
    patches = vision.SlicePatches(2, 3)(IMAGES[0])            # 32 x 40: 16 x 14 patches
    assert len(patches) == 6 and all(p.shape == (16, 14, 3) for p in patches)
    padded = np.pad(IMAGES[0], ((0, 0), (0, 2), (0, 0)))
    assert np.array_equal(patches[4], padded[16:32, 14:28])


def test_decode_equals_pillow():
    buffer = io.BytesIO()
    _pil(IMAGES[0]).save(buffer, format="PNG")
    data = np.frombuffer(buffer.getvalue(), np.uint8)
    assert np.array_equal(vision.Decode()(data), IMAGES[0])
    jpeg = io.BytesIO()
    _pil(IMAGES[0]).save(jpeg, format="JPEG")
    ref = np.asarray(Image.open(io.BytesIO(jpeg.getvalue())).convert("RGB"))
    assert np.array_equal(vision.Decode()(jpeg.getvalue()), ref)


@pytest.mark.parametrize("make", [
    lambda: vision.Resize((20, 17)), lambda: vision.CenterCrop(16),
    lambda: vision.RandomCrop(32, 4), lambda: vision.RandomHorizontalFlip(),
    lambda: vision.RandomResizedCrop(16), lambda: vision.RandomColorAdjust(0.4, 0.4, 0.4, 0.1),
    lambda: vision.Pad(3), lambda: vision.Rescale(1 / 255, 0),
    lambda: vision.Normalize((1, 2, 3), (4, 5, 6)), lambda: vision.HWC2CHW(),
], ids=["Resize", "CenterCrop", "RandomCrop", "RandomHorizontalFlip", "RandomResizedCrop",
        "RandomColorAdjust", "Pad", "Rescale", "Normalize", "HWC2CHW"])
def test_a_stack_gives_what_single_images_give_under_one_seed(make):
    ms.set_seed(9)
    stacked = make().apply_batch(IMAGES)
    ms.set_seed(9)
    one_by_one = make()
    singles = np.stack([one_by_one(image) for image in IMAGES])
    assert np.array_equal(stacked, singles)


def test_random_transforms_repeat_under_set_seed_and_differ_without():
    def run(seed):
        ms.set_seed(seed)
        data = ds.NumpySlicesDataset({"image": IMAGES}, shuffle=False)
        data = data.map([vision.RandomCrop(32, 4), vision.RandomHorizontalFlip()], "image")
        return np.stack([row[0] for row in data.create_tuple_iterator(output_numpy=True)])
    first = run(3)
    assert np.array_equal(first, run(3))
    assert not np.array_equal(first, run(4))


@pytest.mark.parametrize("call, error, words", [
    (lambda: vision.Resize(8)(np.zeros((3, 32, 32), np.uint8)), ValueError,
     ["Resize", "(H, W, C)", "(3, 32, 32)", "channels first"]),
    (lambda: vision.RandomCrop(8).apply_batch(np.zeros((2, 3, 32, 32), np.uint8)), ValueError,
     ["RandomCrop", "(H, W, C)", "stack"]),
    (lambda: vision.RandomCrop(40)(IMAGES[0]), ValueError, ["RandomCrop", "(40, 40)", "at most (32, 40)"]),
    (lambda: vision.Resize(0), ValueError, ["Resize", "size", "positive"]),
    (lambda: vision.Resize((8, -1)), ValueError, ["Resize", "size"]),
    (lambda: vision.Resize(8)(np.zeros((4, 4, 3), object)), TypeError, ["Resize", "dtype object"]),
    (lambda: vision.Resize(8)(np.zeros(5, np.uint8)), ValueError, ["Resize", "(H, W)"]),
    (lambda: vision.Resize(8, interpolation="bilinear"), TypeError, ["Resize", "Inter"]),
    (lambda: vision.RandomColorAdjust(0.1)(np.zeros((4, 4, 1), np.uint8)), ValueError,
     ["RandomColorAdjust", "(H, W, 3) RGB"]),
    (lambda: vision.RandomColorAdjust(hue=0.7), ValueError, ["hue", "0.5"]),
    (lambda: vision.RandomResizedCrop(8, scale=(0.9, 0.1)), ValueError, ["RandomResizedCrop", "scale"]),
    (lambda: vision.RandomHorizontalFlip(1.5), ValueError, ["RandomHorizontalFlip", "prob"]),
    (lambda: vision.Decode()(np.zeros((4, 4, 3), np.uint8)), TypeError, ["Decode", "1-D uint8"]),
    (lambda: vision.Decode()(b"not an image"), ValueError, ["Decode", "not an image"]),
    (lambda: vision.RandomCrop(8, padding=-1), ValueError, ["RandomCrop", "padding"]),
    (lambda: vision.SlicePatches(0, 2), ValueError, ["SlicePatches", "num_height"]),
])
def test_bad_input_names_the_transform_and_the_expected_shape(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value), str(info.value)
