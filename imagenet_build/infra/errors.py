"""Errors meant for people: each carries one line naming the file and the fix.

The CLI prints `error: <message>` and exits non-zero; it never shows a traceback
for these.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any, Union

PathLike = Union[str, "os.PathLike[str]"]


class BuildError(Exception):
    """A user mistake or a bad input; `str()` is the whole message."""

    exit_code = 1


class UsageError(BuildError):
    """Options that do not go together (found after parsing): exit 2, like click's own usage errors."""

    exit_code = 2


class Interrupted(KeyboardInterrupt):
    """SIGTERM or Ctrl-C, as the CLI raises it (cli/stop.py's _interrupt): caught wherever a KeyboardInterrupt is.

    `requested`: a stop signal came (a raise can be lost, in a __del__ say: loops that can look,
    look); `stopping`: the stop is under way, later signals change nothing. Its own class because
    CPython 3.11 remembers a bare KeyboardInterrupt that passed through an eval() or exec()
    (namedtuple and dataclass code run those) and makes `python -m` die of SIGINT at exit, after
    the command had handled it and printed its error.
    """

    requested = False
    stopping = False

    @classmethod
    def raise_if_requested(cls) -> None:
        """A stop signal came and its raise was lost (caught on the way by a library, or in a __del__), and the
        stop is not under way: raised here. Every progress bar's step and every verb's result look, so a stop
        is never run past to the end nor reported as a success. Only in the main thread, where the signal raises:
        a thread's bar (Spark's and Beam's result watchers) leaves the stop to it."""
        import threading

        if cls.requested and not cls.stopping and threading.current_thread() is threading.main_thread():
            raise cls


class Stopped(BuildError):
    """A command ended by Interrupted: `error: interrupted...`, exit 1."""


class InputError(BuildError):
    """One input file (an image, a list file) is unusable."""

    def __init__(self, path: PathLike, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:  # survive the trip back from a worker process
        return (type(self), (self.path, self.problem))


def check_count(value: object, option: str, least: int) -> int:
    """A count an option takes (--workers, --train-shards, ...), checked as the command line's parser checks it,
    for the Python API's callers too: a whole number of at least `least`, else a UsageError naming the option."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise UsageError(f"{option} must be a whole number of at least {least}, not {value!r}")
    return value


def check_path(value: object, argument: str) -> str:
    """A path the Python API takes, a str or an os.PathLike of one (pathlib.Path), as a str; else a UsageError
    naming the argument: bytes, None or a number is no path the command line would give."""
    path = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(path, str):
        raise UsageError(f"{argument} must be a path (a str or pathlib.Path), not {_given(value)}")
    return path


def check_paths(value: object, argument: str) -> tuple[str, ...]:
    """One path or a list (or tuple) of them, as the Python API takes a repeated option's; each as check_path
    takes it, else a UsageError naming the argument (and the item)."""
    if isinstance(value, (str, os.PathLike)):
        return (check_path(value, argument),)
    if not isinstance(value, (list, tuple)):
        raise UsageError(f"{argument} must be a path or a list of paths, not {_given(value)}")
    return tuple(check_path(path, f"{argument}[{n}]") for n, path in enumerate(value))


def check_flag(value: object, argument: str) -> bool:
    """A flag the Python API takes: True or False, else a UsageError naming the argument (a string such as "no"
    would read as true)."""
    if not isinstance(value, bool):
        raise UsageError(f"{argument} must be True or False, not {_given(value)}")
    return value


def _given(value: object) -> str:
    """A value as a message shows it: its type and its repr, cut short (None as itself)."""
    text = repr(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return text if value is None else f"{type(value).__name__} {text}"


def one_line(error: BaseException) -> str:
    """The line `error: ...` says for an error that ends a command: a BuildError's message, an
    OSError's file and reason, else the exception's type and first line."""
    if isinstance(error, BuildError):
        return str(error)
    if isinstance(error, OSError):
        where = f"{error.filename}: " if error.filename else ""
        return f"{where}{error.strerror or error}"
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


@contextlib.contextmanager
def input_errors(path: PathLike, expected: str = "a file", missing: str = "not found") -> Iterator[None]:
    """Turn the file system's errors on reading `path` into one InputError naming it.

    `expected` says what the path should be ("a folder", "an image"); `missing` is the
    message for a path that does not exist.
    """
    try:
        yield
    except (OSError, UnicodeDecodeError) as e:
        raise input_error(path, e, expected, missing) from None


def input_error(path: PathLike, error: OSError | UnicodeDecodeError, expected: str = "a file",
                missing: str = "not found") -> InputError:
    """The InputError naming `path` that input_errors raises for `error` (for a loop that cannot afford a
    context manager per file)."""
    if isinstance(error, FileNotFoundError):
        return InputError(path, missing)
    if isinstance(error, IsADirectoryError):
        return InputError(path, f"is a folder, expected {expected}")
    if isinstance(error, NotADirectoryError):  # the path a file where a folder was read, or a folder of its path a file
        if os.path.lexists(path):
            return InputError(path, f"is a file, expected {expected}")
        return InputError(path, "a folder of its path is a file")
    if isinstance(error, UnicodeDecodeError):
        return InputError(path, f"not UTF-8 text (byte {error.start})")
    if isinstance(error, PermissionError):
        return InputError(path, "permission denied")
    return InputError(path, error.strerror or str(error))
