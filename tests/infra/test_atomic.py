"""infra/atomic.py: a file replaced whole or not at all."""

import pytest

from imagenet_build.infra import atomic


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "manifest.json"
    atomic.write_atomic(target, b"old")

    def no_space(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space"):
        atomic.write_atomic(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
    atomic.write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
