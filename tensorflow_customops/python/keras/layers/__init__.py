"""Keras 3 layers: `tfco.layers.RoIPool`, `RoIAlign`, `PSRoIPool`, `PSRoIAlign`."""

from tensorflow_customops.python.keras.layers.roi_layers import (
    PSRoIAlign,
    PSRoIPool,
    RoIAlign,
    RoIPool,
)

__all__ = ["PSRoIAlign", "PSRoIPool", "RoIAlign", "RoIPool"]
