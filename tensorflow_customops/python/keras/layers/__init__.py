"""Keras layers: `tfco.layers.RoIPool`, `RoIAlign`, `PSRoIPool`, `PSRoIAlign`,
`MultiScaleRoIAlign`."""

from tensorflow_customops.python.keras.layers.roi_layers import (
    MultiScaleRoIAlign,
    PSRoIAlign,
    PSRoIPool,
    RoIAlign,
    RoIPool,
)

__all__ = ["MultiScaleRoIAlign", "PSRoIAlign", "PSRoIPool", "RoIAlign", "RoIPool"]
