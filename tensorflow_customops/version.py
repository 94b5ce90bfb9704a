"""Version of the tensorflow_customops package."""

__version__ = "0.1.0"
