"""``Decode`` (encoded bytes -> HWC RGB uint8, through Pillow), ``ToTensor`` and ``ToPIL``
(MindSpore's ``py_transforms`` conversions between Pillow images and arrays)."""
import io

import numpy as np

from ..transforms import Transform


class Decode(Transform):
    """Decode a JPEG/PNG/BMP/... file's bytes (a 1-D uint8 array or ``bytes``) to an
    (H, W, 3) uint8 RGB array; ``to_pil=True`` (1.x ``py_transforms.Decode``) gives the
    Pillow image instead."""

    batchable = False        # images of one stack may decode to different sizes

    def __init__(self, to_pil=False):
        self.to_pil = bool(to_pil)

    def __call__(self, data):
        from PIL import Image, UnidentifiedImageError
        if isinstance(data, (bytes, bytearray)):
            raw = bytes(data)
        else:
            array = np.asarray(data)
            if array.dtype != np.uint8 or array.ndim != 1:
                raise TypeError(f"Decode: expected the encoded file as bytes or a 1-D uint8 array, "
                                f"got dtype {array.dtype} and shape {array.shape} (already decoded?)")
            raw = array.tobytes()
        try:
            image = Image.open(io.BytesIO(raw))
            image.load()
        except (UnidentifiedImageError, OSError) as err:
            raise ValueError(f"Decode: the {len(raw)} bytes are not an image Pillow can read "
                             f"({err})") from None
        image = image.convert("RGB")
        return image if self.to_pil else np.asarray(image).copy()

    def apply_batch(self, data):
        return np.stack([self(d) for d in data])


class ToTensor(Transform):
    """An HWC image (Pillow image or array) -> CHW float32, bytes scaled to [0, 1]."""

    def __init__(self, output_type=np.float32):
        self.output_type = np.dtype(output_type)

    def __call__(self, image):
        return self.apply_batch(np.asarray(image)[None])[0]

    def apply_batch(self, images):
        images = np.asarray(images)
        if images.ndim == 3:
            images = images[..., None]
        if images.ndim != 4:
            raise ValueError(f"ToTensor: expected an image of shape (H, W) or (H, W, C), got shape "
                             f"{images.shape[1:]}")
        out = images.astype(np.float32)
        if images.dtype == np.uint8:
            out /= 255.0
        return np.moveaxis(out, -1, 1).astype(self.output_type)


class ToPIL(Transform):
    """An (H, W) or (H, W, C) uint8 array -> a Pillow image (for the 1.x Pillow transforms)."""

    batchable = False

    def __call__(self, image):
        from PIL import Image
        if isinstance(image, Image.Image):
            return image
        array = np.asarray(image)
        if array.dtype != np.uint8 or array.ndim not in (2, 3):
            raise TypeError(f"ToPIL: expected a uint8 image of shape (H, W) or (H, W, C), got dtype "
                            f"{array.dtype} and shape {array.shape}")
        return Image.fromarray(array[..., 0] if array.ndim == 3 and array.shape[2] == 1 else array)

    def apply_batch(self, images):
        raise TypeError("ToPIL: Pillow images cannot be stacked; it works on one image at a time")
