"""What the generated hostile cases share: the command line's paths read from its own click tree, the places no verb
may write, the nodes no verb may read, and one run of a verb in this process, bounded in time and checked for its
one line (tests/cli/test_paths_written.py, tests/cli/test_builds_read.py)."""

import contextlib
import hashlib
import os
import signal
import stat
from pathlib import Path

import click
from click.testing import CliRunner

from imagenet_build.cli import cli
from imagenet_build.cli.group import PathOf

BOUND = 60  # seconds: only a hang runs this long, whatever the machine's load (each case takes about a second)


def path_params():
    """(verb, param) for every parameter of every verb that names a path, from the command tree itself."""
    top = click.Context(cli, info_name="imagenet-build")
    for verb, command in sorted(cli.commands.items()):
        for param in command.get_params(click.Context(command, info_name=verb, parent=top)):
            if isinstance(param.type, click.Path):
                yield verb, param


def params_of(role):
    return [(verb, param) for verb, param in path_params() if isinstance(param.type, PathOf) and
            param.type.role == role]


def argv(verb, given, param=None, target=None):
    """The verb's command line from `given` ({param name: value}; True for a flag), `param` set to `target`: the
    arguments in the order the verb declares them, then the options."""
    command = cli.commands[verb]
    values = dict(given, **({param.name: target} if param is not None else {}))
    args, options = [verb], []
    for p in command.params:
        if p.name not in values:
            continue
        value = values[p.name]
        if isinstance(p, click.Argument):
            args.append(str(value))
        elif value is True:
            options.append(p.opts[0])
        else:
            options += [p.opts[0], str(value)]
    return args + options


class Hang(Exception):
    pass


@contextlib.contextmanager
def bounded(seconds=BOUND, memory=None):
    """A verb run in this process stopped after `seconds` (SIGALRM breaks a blocking open or read of a FIFO), and
    with `memory`, a read without end stopped at that many bytes more than this process holds (MemoryError)."""
    import resource

    def stop(signum, frame):
        raise Hang(f"still running after {seconds} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if memory is not None:
        with open("/proc/self/statm") as f:
            held = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (held + memory if hard == resource.RLIM_INFINITY
                                                 else min(hard, held + memory), hard))
    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run_bounded(args, memory=None):
    """(exit code, stdout, stderr) of the verb run in this process, within BOUND (and `memory`, as bounded's)."""
    with bounded(memory=memory):
        result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=True)
    if isinstance(result.exception, (Hang, MemoryError)):
        raise AssertionError(f"{' '.join(map(str, args))}: a hang, {result.exception!r}")
    return result.exit_code, result.stdout, result.stderr


def one_error_line(code, stderr):
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code in (1, 2) and len(lines) == 1 and lines[0].startswith("error: "), (code, stderr[-2000:])
    assert "Traceback" not in stderr
    return lines[0]


def device(path, zero=False):
    """A character device at `path`: the null device's (or zero's) own numbers where this process may make one
    (root), else a link to the machine's /dev/null or /dev/zero (which a process that is not root cannot
    replace)."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 5 if zero else 3))
    except PermissionError:
        os.symlink("/dev/zero" if zero else "/dev/null", path)
    return path


NODES = {
    "a FIFO": lambda path: os.mkfifo(path),
    "a null device": lambda path: device(path),
    "a zero device": lambda path: device(path, zero=True),
    "a link to /dev/zero": lambda path: os.symlink("/dev/zero", path),
}


def node_state(path):
    """What a path is, to tell it untouched: its kind, inode and device numbers, where a link leads, a file's
    bytes, a folder's files and their bytes."""
    path = Path(path)
    if not os.path.lexists(path):
        return None
    info = os.lstat(path)
    state = [stat.S_IFMT(info.st_mode), info.st_ino, info.st_rdev]
    if stat.S_ISLNK(info.st_mode):
        state.append(os.readlink(path))
    elif stat.S_ISREG(info.st_mode):
        state.append(hashlib.sha256(path.read_bytes()).hexdigest())
    elif stat.S_ISDIR(info.st_mode):
        state.append(sorted((str(p.relative_to(path)), node_state(p)) for p in path.rglob("*")))
    return state
