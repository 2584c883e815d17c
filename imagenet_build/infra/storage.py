"""Object storage (gs://, s3://, any fsspec URL) beside plain local paths.

Local paths stay plain files (os calls, atomic renames). A URL goes through
fsspec (extras `[s3]`, `[gcs]`), imported only then. Object stores have no
rename: an object is written under its final name in one upload and appears only
when complete, so shards are staged locally and uploaded whole, and
manifest.json is the last object written.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import IO, Any

from imagenet_build.infra.atomic import write_atomic
from imagenet_build.infra.errors import BuildError, PathLike
from imagenet_build.infra.optional import missing_message, require


def is_url(path: PathLike) -> bool:
    return "://" in str(path)


def join(base: PathLike, *names: str) -> str:
    """A path or URL below `base`."""
    if is_url(base):
        return "/".join([str(base).rstrip("/"), *names])
    return str(Path(base, *names))


def basename(path: PathLike) -> str:
    return str(path).rstrip("/").rsplit("/", 1)[-1]


def parent(path: PathLike) -> str:
    return str(path).rstrip("/").rsplit("/", 1)[0] if is_url(path) else os.path.dirname(str(path))


_PROTOCOL_MODULES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs"}


class _Backend:
    """An fsspec file system whose own errors become one BuildError line naming the URL.

    OSError (FileNotFoundError, PermissionError, ...) passes as it is: callers name what is missing.
    Anything else a backend raises — botocore's NoCredentialsError, google-auth's errors — is not an
    OSError and would otherwise reach the user as a traceback.
    """

    def __init__(self, fs: Any, url: PathLike) -> None:
        self._fs, self._url = fs, url

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._fs, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            from imagenet_build.infra.errors import BuildError

            try:
                return method(*args, **kwargs)
            except (OSError, BuildError):
                raise
            except Exception as e:
                raise BuildError(f"{self._url}: {type(e).__name__}: {e}") from None

        return call


def _fs(url: PathLike) -> Any:
    """The fsspec file system of a URL; a missing package, an unknown protocol or a backend's own
    error (no credentials, ...) is one BuildError line."""
    protocol = str(url).split("://", 1)[0]
    fsspec = require("fsspec", f"{url}: {protocol}:// paths")
    try:
        fs, _ = fsspec.core.url_to_fs(str(url))
    except ImportError:
        module = _PROTOCOL_MODULES.get(protocol, f"the fsspec implementation of {protocol}://")
        raise BuildError(missing_message(module, f"{url}: {protocol}:// paths")) from None
    except ValueError as e:
        raise BuildError(f"{url}: {e}") from None
    return _Backend(fs, url)


def open_read(path: PathLike, random_access: bool = False) -> IO[bytes]:
    """A binary file object; for URLs, random_access reads exactly the bytes asked (no read-ahead)."""
    if not is_url(path):
        return open(path, "rb")
    return _fs(path).open(str(path), "rb", **({"cache_type": "none"} if random_access else {}))


def size(path: PathLike) -> int:
    return _fs(path).size(str(path)) if is_url(path) else os.path.getsize(path)


def stamp(path: PathLike) -> str:
    """Size and modification time (or an object's ETag): what says a file changed, without reading it."""
    if not is_url(path):
        st = os.stat(path)
        return f"{st.st_size}:{st.st_mtime_ns}"
    info = _fs(path).info(str(path))
    changed = info.get("ETag") or info.get("etag") or info.get("LastModified") or info.get("mtime") or ""
    return f"{info.get('size')}:{changed}"


def exists(path: PathLike) -> bool:
    return _fs(path).exists(str(path)) if is_url(path) else os.path.exists(path)


def read_bytes(path: PathLike) -> bytes:
    if is_url(path):
        return _fs(path).cat_file(str(path))
    return Path(path).read_bytes()


def write_bytes(path: PathLike, data: bytes, durable: bool = True) -> None:
    """Atomic either way: one PUT for an object, temp name + rename for a file (fsync'd unless not `durable`)."""
    if is_url(path):
        _fs(path).pipe_file(str(path), data)
    else:
        write_atomic(path, data, durable)


def make_folder(path: PathLike) -> None:
    """A folder and those above it (an object store has none: a key's prefix is enough)."""
    if not is_url(path):
        os.makedirs(path, exist_ok=True)


def upload(local: PathLike, url: str) -> None:
    """Copy a finished local file to its final object name, in one upload."""
    _fs(url).put_file(str(local), str(url))


def listdir(path: PathLike) -> dict[str, bool]:
    """{name: is a folder} directly below a folder or URL prefix ({} when there is none)."""
    if not is_url(path):
        if not os.path.isdir(path):
            return {}
        return {e.name: e.is_dir() for e in os.scandir(path)}
    fs = _fs(path)
    fs.invalidate_cache(str(path))  # fsspec keeps listings: one taken before others wrote there would be stale
    if not fs.isdir(str(path)):
        return {}
    return {basename(info["name"]): info["type"] == "directory" for info in fs.ls(str(path), detail=True)}


def remove(path: PathLike) -> None:
    if is_url(path):
        _fs(path).rm(str(path))
    else:
        os.unlink(path)


def remove_tree(path: PathLike) -> None:
    if is_url(path):
        _fs(path).rm(str(path), recursive=True)
    else:
        import shutil

        shutil.rmtree(path)


def sha256(path: PathLike) -> str | None:
    """sha256 of a file or object, or None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open_read(path) as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except (OSError, FileNotFoundError):
        return None
    return digest.hexdigest()
