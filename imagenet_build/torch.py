"""The public PyTorch reader, importable as imagenet_build.torch; its code is imagenet_build.readback.torch_dataset."""

from imagenet_build.readback.torch_dataset import *  # noqa: F401,F403
from imagenet_build.readback.torch_dataset import __all__  # noqa: F401
