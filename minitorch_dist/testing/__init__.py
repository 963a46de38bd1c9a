"""Test helpers shipped with the package: gradient checking and reference comparisons."""
from .gradcheck import check_gradients, numerical_gradients, GradientCheckError
