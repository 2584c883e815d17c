"""verify: prove a build folder sound. Importing the package registers every check (one class each)."""

from imagenet_build.verify import folder_checks, label_checks, record_checks, shard_checks  # noqa: F401
