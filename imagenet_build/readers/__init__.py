"""The reader library: a build read back through DALI (imagenet_build.dali), PyTorch (imagenet_build.torch),
tf.data (imagenet_build.tfdata) and Grain (imagenet_build.grain), each reader registered in registry.py:
importing the package registers every reader of the library (trainer-check's trainers read through them)."""

from imagenet_build.readers import dali_pipeline, grain_source, tfdata_dataset, torch_reader  # noqa: F401
