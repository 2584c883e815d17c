"""infra/write_door.py, the folders and what is removed: a folder made only where it may be, nothing removed that is
not a regular file (or a folder of this run's), scratch space made and removed, a lock file, links and copies
(the files written: test_write_door.py)."""

import os
import socket
import stat

import pytest

from imagenet_build.infra import read_door, write_door
from imagenet_build.infra.write_door import WriteRefused


def refused(call, *args, **kwargs):
    with pytest.raises(WriteRefused) as error:
        call(*args, **kwargs)
    return error.value.path, error.value.problem


def test_a_file_is_removed_and_nothing_else(tmp_path):
    (tmp_path / "f").write_text("x")
    write_door.remove(tmp_path / "f", within=tmp_path)
    assert not (tmp_path / "f").exists()
    with pytest.raises(FileNotFoundError):
        write_door.remove(tmp_path / "f")
    write_door.remove(tmp_path / "f", missing_ok=True)
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "fifo", tmp_path / "link")
    assert refused(write_door.remove, tmp_path / "fifo") == (
        str(tmp_path / "fifo"), "is a FIFO, not a regular file: left alone: remove it by hand if it is not wanted")
    assert refused(write_door.remove, tmp_path / "link", missing_ok=True)[1].startswith(
        f"is a symbolic link (to {tmp_path / 'fifo'}), not a regular file: left alone")
    (tmp_path / "out").mkdir()
    os.symlink(tmp_path, tmp_path / "out" / "up")
    (tmp_path / "kept").write_text("x")
    assert refused(write_door.remove, tmp_path / "out" / "up" / "kept", within=tmp_path / "out")[1].startswith("lies")
    assert sorted(os.listdir(tmp_path)) == ["fifo", "kept", "link", "out"]


def test_a_folder_is_removed_whole_but_never_through_a_link(tmp_path):
    (tmp_path / "job" / "results").mkdir(parents=True)
    (tmp_path / "job" / "results" / "r.json").write_text("{}")
    write_door.remove_tree(tmp_path / "job", within=tmp_path)
    assert not (tmp_path / "job").exists()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "kept").write_text("x")
    os.symlink(tmp_path / "elsewhere", tmp_path / "job")
    assert refused(write_door.remove_tree, tmp_path / "job") == (
        str(tmp_path / "job"), "is a symbolic link, not a folder of this run's: left alone; remove it")
    (tmp_path / "file").write_text("x")
    assert refused(write_door.remove_tree, tmp_path / "file")[1] == \
        "is a file, not a folder of this run's: left alone; remove it"
    assert refused(write_door.remove_tree, tmp_path / "elsewhere", within=tmp_path / "job")[1].startswith("lies")
    assert (tmp_path / "elsewhere" / "kept").exists() and (tmp_path / "file").exists()


def test_scratch_space_is_made_and_removed_and_nothing_through_a_link(tmp_path):
    with write_door.scratch_folder("imagenet-build-x-", tmp_path) as made:
        assert os.path.isdir(made) and os.path.basename(made).startswith("imagenet-build-x-")
        assert os.path.dirname(made) == str(tmp_path)
        (tmp_path / os.path.basename(made) / "f").write_text("x")
    assert not os.path.exists(made)
    kept = write_door.new_scratch_folder("spool-", tmp_path)
    assert os.path.isdir(kept) and os.path.basename(kept).startswith("spool-")
    assert os.path.dirname(kept) == str(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "f").write_text("x")
    os.symlink(tmp_path / "elsewhere", tmp_path / "link")
    write_door.remove_scratch(tmp_path / "link")
    write_door.remove_scratch(tmp_path / "nowhere")
    write_door.remove_scratch(kept)
    (tmp_path / "file").write_text("x")
    write_door.remove_scratch(tmp_path / "file")
    assert (tmp_path / "file").exists()
    assert not os.path.exists(kept) and (tmp_path / "elsewhere" / "f").exists() and (tmp_path / "link").is_symlink()
    with write_door.scratch_file("imagenet-build-spark-", ".log") as log:
        log.write(b"x")
    assert os.path.basename(log.name).startswith("imagenet-build-spark-") and log.name.endswith(".log")
    assert open(log.name, "rb").read() == b"x"
    os.unlink(log.name)


def test_only_an_empty_folder_is_removed_as_one(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    assert write_door.remove_empty_folder(tmp_path / "empty") is True and not (tmp_path / "empty").exists()
    assert write_door.remove_empty_folder(tmp_path / "full") is False and (tmp_path / "full" / "f").exists()


def test_a_folder_is_made_only_where_it_may_be(tmp_path):
    write_door.make_folder(tmp_path / "a" / "b" / "c", within=tmp_path)
    write_door.make_folder(tmp_path / "a" / "b", within=tmp_path)  # there already
    assert (tmp_path / "a" / "b" / "c").is_dir()
    (tmp_path / "file").write_text("x")
    assert refused(write_door.make_folder, tmp_path / "file") == (str(tmp_path / "file"),
                                                                  "exists and is not a folder")
    (tmp_path / "out").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "out" / "job")
    assert refused(write_door.make_folder, tmp_path / "out" / "job" / "results", within=tmp_path / "out")[1] == (
        f"lies outside {tmp_path / 'out'}, where this verb writes (it leads to {tmp_path / 'elsewhere' / 'results'}: "
        "a link?); remove the link")
    assert os.listdir(tmp_path / "elsewhere") == []
    write_door.make_folder("s3://b/out/job", within="s3://b/out")
    assert refused(write_door.make_folder, "s3://b/other", within="s3://b/out")[1].startswith("lies outside")
    write_door.make_new_folder(tmp_path / "new")
    with pytest.raises(FileExistsError):
        write_door.make_new_folder(tmp_path / "new")


def test_a_folder_made_through_a_link_made_meanwhile_is_refused(tmp_path, monkeypatch):
    (tmp_path / "out").mkdir()
    (tmp_path / "elsewhere").mkdir()
    real_makedirs = os.makedirs

    def racing(path, exist_ok=False):  # another process puts a link there as the folder is made
        os.symlink(tmp_path / "elsewhere", tmp_path / "out" / "job")
        real_makedirs(path, exist_ok=exist_ok)

    monkeypatch.setattr(write_door.os, "makedirs", racing)
    assert refused(write_door.make_folder, tmp_path / "out" / "job", within=tmp_path / "out")[1].startswith(
        f"lies outside {tmp_path / 'out'}")


def test_the_null_device_is_opened_to_write_nowhere():
    fd = write_door.discard()
    try:
        info = os.fstat(fd)
        assert stat.S_ISCHR(info.st_mode) and info.st_rdev == os.stat(os.devnull).st_rdev
        assert os.write(fd, b"silenced") == 8
    finally:
        os.close(fd)


def test_a_lock_file_is_a_regular_file_opened_to_read_and_write(tmp_path):
    fd = write_door.open_lock(tmp_path / "lock")
    try:
        os.pwrite(fd, b"holder", 0)
        assert os.pread(fd, 6, 0) == b"holder"
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o644 & ~_umask()
    finally:
        os.close(fd)
    os.mkfifo(tmp_path / "fifo")
    assert refused(write_door.open_lock, tmp_path / "fifo") == (str(tmp_path / "fifo"),
                                                                "is a FIFO, not a lock file: remove it")
    os.symlink(tmp_path / "lock", tmp_path / "link")
    with pytest.raises(OSError):  # never followed
        write_door.open_lock(tmp_path / "link")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "sock"))
    with pytest.raises(OSError):
        write_door.open_lock(tmp_path / "sock")
    server.close()


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_link_a_copy_and_a_move_replace_nothing_and_stay_inside(tmp_path):
    (tmp_path / "val").mkdir()
    image = tmp_path / "val" / "img.JPEG"
    image.write_bytes(b"jpeg")
    os.utime(image, ns=(1, 2_000_000_000))
    (tmp_path / "val" / "n1").mkdir()
    write_door.hard_link(image, tmp_path / "val" / "n1" / "a.JPEG", within=tmp_path / "val")
    assert os.stat(tmp_path / "val" / "n1" / "a.JPEG").st_ino == os.stat(image).st_ino
    write_door.copy_file(image, tmp_path / "val" / "n1" / "b.JPEG", within=tmp_path / "val")
    copy = tmp_path / "val" / "n1" / "b.JPEG"
    assert copy.read_bytes() == b"jpeg" and os.stat(copy).st_ino != os.stat(image).st_ino
    assert os.stat(copy).st_mtime_ns == 2_000_000_000
    write_door.move(tmp_path / "val" / "n1" / "b.JPEG", tmp_path / "val" / "n1" / "c.JPEG", within=tmp_path / "val")
    assert (tmp_path / "val" / "n1" / "c.JPEG").read_bytes() == b"jpeg" and not copy.exists()
    with pytest.raises(FileExistsError):
        write_door.hard_link(image, tmp_path / "val" / "n1" / "a.JPEG")
    with pytest.raises(FileExistsError) as error:
        write_door.move(image, tmp_path / "val" / "n1" / "a.JPEG")
    assert str(error.value) == f"[Errno 17] File exists: '{tmp_path / 'val' / 'n1' / 'a.JPEG'}'"
    os.symlink(tmp_path, tmp_path / "val" / "n2")
    for call in (write_door.hard_link, write_door.copy_file, write_door.move):
        assert refused(call, image, tmp_path / "val" / "n2" / "x.JPEG", within=tmp_path / "val")[1].startswith("lies")
    assert not (tmp_path / "x.JPEG").exists() and image.exists()
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(read_door.NotRegularFile):
        write_door.copy_file(tmp_path / "fifo", tmp_path / "val" / "d.JPEG")
    assert refused(write_door.copy_file, image, tmp_path / "fifo")[1].startswith("is a FIFO")
    real_replace = os.replace

    def fails(source, target):
        raise OSError(30, "Read-only file system")

    os.replace = fails
    try:
        with pytest.raises(OSError):
            write_door.copy_file(image, tmp_path / "val" / "e.JPEG")
    finally:
        os.replace = real_replace
    assert sorted(os.listdir(tmp_path / "val")) == ["img.JPEG", "n1", "n2"]
    assert sorted(os.listdir(tmp_path)) == ["fifo", "val"]


def test_a_symbolic_link_is_made_new_and_inside(tmp_path):
    (tmp_path / "val").mkdir()
    (tmp_path / "img.JPEG").write_bytes(b"jpeg")
    write_door.symlink(tmp_path / "img.JPEG", tmp_path / "val" / "a.JPEG", within=tmp_path / "val")
    assert os.readlink(tmp_path / "val" / "a.JPEG") == str(tmp_path / "img.JPEG")
    with pytest.raises(FileExistsError):  # a link replaces nothing
        write_door.symlink(tmp_path / "other", tmp_path / "val" / "a.JPEG")
    assert os.readlink(tmp_path / "val" / "a.JPEG") == str(tmp_path / "img.JPEG")
    os.symlink(tmp_path, tmp_path / "val" / "up")
    assert refused(write_door.symlink, tmp_path / "img.JPEG", tmp_path / "val" / "up" / "b.JPEG",
                   within=tmp_path / "val") == (str(tmp_path / "val" / "up" / "b.JPEG"),
                                                f"lies outside {tmp_path / 'val'}, where this verb writes (it leads to "
                                                f"{tmp_path}: a link?); remove the link")
    assert sorted(os.listdir(tmp_path)) == ["img.JPEG", "val"]


def test_a_tree_is_copied_its_files_replaced_each_through_the_doors(tmp_path):
    (tmp_path / "from" / "a").mkdir(parents=True)
    (tmp_path / "from" / "a" / "f").write_text("new")
    (tmp_path / "from" / "g").write_text("g")
    (tmp_path / "to").mkdir()
    (tmp_path / "to" / "g").write_text("old")
    write_door.copy_tree(tmp_path / "from", tmp_path / "to")
    assert (tmp_path / "to" / "a" / "f").read_text() == "new" and (tmp_path / "to" / "g").read_text() == "g"
    os.mkfifo(tmp_path / "from" / "h")
    with pytest.raises(Exception) as error:  # copytree gathers its files' errors
        write_door.copy_tree(tmp_path / "from", tmp_path / "to")
    assert "not a regular file (a FIFO)" in str(error.value) and not (tmp_path / "to" / "h").exists()


def test_objects_are_removed_below_their_prefix_alone(bucket):
    write_door.write_bytes(f"{bucket}/out/job/r.json", b"{}")
    write_door.write_bytes(f"{bucket}/out/m", b"m")
    write_door.remove(f"{bucket}/out/m", within=f"{bucket}/out")
    write_door.remove_tree(f"{bucket}/out/job", within=f"{bucket}/out")
    assert write_door.storage.listdir(f"{bucket}/out") == {}
    write_door.write_bytes(f"{bucket}/kept", b"k")
    for call in (write_door.remove, write_door.remove_tree):
        assert refused(call, f"{bucket}/kept", within=f"{bucket}/out")[1].startswith("lies outside")
    assert write_door.storage.exists(f"{bucket}/kept")
