"""The public tf.data reader, importable as imagenet_build.tfdata; its code is imagenet_build.readback.tfdata."""

from imagenet_build.readback.tfdata import *  # noqa: F401,F403
from imagenet_build.readback.tfdata import __all__  # noqa: F401
