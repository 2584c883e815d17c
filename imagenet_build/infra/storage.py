"""Object storage (gs://, s3://, any fsspec URL) beside plain local paths.

Local paths stay plain files. A URL goes through fsspec (extras `[s3]`, `[gcs]`),
imported only then. Object stores have no rename: an object is written under its
final name in one upload and appears only when complete, so shards are staged
locally and uploaded whole, and manifest.json is the last object written.
Here: names, listings and what a file's metadata says; its bytes are read through
infra/read_door.py and written through infra/write_door.py, the two doors.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from imagenet_build.infra.errors import BuildError, PathLike
from imagenet_build.infra.optional import missing_message, require


def is_url(path: PathLike) -> bool:
    return "://" in str(path)


def join(base: PathLike, *names: str) -> str:
    """A path or URL below `base`."""
    if is_url(base):
        return "/".join([str(base).rstrip("/"), *names])
    return str(Path(base, *names))


def absolute(path: PathLike) -> str:
    """A local path made absolute (as a worker running in another folder needs it); a URL as it is."""
    return str(path) if is_url(path) else os.path.abspath(path)


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


def file_system(url: PathLike) -> Any:
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


def size(path: PathLike) -> int:
    return file_system(path).size(str(path)) if is_url(path) else os.path.getsize(path)


def stamp(path: PathLike) -> str:
    """Size and modification time (or an object's ETag): what says a file changed, without reading it."""
    if not is_url(path):
        st = os.stat(path)
        return f"{st.st_size}:{st.st_mtime_ns}"
    info = file_system(path).info(str(path))
    changed = info.get("ETag") or info.get("etag") or info.get("LastModified") or info.get("mtime") or ""
    return f"{info.get('size')}:{changed}"


def exists(path: PathLike) -> bool:
    return file_system(path).exists(str(path)) if is_url(path) else os.path.exists(path)


def listdir(path: PathLike) -> dict[str, bool]:
    """{name: is a folder} directly below a folder or URL prefix ({} when there is none)."""
    if not is_url(path):
        if not os.path.isdir(path):
            return {}
        return {e.name: e.is_dir() for e in os.scandir(path)}
    fs = file_system(path)
    fs.invalidate_cache(str(path))  # fsspec keeps listings: one taken before others wrote there would be stale
    if not fs.isdir(str(path)):
        return {}
    return {basename(info["name"]): info["type"] == "directory" for info in fs.ls(str(path), detail=True)}
