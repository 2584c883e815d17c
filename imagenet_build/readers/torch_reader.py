"""The PyTorch reader (imagenet_build.torch: torch_dataset.py and the modules it imports) as the registry knows
it. Declared apart from its code, which imports torch when it is imported: importing the reader library registers
every reader without importing torch (imagenet_build.dali and .tfdata users need not have it)."""

from imagenet_build.readers.registry import BuildReader, register

READER = register(BuildReader(name="torch", title="PyTorch reader (imagenet_build.torch)", needs=("torch",
                                                                                                  "torchvision")))
