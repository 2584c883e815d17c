"""imagenet-build: ImageNet to TF-slim TFRecord shards with DALI indexes.

Data flows one way: sources -> catalog -> plan -> encode -> write -> manifest.
Importing the package is cheap; nothing here imports TensorFlow.
"""

__version__ = "0.1.0"
