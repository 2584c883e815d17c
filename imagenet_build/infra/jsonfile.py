"""Every JSON file the tool reads, through one door: bounded, parsed, and checked to have the shape its reader
relies on, so that a wrong shape is one line naming the file and the field, never an AttributeError deep
in a reader.

What the door refuses, each as one JsonError line `<file>: <what is wrong>`: a path that is no regular file (a
FIFO would block, /dev/zero would grow memory until killed), a file over its reader's limit, bytes that are
not UTF-8 or not JSON, a string holding a lone surrogate (the escape \\ud800 alone: no Unicode text, and a line
naming it could not be printed), a value nested deeper than MAX_DEPTH (Python's parser itself gives up with a
RecursionError past about a thousand), and a value whose shape is not the one asked for. A shape is written
as a type: a TypedDict (its required keys there, every key present of its type), List[X], Dict[str, X],
Optional[X] and other Unions, Literal[...], int (not a bool), float (an int too), str, bool, or Any.
"""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Mapping
from typing import Any, Callable, Literal, Union, get_args, get_origin, get_type_hints

from imagenet_build.infra import read_door
from imagenet_build.infra.errors import PathLike

MAX_DEPTH = 64  # no document the tool reads nests more than a few levels
DEFAULT_LIMIT = 1 << 30  # bytes: a manifest of the largest builds is tens of MB

_NO_SUCH_PATH = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG)

Check = Callable[[Any], str]  # a reader's own check of a parsed value: "" or "<field>: <what is wrong>"


class JsonError(ValueError):
    """A JSON file the tool cannot use; `str()` is the one line naming it (`where`) and what is wrong (`problem`)."""

    def __init__(self, where: str, problem: str) -> None:
        self.where, self.problem = where, problem
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:  # survive the trip back from a worker process
        return (type(self), (self.where, self.problem))


def read_json(path: PathLike, shape: Any = Any, limit: int = DEFAULT_LIMIT, check: Check | None = None) -> Any:
    """The parsed value of the JSON file `path`, of `shape` (and passing `check`); JsonError where it is not.
    FileNotFoundError passes as it is: a missing file means something else to each reader. Read through
    infra/read_door.py: a FIFO or a device is refused unread, and nothing is read past `limit`."""
    where = str(path)
    try:
        data = read_door.read_bytes(path, limit)
    except (read_door.NotRegularFile, read_door.TooLarge) as e:
        raise JsonError(where, e.strerror or str(e)) from None
    except OSError as e:
        if isinstance(e, (FileNotFoundError, NotADirectoryError)) or e.errno in _NO_SUCH_PATH:  # names no file:
            raise  # each reader says what that means
        raise JsonError(where, f"cannot be read ({e.strerror or e})") from None
    return parse_json(data, where, shape, check)


def parse_json(data: bytes | str, where: str, shape: Any = Any, check: Check | None = None) -> Any:
    """`data` parsed and checked as read_json does; `where` names it in the JsonError."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise JsonError(where, "not UTF-8 text") from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonError(where, f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:
        raise JsonError(where, f"not valid JSON ({e})") from None
    if depth(value) > MAX_DEPTH:
        raise JsonError(where, f"nested deeper than {MAX_DEPTH} levels")
    if _ESCAPED_SURROGATE.search(text) or (isinstance(data, str) and _unpaired(data)):  # UTF-8 bytes hold none
        lone = _lone_surrogate(value)
        if lone:
            raise JsonError(where, f"a string holding a lone surrogate ({shown(lone)}), which is no Unicode text")
    problem = shape_problem(value, shape) or (check(value) if check is not None else "")
    if problem:
        raise JsonError(where, problem)
    return value


def depth(value: Any) -> int:
    """How deeply lists and objects nest in `value` (a scalar: 0), walked a level at a time without recursion: the
    containers of each level gathered in one comprehension (a 50,000-entry real.json: 11 ms, not 68 as a stack of
    every value)."""
    level = [value] if isinstance(value, (dict, list)) else []
    deepest = 0
    while level:
        deepest += 1
        level = [child for item in level for child in (item.values() if isinstance(item, dict) else item)
                 if isinstance(child, (dict, list))]
    return deepest


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _unpaired(text: str) -> bool:
    """`text` holds a surrogate that UTF-8 cannot encode (one not of a pair)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _lone_surrogate(value: Any) -> str:
    """The first key or string in `value` holding a lone surrogate (the JSON escape \\ud800 alone), or ""."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and _unpaired(item):
            return item
    return ""


_NAMES = {int: "a whole number", float: "a number", str: "a string", bool: "true or false", list: "a list",
          dict: "an object", type(None): "null"}


def shown(value: Any) -> str:
    """A value as a message shows it: its JSON, cut short."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is(value: Any, kind: Any) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _is_typeddict(shape: Any) -> bool:
    return isinstance(shape, type) and issubclass(shape, dict) and hasattr(shape, "__required_keys__")


def shape_problem(value: Any, shape: Any, where: str = "") -> str:
    """"<field>: <what is wrong>" for the first part of `value` not of `shape`, or "" (see the module's doc)."""
    at = f"{where}: " if where else ""
    origin = get_origin(shape)
    if shape is Any:
        return ""
    if origin is Union:
        if any(not shape_problem(value, option) for option in get_args(shape)):
            return ""
        return f"{at}{shown(value)} is not {_describe(shape)}"
    if origin is Literal:
        return "" if value in get_args(shape) else f"{at}{shown(value)} is not {_describe(shape)}"
    if _is_typeddict(shape):
        return _fields_problem(value, shape, where) if isinstance(value, dict) else \
            f"{at}{shown(value)} is not an object"
    kind = origin or shape
    if not _is(value, kind):
        return f"{at}{shown(value)} is not {_describe(shape)}"
    return _items_problem(value, kind, get_args(shape), where)


def _items_problem(value: Any, kind: Any, args: tuple[Any, ...], where: str) -> str:
    """The first item of a list (List[X]) or value of an object (Dict[str, X]) not of its shape, or ""."""
    if kind is list and args:
        items = ((f"{where}[{n}]", item, args[0]) for n, item in enumerate(value))
    elif kind is dict and args:
        items = ((f"{where}.{key}" if where else key, item, args[1]) for key, item in value.items())
    else:
        return ""
    return next((p for p in (shape_problem(item, shape, at) for at, item, shape in items) if p), "")


def _fields_problem(value: Mapping[str, Any], shape: Any, where: str) -> str:
    for key, hint in get_type_hints(shape).items():
        field = f"{where}.{key}" if where else key
        if key not in value:
            if key in shape.__required_keys__:
                return f"{field}: missing"
            continue
        problem = shape_problem(value[key], hint, field)
        if problem:
            return problem
    return ""


def _describe(shape: Any) -> str:
    origin = get_origin(shape)
    if origin is Literal:
        return " or ".join(json.dumps(v) for v in get_args(shape))
    if origin is Union:
        return " or ".join(_describe(option) for option in get_args(shape))
    if _is_typeddict(shape):
        return "an object"
    return _NAMES.get(origin or shape, str(shape))
