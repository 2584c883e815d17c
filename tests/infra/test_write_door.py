"""infra/write_door.py: a file replaced whole or not at all; nothing written onto what is not a regular file, through
a link, or outside the folder asked for."""

import pytest

from imagenet_build.infra import write_door


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "manifest.json"
    write_door.write_bytes(target, b"old")

    def no_space(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(write_door.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space"):
        write_door.write_bytes(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
    write_door.write_bytes(target, b"new")
    assert target.read_bytes() == b"new"
