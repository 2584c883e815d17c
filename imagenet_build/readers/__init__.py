"""The reader library: a build read back through DALI (imagenet_build.dali), PyTorch (imagenet_build.torch),
tf.data (imagenet_build.tfdata) and Grain (imagenet_build.grain), each reader registered in registry.py.
Importing the package registers the readers it holds; trainer-check (imagenet_build.trainercheck) registers
the readers it trains through."""

from imagenet_build.readers import grain_source, tfdata_dataset  # noqa: F401  (they register)
