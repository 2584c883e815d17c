"""One writer per folder: an exclusive lock held for as long as a command writes there.

Two `convert`s into one folder would otherwise interleave their shards (a folder
holding `train-*-of-00064` and `train-*-of-00128`, which a glob reads as one
dataset) or delete each other's temporary files. Every command that writes a
folder (convert: the output and index folders; index: each index folder;
prepare-val: the validation folder) holds its lock; a second one is refused
with one line naming the holder.

Local folders: `flock` on `<folder>/.imagenet-build.lock`; the kernel releases it
when the holder dies, even by kill -9, so a stale file never blocks a rerun.
Object stores have no locks: a lock object with the owner's host, pid and start
time is written and read back (two writers starting within the same moment can
both succeed; the read-back narrows that window to one round trip), and a lock
left by a dead process on this host is taken over.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import time
from types import TracebackType

from imagenet_build.infra import read_door, storage, write_door
from imagenet_build.infra.errors import BuildError, PathLike
from imagenet_build.infra.jsonfile import parse_json
from imagenet_build.infra.processes import process_alive

LOCK_NAME = ".imagenet-build.lock"  # in each folder a command writes


def _where(holder: dict) -> str:
    """"pid 123 on host, since 2024-05-01 10:00:00 UTC"."""
    stamp = holder.get("time")
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(stamp)) if isinstance(stamp, int) else "?"
    return f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}, since {since}"


def _describe(holder: dict) -> str:
    return f"{holder.get('command') or 'imagenet-build'!r}, {_where(holder)}"


def writing_now(folder: PathLike) -> str:
    """"imagenet-build convert (pid 123 on host, since ...)" while a live command holds the folder's lock
    (a reader, such as verify, would take its unfinished files for strays), else "".

    Local: the lock file's flock is tried and let go at once; a lock file nobody holds (left by a
    killed run) is none. Object store: the lock object, unless left by a dead process of this host.
    """
    path = storage.join(str(folder), LOCK_NAME)
    if storage.is_url(path):
        try:
            holder = _parse(read_door.read_bytes(path))
        except FileNotFoundError:
            return ""
        if holder.get("host") == socket.gethostname() and not process_alive(holder.get("pid")):
            return ""
    else:
        import fcntl

        try:
            fd = read_door.open_fd(path)
        except OSError:  # no lock file (or none we may read): nobody writes here
            return ""
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return ""
        except BlockingIOError:
            holder = _parse(os.pread(fd, 4096, 0))
        finally:
            os.close(fd)
    return f"{holder.get('command') or 'imagenet-build'} ({_where(holder)})"


def _parse(raw: bytes) -> dict:
    try:
        holder = parse_json(raw, LOCK_NAME)
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


class FolderLock:
    """`with FolderLock(folder):` — the folder (created if need be) is ours until the block ends."""

    def __init__(self, folder: PathLike, command: str = "") -> None:
        self.folder = str(folder)
        self.path = storage.join(self.folder, LOCK_NAME)
        self.command = command or "imagenet-build " + " ".join(sys.argv[1:2])
        self._fd: int | None = None
        self._token = ""
        self._made: list[str] = []  # the folders it made, deepest first: removed again where left empty

    def _holder(self) -> dict:
        return {"host": socket.gethostname(), "pid": os.getpid(), "time": int(time.time()),
                "command": self.command, "token": self._token}

    def __enter__(self) -> FolderLock:
        if storage.is_url(self.folder):
            self._lock_object()
        else:
            self._lock_file()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.release()

    def _refuse(self, holder: dict, hint: str) -> BuildError:
        return BuildError(f"{self.folder}: in use by another imagenet-build ({_describe(holder)}); {hint}")

    def _lock_file(self) -> None:
        import fcntl

        folder = os.path.abspath(self.folder)
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise BuildError(f"{self.folder}: exists and is not a folder")
        while not os.path.isdir(folder) and folder != os.path.dirname(folder):
            self._made.append(folder)
            folder = os.path.dirname(folder)
        write_door.make_folder(self.folder)
        while True:
            fd = write_door.open_lock(self.path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _parse(os.pread(fd, 4096, 0))
                os.close(fd)
                raise self._refuse(holder, "wait for it to finish, or stop it") from None
            try:  # the file may have been removed (and made anew) by a holder releasing it meanwhile
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(self._holder()).encode(), 0)
        self._fd = fd

    def _lock_object(self) -> None:
        try:
            holder = _parse(read_door.read_bytes(self.path))
        except FileNotFoundError:
            holder = None
        if holder is not None:
            stale = holder.get("host") == socket.gethostname() and not process_alive(holder.get("pid"))
            if not stale:
                raise self._refuse(holder, f"if that run is gone, delete {self.path}")
        self._token = secrets.token_hex(8)
        write_door.write_bytes(self.path, json.dumps(self._holder()).encode())
        won = _parse(read_door.read_bytes(self.path))
        if won.get("token") != self._token:
            self._token = ""
            raise self._refuse(won, "wait for it to finish, or stop it")

    def release(self) -> None:
        """Remove the lock file first, then unlock: a waiter holding the old file sees it is gone."""
        if self._fd is not None:
            write_door.remove(self.path, missing_ok=True)
            os.close(self._fd)
            self._fd = None
            for folder in self._made:
                if not write_door.remove_empty_folder(folder):
                    break  # not empty: the command wrote there
        elif self._token:
            try:
                if _parse(read_door.read_bytes(self.path)).get("token") == self._token:
                    write_door.remove(self.path)
            except FileNotFoundError:
                pass
            self._token = ""
