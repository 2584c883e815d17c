"""infra/read_door.py: what is not a regular file refused before a byte is read (a FIFO nobody writes to, a device,
a socket, a folder, a link to one), a whole read bounded, each refusal in its exact line; an object store's objects
read the same way."""

import contextlib
import errno
import hashlib
import io
import os
import pickle
import socket
import stat
import threading

import pytest

from imagenet_build.infra import read_door
from imagenet_build.infra.errors import input_errors
from imagenet_build.infra.read_door import FolderNotFile, NotRegularFile, TooLarge


@pytest.fixture
def nodes(tmp_path):
    """A file, a FIFO nobody writes to, a socket, a folder, /dev/zero, and links to the FIFO and to /dev/zero."""
    (tmp_path / "file").write_bytes(b"0123456789")
    os.mkfifo(tmp_path / "fifo")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "socket"))
    (tmp_path / "folder").mkdir()
    os.symlink(tmp_path / "fifo", tmp_path / "to-fifo")
    os.symlink("/dev/zero", tmp_path / "to-zero")
    yield tmp_path
    server.close()


REFUSED = {"fifo": "a FIFO", "socket": "a socket", "folder": "a folder", "to-fifo": "a FIFO",
           "to-zero": "a character device"}


@pytest.mark.parametrize("name", REFUSED)
@pytest.mark.parametrize("call", ["open_fd", "open_read", "read_bytes", "check_regular"])
def test_what_is_no_regular_file_is_refused_unread(nodes, name, call):
    done = threading.Event()  # a FIFO opened to wait for a writer would hang: the test would never end
    result = []

    def attempt():
        try:
            getattr(read_door, call)(nodes / name)
        except BaseException as e:  # any error is the test's to judge: one that ended the thread would wait 60 s
            result.append(e)
        done.set()

    threading.Thread(target=attempt, daemon=True).start()
    assert done.wait(60), f"{call}({name}) blocked"
    (error,) = result
    assert type(error) is (FolderNotFile if name == "folder" else NotRegularFile)
    assert (error.filename, error.strerror, error.kind) == (str(nodes / name), f"not a regular file ({REFUSED[name]})",
                                                           REFUSED[name])
    assert str(error) == f"{nodes / name}: not a regular file ({REFUSED[name]})"
    assert error.errno == (errno.EISDIR if name == "folder" else errno.EINVAL)


def test_a_folder_is_what_open_would_have_said_and_a_refusal_survives_a_worker(nodes):
    with pytest.raises(IsADirectoryError):
        read_door.read_bytes(nodes / "folder")
    with pytest.raises(Exception) as said, input_errors(nodes / "folder", expected="an image"):
        read_door.read_bytes(nodes / "folder")
    assert str(said.value) == f"{nodes / 'folder'}: is a folder, expected an image"
    for error in (FolderNotFile(nodes / "folder", "a folder"), NotRegularFile(nodes / "fifo", "a FIFO"),
                  TooLarge(nodes / "file", 4)):
        again = pickle.loads(pickle.dumps(error))
        assert (type(again), str(again), again.errno) == (type(error), str(error), error.errno)


@pytest.mark.parametrize("mode, kind", [
    (stat.S_IFLNK, "a symbolic link"), (stat.S_IFDIR, "a folder"), (stat.S_IFIFO, "a FIFO"),
    (stat.S_IFCHR, "a character device"), (stat.S_IFBLK, "a block device"), (stat.S_IFSOCK, "a socket"),
    (stat.S_IFREG, "a file"),
])
def test_each_kind_of_path_is_named(mode, kind):
    assert read_door.kind_of(mode | 0o644) == kind


class _Spy:
    """A file whose reads are recorded: how much a reader asks for."""

    def __init__(self, data):
        self.file, self.asked = io.BytesIO(data), []

    def read(self, size=-1):
        self.asked.append(size)
        return self.file.read(size)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_nothing_is_read_past_a_limit_and_a_digest_reads_by_blocks(nodes, monkeypatch):
    spy = _Spy(b"0" * 100)
    monkeypatch.setattr(read_door, "open_read", lambda path, *a, **k: spy)
    with pytest.raises(TooLarge):
        read_door.read_bytes(nodes / "file", limit=9)
    assert spy.asked == [10]
    with pytest.raises(TooLarge):
        read_door.read_text(nodes / "file", limit=9)
    monkeypatch.setattr(read_door, "HASH_BLOCK", 64)
    spy.file.seek(0)
    spy.asked.clear()
    assert read_door.sha256(nodes / "file") == hashlib.sha256(b"0" * 100).hexdigest() and spy.asked == [64] * 3


def test_a_regular_file_and_a_link_to_one_are_read(nodes):
    os.symlink(nodes / "file", nodes / "to-file")
    for name in ("file", "to-file"):
        read_door.check_regular(nodes / name)
        assert read_door.read_bytes(nodes / name) == b"0123456789"
        with read_door.open_read(nodes / name, buffering=0) as f:
            f.seek(4)
            assert f.read(3) == b"456" and isinstance(f, io.FileIO)  # unbuffered: no read-ahead
        with read_door.open_read(nodes / name) as f:
            assert isinstance(f, io.BufferedReader)
        fd = read_door.open_fd(nodes / name)
        try:
            assert os.pread(fd, 2, 8) == b"89"
        finally:
            os.close(fd)
        fd, info = read_door.opened(nodes / name)
        os.close(fd)
        assert (info.st_size, info.st_ino) == (10, os.stat(nodes / "file").st_ino)
    with pytest.raises(FileNotFoundError):
        read_door.read_bytes(nodes / "nowhere")
    with pytest.raises(FileNotFoundError):
        read_door.check_regular(nodes / "nowhere")


def test_a_whole_read_is_bounded(nodes):
    assert read_door.read_bytes(nodes / "file", limit=10) == b"0123456789"
    with pytest.raises(TooLarge) as error:
        read_door.read_bytes(nodes / "file", limit=9)
    assert str(error.value) == f"{nodes / 'file'}: larger than 9 bytes, more than any such file holds"
    assert (error.value.errno, error.value.limit) == (errno.EFBIG, 9)
    assert str(TooLarge("f", 1 << 30)) == "f: larger than 1,073,741,824 bytes, more than any such file holds"


def test_text_is_read_as_open_reads_it(nodes):
    (nodes / "labels.txt").write_bytes("\ufeffn01440764\r\nn01443537\n".encode())
    assert read_door.read_text(nodes / "labels.txt", encoding="utf-8-sig") == "n01440764\r\nn01443537\n"
    assert read_door.read_text(nodes / "file", limit=10) == "0123456789" == read_door.open_text(nodes / "file").read()
    with read_door.open_text(nodes / "labels.txt", encoding="utf-8-sig") as f:
        assert list(f) == ["n01440764\n", "n01443537\n"]
    (nodes / "latin").write_bytes(b"\xe9")
    with pytest.raises(UnicodeDecodeError):
        read_door.read_text(nodes / "latin")


def test_a_folder_is_opened_to_be_synced_and_nothing_else(nodes):
    fd = read_door.open_folder(nodes / "folder")
    os.fsync(fd)
    os.close(fd)
    with pytest.raises(NotADirectoryError):
        read_door.open_folder(nodes / "file")


def test_a_files_digest_and_none_for_what_cannot_be_read(nodes, monkeypatch):
    monkeypatch.setattr(read_door, "HASH_BLOCK", 3)  # several blocks
    assert read_door.sha256(nodes / "file") == hashlib.sha256(b"0123456789").hexdigest()
    assert read_door.sha256(nodes / "nowhere") is None and read_door.sha256(nodes / "to-zero") is None


def test_an_objects_reads_are_bounded_and_ranged(bucket):
    from imagenet_build.infra import write_door

    url = f"{bucket}/shard"
    write_door.write_bytes(url, b"0123456789")
    read_door.check_regular(url)
    assert read_door.read_bytes(url) == b"0123456789" == read_door.read_bytes(url, limit=10)
    with pytest.raises(TooLarge):
        read_door.read_bytes(url, limit=9)
    with read_door.open_read(url, random_access=True) as f:
        f.seek(4)
        assert f.read(3) == b"456" and f.cache.name == "none"  # exactly the bytes asked, no read-ahead
    with read_door.open_read(url) as f:
        assert f.read() == b"0123456789" and f.cache.name != "none"
    assert read_door.sha256(url) == hashlib.sha256(b"0123456789").hexdigest()
    with pytest.raises(FileNotFoundError):
        read_door.read_bytes(f"{bucket}/nowhere", limit=9)


def test_an_objects_url_is_never_read_as_a_local_path(bucket, tmp_path, monkeypatch):
    """s3://b/x taken as a local path is s3:/b/x below the working folder: never the object."""
    from imagenet_build.infra import write_door

    write_door.write_bytes(f"{bucket}/x", b"the object")
    monkeypatch.chdir(tmp_path)
    local = tmp_path / "s3:" / bucket.split("://")[1]
    local.mkdir(parents=True)
    (local / "x").write_bytes(b"a local file, larger than the object")
    assert read_door.read_bytes(f"{bucket}/x", limit=10) == b"the object"
    with pytest.raises(TooLarge) as error:
        read_door.read_bytes(f"{bucket}/x", limit=9)
    assert str(error.value) == f"{bucket}/x: larger than 9 bytes, more than any such file holds"


@pytest.fixture
def fetched(monkeypatch):
    """The sizes of the bodies each GET of an object brought back from the server, in order."""
    import s3fs

    sizes, call = [], s3fs.S3FileSystem._call_s3

    async def counted(self, method, *args, **kwargs):
        out = await call(self, method, *args, **kwargs)
        if method == "get_object":
            sizes.append(out["ContentLength"])
        return out

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", counted)
    return sizes


def test_an_object_is_read_no_further_than_its_limit(bucket, fetched):
    from imagenet_build.infra import write_door

    write_door.write_bytes(f"{bucket}/large", b"x" * (1 << 20))
    write_door.write_bytes(f"{bucket}/empty", b"")
    with pytest.raises(TooLarge):
        read_door.read_bytes(f"{bucket}/large", limit=9)
    assert fetched == [10]  # one ranged read of limit + 1 bytes, not the object
    assert read_door.read_bytes(f"{bucket}/empty", limit=9) == b""  # nothing asked of an empty object's bytes
    assert read_door.read_bytes(f"{bucket}/large", limit=1 << 20) == b"x" * (1 << 20)
    assert fetched == [10, 1 << 20]


@contextlib.contextmanager
def replaced_once_sized(bucket, monkeypatch, body):
    """The object `bucket`/manifest.json, `{}`, replaced by `body` just after its size is first asked: yields its URL
    and the sizes answered before it was replaced (a file system made meanwhile binds its calls to the spy)."""
    import boto3
    import s3fs

    from imagenet_build.infra import write_door

    url, name = f"{bucket}/manifest.json", bucket.split("://")[1]
    write_door.write_bytes(url, b"{}")
    info, sized = s3fs.S3FileSystem._info, []

    async def sized_then_replaced(self, path, *args, **kwargs):
        out = await info(self, path, *args, **kwargs)
        if not sized:
            boto3.client("s3").put_object(Bucket=name, Key="manifest.json", Body=body)
            sized.append(out["size"])
        return out

    monkeypatch.setattr(s3fs.S3FileSystem, "_info", sized_then_replaced)
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        yield url, sized
    finally:
        s3fs.S3FileSystem.clear_instance_cache()  # none left bound to the spy for the next test


def test_an_object_replaced_by_a_larger_one_once_sized_is_not_read_past_its_limit(bucket, fetched, monkeypatch):
    """The object grows between the moment its size is known and its bytes are read: never a read of the new
    object's whole, nor more than the limit handed back."""
    with replaced_once_sized(bucket, monkeypatch, b" " * (1 << 20)) as (url, sized):
        with pytest.raises(OSError):  # the object opened is gone: the read is refused, not made of the new one
            read_door.read_bytes(url, limit=100)
    assert sized == [2] and sum(fetched) <= 101


def test_an_object_read_whole_is_the_object_as_one_get_brings_it(bucket, monkeypatch):
    """Without a limit, an object is read in one GET of whatever it is then: replaced by a larger one after its size
    was asked, it is the new object, whole, never cut to the old size nor refused."""
    with replaced_once_sized(bucket, monkeypatch, b"{" + b" " * 100 + b"}") as (url, sized):
        assert read_door.read_bytes(url) == b"{" + b" " * 100 + b"}"
    assert sized == [2]
