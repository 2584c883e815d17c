"""The one door every file the tool writes goes through: a file created, replaced, renamed or removed, a folder made
or removed, locally or on an object store. No other module opens a file to write, renames or removes one
(tests/architecture/test_doors.py holds the package to it).

Two rules hold here for every path, before a byte is written:

- onto: what is replaced or removed is a regular file or nothing. A device, a FIFO, a socket, a folder or a link is
  never written over, through or removed (run as root, a page written "to" /dev/null would replace the machine's
  /dev/null; one written to a link to /dev/stdout would replace the link): what the tool did not make is left as it
  is, in one line saying so.
- within: a file written below a folder the verb was asked to write into (`within`: an output folder, an index
  folder) stays inside it. Its folder is that folder or one below it, reached without a link that leads elsewhere
  (a `.convert-job` or `results/` made a link to another folder is refused, not written through).

What a verb may write where the user names it (never onto a build, into its index folder or into an input) is the
build's rule, format/output_guard.py's, applied once to each place a verb is given before any work; the guard asks
this door first whether the place may be written at all (`check_target`). A refusal is one WriteRefused line
naming the path. Every file is written atomically: a temporary name in the same folder (created anew, never opened
through whatever a name already is), fsync, rename (an object store has no rename: an object appears whole in one
upload). Each rule is applied once, before the first byte: a file written is checked when it is opened, not per
write.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import InputError, PathLike

_TEMP = re.compile(r"^\..+\.\d+\.tmp$")


class WriteRefused(InputError):
    """A path the door does not write (the onto or within rule): one line naming it."""


def check_target(path: PathLike, removing: bool = False) -> None:
    """The onto rule: `path` is a regular file or nothing; WriteRefused otherwise (one line saying what it is, and
    whether it is left alone because it was to be written over or `removing`). An object store's key is always one
    or the other."""
    if storage.is_url(path):
        return
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISREG(mode):
        return
    what = read_door.kind_of(mode)
    if stat.S_ISLNK(mode):
        what += f" (to {os.readlink(path)})"
    hint = "left alone: remove it by hand if it is not wanted" if removing else \
        "imagenet-build writes only a regular file or a new name; name another"
    raise WriteRefused(path, f"is {what}, not a regular file: {hint}")


def check_folder(path: PathLike) -> None:
    """A folder to write into is one (or a link to one), or nothing yet: a device, a FIFO, a socket or a file in its
    place is WriteRefused."""
    if storage.is_url(path):
        return
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if not stat.S_ISDIR(mode):
        raise WriteRefused(path, f"is {read_door.kind_of(mode)}, not a folder; name a folder")


def check_within(path: PathLike, within: PathLike | None, is_folder: bool = False) -> None:
    """The within rule: `path`'s folder (with `is_folder`, `path` itself) is `within` or below it, reached without a
    link leading out of it (a `..` after a link steps back from where it leads; an object's key: no `..`)."""
    if within is None:
        return
    if storage.is_url(path):
        root, key = str(within).rstrip("/") + "/", f"{path}/" if is_folder else str(path)
        if not key.startswith(root) or ".." in key[len(root):].split("/"):
            raise WriteRefused(path, f"lies outside {within}, where this verb writes")
        return
    if _is_within_itself(path, within, is_folder):
        return
    root = os.path.realpath(within)
    folder = os.path.realpath(path if is_folder else (os.path.dirname(os.fspath(path)) or os.curdir))
    if folder != root and not folder.startswith(root.rstrip(os.sep) + os.sep):
        raise WriteRefused(path, f"lies outside {within}, where this verb writes (it leads to {folder}: a link?); "
                                 "remove the link")


def _is_within_itself(path: PathLike, within: PathLike, is_folder: bool) -> bool:
    """Whether `path`'s folder is `within` in the same words (`.` and doubled separators aside): the rule holds
    without resolving it (an lstat per part; most files go straight into the folders given). `..`: left to realpath."""
    folder = os.fspath(path) if is_folder else os.path.dirname(os.fspath(path))
    if not folder or os.pardir in folder.split(os.sep):
        return False
    root = os.fspath(within)
    return bool(root) and os.pardir not in root.split(os.sep) and os.path.normpath(folder) == os.path.normpath(root)


def _checked(path: PathLike, within: PathLike | None) -> None:
    check_within(path, within)
    check_target(path)


def temp_name(path: PathLike) -> Path:
    """A hidden temporary name beside `path`, unique to the writing process."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def is_temp_name(name: str) -> bool:
    """A name temp_name gives: what a writer killed mid-write leaves behind."""
    return bool(_TEMP.match(name))


def _naming(error: OSError, path: PathLike) -> OSError:
    """The same error (its errno, so its class) naming the file the user knows, not the temporary name: a full
    disk, a read-only folder or a missing folder says which file could not be written."""
    return OSError(error.errno, error.strerror or str(error), str(path)) if error.errno else error


def open_fd(path: PathLike, within: PathLike | None = None, append: bool = False) -> int:
    """A file descriptor of `path` opened to write, created (or emptied, unless `append`); never through a link."""
    _checked(path, within)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW |
                   (os.O_APPEND if append else os.O_TRUNC), 0o644)


def open_write(path: PathLike, within: PathLike | None = None, append: bool = False) -> IO[bytes]:
    """`path` opened to write bytes (created or emptied): for a file written piece by piece, under a name of its
    own that is renamed into place after (`replace`), or a file nobody reads before it is whole."""
    return os.fdopen(open_fd(path, within, append), "wb")  # O_APPEND appends


def _create(tmp: Path) -> IO[bytes]:
    """A temporary name created anew: whatever is there (a FIFO, a device, a link: O_EXCL follows no link) is never
    opened; a regular file left by an earlier process of the same number is removed first."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    try:
        return os.fdopen(os.open(tmp, flags, 0o644), "wb")
    except FileExistsError:
        remove(tmp)
        return os.fdopen(os.open(tmp, flags, 0o644), "wb")


@contextlib.contextmanager
def new_file(path: PathLike, within: PathLike | None = None) -> Iterator[IO[bytes]]:
    """`path` written piece by piece (by a library given the file: a tar, a parquet file) under a temporary name,
    renamed into place when the block ends; nothing left where it raises."""
    _checked(path, within)
    tmp = temp_name(path)
    f = _create(tmp)
    try:
        with f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        _drop(tmp)
        raise


def _written(path: PathLike, data: bytes, sync: bool) -> Path:
    """Bytes written to a temporary name beside `path`, fsynced unless not `sync`; that name. On failure nothing is
    left, and an OSError names `path`."""
    tmp = temp_name(path)
    try:
        f = _create(tmp)  # what is there, if not an earlier file of ours, left as it is
    except OSError as e:
        raise _naming(e, path) from None
    try:
        with f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
    except OSError as e:
        _drop(tmp)
        raise _naming(e, path) from None
    except BaseException:
        _drop(tmp)
        raise
    return tmp


def write_temp(path: PathLike, data: bytes, within: PathLike | None = None) -> Path:
    """Bytes written to a temporary name beside `path` and fsynced; returns that name (to rename over `path` with
    `replace`, or to remove). On failure nothing is left."""
    check_within(path, within)
    return _written(path, data, sync=True)


def _drop(path: PathLike) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def replace(source: PathLike, target: PathLike, within: PathLike | None = None) -> None:
    """`source` (a file this run wrote) renamed over `target`: the onto and within rules on `target`."""
    _checked(target, within)
    os.replace(source, target)


def fsync_dir(path: PathLike) -> None:
    fd = read_door.open_folder(path)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: PathLike, data: bytes, within: PathLike | None = None, sync: bool = True) -> None:
    """Atomic either way: one PUT for an object; a temporary name, fsync and rename over `path` for a file (a failed
    write leaves the old file whole and no temporary file; an OSError names `path`). Not `sync`: no fsync (a sample's
    files, which nothing vouches for)."""
    if storage.is_url(path):
        check_within(path, within)
        _fs(path).pipe_file(str(path), data)
        return
    _checked(path, within)
    tmp = _written(path, data, sync)
    try:
        os.replace(tmp, path)
    except OSError as e:
        _drop(tmp)
        raise _naming(e, path) from None
    except BaseException:
        _drop(tmp)
        raise
    if sync:
        fsync_dir(Path(path).parent)


def upload(local: PathLike, url: str, within: PathLike | None = None) -> None:
    """A finished local file copied to its final object name, in one upload."""
    check_within(url, within)
    _fs(url).put_file(str(local), str(url))


def check_writable(path: PathLike) -> None:
    """Refuse, before any work, a file name that cannot be written (its folder missing or not a folder, the name a
    folder, a device, a FIFO or a link, no permission, a read-only disk): one InputError naming it. Tried by writing
    and removing the temporary file write_bytes would write."""
    path = Path(path)
    folder = path.parent
    if path.is_dir() and not path.is_symlink():
        raise InputError(path, "is a folder; give a file name")
    check_target(path)
    if not folder.is_dir():
        raise InputError(path, f"{folder} is not a folder" if folder.exists() else f"folder {folder} does not exist")
    tmp = temp_name(path)
    try:
        _create(tmp).close()
    except OSError as e:
        raise InputError(path, f"cannot be written here ({e.strerror or e})") from None
    _drop(tmp)


def remove(path: PathLike, within: PathLike | None = None, missing_ok: bool = False) -> None:
    """A file (or an object) removed; anything else (a link, a device, a FIFO, a socket, a folder) is left alone:
    WriteRefused."""
    check_within(path, within)
    if storage.is_url(path):
        _fs(path).rm(str(path))
        return
    check_target(path, removing=True)
    try:
        os.unlink(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


def remove_tree(path: PathLike, within: PathLike | None = None) -> None:
    """A folder (or a prefix) and all below it; a link in its place is refused, never followed."""
    check_within(path, within)
    if storage.is_url(path):
        _fs(path).rm(str(path), recursive=True)
        return
    mode = os.lstat(path).st_mode
    if not stat.S_ISDIR(mode):
        raise WriteRefused(path, f"is {read_door.kind_of(mode)}, not a folder of this run's: left alone; remove it")
    shutil.rmtree(path)


def remove_scratch(path: PathLike) -> None:
    """A scratch folder this run made (a spool, a staging folder) removed, whatever is left in it; nothing where it
    is gone, or is a link (rmtree never follows one)."""
    shutil.rmtree(path, ignore_errors=True)


def remove_empty_folder(path: PathLike) -> bool:
    """The folder removed if it is empty (and not a link); whether it was."""
    try:
        os.rmdir(path)
    except OSError:
        return False
    return True


def make_folder(path: PathLike, within: PathLike | None = None) -> None:
    """A folder and those above it (an object store has none: a key's prefix is enough); one that is there must be
    a folder, and it lies within `within` (checked again once made: a link made meanwhile)."""
    check_within(path, within, is_folder=True)
    if storage.is_url(path):
        return
    if os.path.lexists(path) and not os.path.isdir(path):
        raise WriteRefused(path, "exists and is not a folder")
    os.makedirs(path, exist_ok=True)
    check_within(path, within, is_folder=True)


def make_new_folder(path: PathLike) -> None:
    """A folder made, not there before (FileExistsError where it is)."""
    os.mkdir(path)


@contextlib.contextmanager
def scratch_folder(prefix: str, folder: PathLike | None = None) -> Iterator[str]:
    """A new private folder (in `folder`, else the system's temporary folder), removed with all it holds after."""
    with tempfile.TemporaryDirectory(prefix=prefix, dir=folder) as made:
        yield made


def new_scratch_folder(prefix: str, folder: PathLike | None = None) -> str:
    """A new private folder, left for its maker to remove (remove_scratch)."""
    return tempfile.mkdtemp(prefix=prefix, dir=folder)


def scratch_file(prefix: str, suffix: str) -> IO[bytes]:
    """A new private file in the system's temporary folder, open to write, left for its maker to remove."""
    return tempfile.NamedTemporaryFile(prefix=prefix, suffix=suffix, delete=False)


def discard() -> int:
    """A file descriptor writing nowhere (the null device, named by this door alone): for output to silence."""
    return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)


def open_lock(path: PathLike) -> int:
    """A lock file opened to read and write, created if need be, never through a link; a regular file."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise WriteRefused(path, f"is {read_door.kind_of(mode)}, not a lock file: remove it")
    return fd


def hard_link(source: PathLike, target: PathLike, within: PathLike | None = None) -> None:
    """`target` made a new name of `source` (FileExistsError where `target` is there: a link replaces nothing)."""
    check_within(target, within)
    os.link(source, target)


def symlink(source: PathLike, target: PathLike, within: PathLike | None = None) -> None:
    """`target` made a symbolic link to `source` (FileExistsError where `target` is there: a link replaces nothing)."""
    check_within(target, within)
    os.symlink(source, target)


def copy_file(source: PathLike, target: PathLike, within: PathLike | None = None) -> None:
    """`source` (read through the read door) copied to `target`, its times kept, atomically."""
    _checked(target, within)
    tmp = temp_name(target)
    with read_door.open_read(source) as copied:  # a source that is no regular file: refused before anything is made
        copy = _create(tmp)
        try:
            with copy:
                shutil.copyfileobj(copied, copy)
            shutil.copystat(source, tmp)
            os.replace(tmp, target)
        except BaseException:
            _drop(tmp)
            raise


def copy_tree(source: PathLike, target: PathLike) -> None:
    """A folder's files copied into `target` (made where need be), each through copy_file, files there replaced."""
    shutil.copytree(source, target, dirs_exist_ok=True, copy_function=copy_file)


def move(source: PathLike, target: PathLike, within: PathLike | None = None) -> None:
    """`source` renamed to `target`, which must not be there (FileExistsError)."""
    check_within(target, within)
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
    os.rename(source, target)


def _fs(url: PathLike) -> Any:
    return storage.file_system(url)
