"""trainer-check: a build trained on through a reader of the reader library (imagenet_build.readers), judged
by one set of checks (checks.py). Each trainer registers itself (trainers.py); importing the package registers
every trainer, and the library's readers they read through."""

import imagenet_build.readers  # noqa: F401  (registers the library's readers)
from imagenet_build.trainercheck import dali_tf, dali_torch, torch_check  # noqa: F401  (they register)
