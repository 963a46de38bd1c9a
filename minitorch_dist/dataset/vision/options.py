"""``Inter`` (interpolation) and ``Border`` (padding mode), MindSpore's enums."""
import enum


class Inter(enum.Enum):
    """How Resize and RandomResizedCrop interpolate (Pillow's filters, see ``resample``)."""
    NEAREST = "nearest"
    LINEAR = "bilinear"
    BILINEAR = "bilinear"
    CUBIC = "bicubic"
    BICUBIC = "bicubic"
    AREA = "area"
    ANTIALIAS = "antialias"


class Border(enum.Enum):
    """How RandomCrop and Pad fill the border (NumPy's ``np.pad`` modes)."""
    CONSTANT = "constant"
    EDGE = "edge"
    REFLECT = "reflect"
    SYMMETRIC = "symmetric"


def check_enum(what, name, value, kind):
    if not isinstance(value, kind):
        raise TypeError(f"{what}: {name} must be a {kind.__name__} member "
                        f"({', '.join(m for m in kind.__members__)}), got {value!r}")
    return value.value
