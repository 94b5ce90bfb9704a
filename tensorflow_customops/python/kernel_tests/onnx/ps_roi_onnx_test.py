"""Placeholder while the handler is written."""

import tensorflow as tf

if __name__ == "__main__":
    tf.test.main()
