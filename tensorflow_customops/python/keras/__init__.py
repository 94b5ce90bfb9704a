"""Keras 3 layers over the custom ops."""
