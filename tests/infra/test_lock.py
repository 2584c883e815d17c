"""infra/lock.py: one writer per folder."""

import os

import pytest

from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.lock import FolderLock


def test_a_held_lock_refuses_a_second_holder_until_released(tmp_path):
    with FolderLock(tmp_path / "out", "imagenet-build convert"):
        with pytest.raises(BuildError, match=f"in use by another imagenet-build .*pid {os.getpid()}"):
            with FolderLock(tmp_path / "out"):
                pass
    with FolderLock(tmp_path / "out"):  # released: free again
        pass
