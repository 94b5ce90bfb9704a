"""Keras layers over the custom ops."""
