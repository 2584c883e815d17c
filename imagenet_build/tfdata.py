"""The public tf.data reader, importable as imagenet_build.tfdata; its code is imagenet_build.readers.tfdata_dataset."""

from imagenet_build.readers.tfdata_dataset import *  # noqa: F401,F403
from imagenet_build.readers.tfdata_dataset import __all__  # noqa: F401
