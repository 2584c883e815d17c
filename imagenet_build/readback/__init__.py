"""Reading a build back: one module per reader, each registered in readers.py (DALI into TensorFlow or
PyTorch, the PyTorch reader, tf.data, Grain), the public readers (imagenet_build.dali, .torch, .tfdata, .grain)
and trainer-check through any of them. Importing the package registers every reader."""

from imagenet_build.readback import dali_tf, dali_torch, grain_source, tfdata, torch_check  # noqa: F401  (they register)
