"""Keras layers: `tfco.layers.RoIPool`, `RoIAlign`, `PSRoIPool`, `PSRoIAlign`,
`MultiScaleRoIAlign`, `DeformConv2D`."""

from tensorflow_customops.python.keras.layers.deform_conv2d_layers import DeformConv2D
from tensorflow_customops.python.keras.layers.roi_layers import (
    MultiScaleRoIAlign,
    PSRoIAlign,
    PSRoIPool,
    RoIAlign,
    RoIPool,
)

__all__ = [
    "DeformConv2D",
    "MultiScaleRoIAlign",
    "PSRoIAlign",
    "PSRoIPool",
    "RoIAlign",
    "RoIPool",
]
