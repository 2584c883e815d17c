"""Shared fixtures: a sample dataset made once per session, and ways to run the CLI."""

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from imagenet_build.cli import cli
from imagenet_build.tools.sample_dataset import make_sample

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# A copy whose sample and reading need an extra beyond the test extra's core: its cases over the registry skip,
# saying why, where that extra is not installed (the test extra brings it: they run in the test environment)
COPY_NEEDS = {"hf-parquet": ("pyarrow", "parquet")}


def pytest_collection_modifyitems(items):
    from imagenet_build.infra.optional import is_installed

    for item in items:
        given = [v for v in item.callspec.params.values() if isinstance(v, str)] if hasattr(item, "callspec") else []
        for kind, (module, extra) in COPY_NEEDS.items():
            if kind in given and not is_installed(module):
                item.add_marker(pytest.mark.skip(reason=f"{kind} needs {module} (the {extra} extra), not installed"))


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sample")
    make_sample(out, classes=4, per_class=12, validation_per_class=4)
    return out


def sample_args(sample, output, *more, train=True, validation=True):
    args = ["convert", "--output-dir", str(output), "--labels-file", str(sample / "labels.txt")]
    if train:
        args += ["--train-dir", str(sample / "train"), "--bounding-box-file", str(sample / "bboxes.csv")]
    if validation:
        args += [
            "--validation-dir",
            str(sample / "validation"),
            "--validation-labels-file",
            str(sample / "validation_labels.txt"),
        ]
    args += ["--train-shards", "4", "--validation-shards", "2", "--layout-threads", "2"]
    return args + [str(a) for a in more]


def run_cli(*args):
    """The CLI in this process (fast; workers=1 keeps it in-process)."""
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def run_process(*args, **kwargs):
    """The CLI as a whole process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "imagenet_build", *[str(a) for a in args]],
        capture_output=True,
        text=True,
        **kwargs,
    )


def tree_digest(root):
    """{relative path: sha256} for every file under root."""
    root = Path(root)
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def children_of(pid):
    """Pids of the live processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid):
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


ENDS_WITHIN = 120  # seconds a process is waited for to end: no measure of speed, only so that a hang fails


def wait_until_gone(pids, seconds=ENDS_WITHIN):
    """The pids among `pids` still alive after waiting up to `seconds` (they end at once or not at all: the
    bound is only so that one left behind fails the test rather than hangs it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def wait_until(condition, seconds=ENDS_WITHIN):
    """condition() once it holds (checked every 10 ms), or its last value after `seconds`: the bound only so
    that a condition that never comes fails the test rather than hangs it."""
    deadline = time.monotonic() + seconds
    while not (held := condition()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return held


RUN_MARKER = "IMAGENET_BUILD_TEST_RUN"  # in the environment of every process a run starts (children inherit it)


class Run:
    """A verb as a whole process in its own process group, marked so that every process it starts
    (workers, DataLoader workers, the resource tracker, grandchildren) can be found in /proc.
    With tty=True its stderr is a terminal, as a user's is (progress bars shown: tqdm's thread
    makes the worker pools spawn rather than fork, with multiprocessing's resource tracker)."""

    def __init__(self, *args, tty=False):
        import pty
        import threading
        import uuid

        self.marker = uuid.uuid4().hex
        env = dict(os.environ, **{RUN_MARKER: self.marker})
        master = slave = None
        if tty:
            master, slave = pty.openpty()
        self.proc = subprocess.Popen([sys.executable, "-m", "imagenet_build", *map(str, args)], env=env,
                                     stdout=subprocess.PIPE, stderr=slave if tty else subprocess.PIPE,
                                     start_new_session=True)
        self._out, self._err = [], []
        if tty:
            os.close(slave)
        # read on threads: a process left behind holds the pipes open, and must fail the test, not hang it
        self._readers = [threading.Thread(target=self._read, args=(fd, into), daemon=True) for fd, into in (
            (self.proc.stdout.fileno(), self._out), (master if tty else self.proc.stderr.fileno(), self._err))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(fd, into):
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # a terminal whose other end closed: every process of the run let go of it
                break
            if not chunk:
                break
            into.append(chunk)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for pid in self.processes():  # what a failed test found left behind: not left to the next test
            os.kill(pid, signal.SIGKILL)
        self.proc.wait()

    def processes(self):
        """Pids of the live processes of this run."""
        needle = f"{RUN_MARKER}={self.marker}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    environ = (entry / "environ").read_bytes().split(b"\0")
                except OSError:
                    continue
                if needle in environ and alive(int(entry.name)):
                    found.append(int(entry.name))
        return found

    def wait_for(self, ready, seconds=90):
        deadline = time.monotonic() + seconds
        while self.proc.poll() is None and time.monotonic() < deadline and not ready(self):
            time.sleep(0.005)
        assert self.proc.poll() is None, "the run ended before it could be signalled: make it longer"

    def signal(self, how):
        """kill -9 of the main process, SIGTERM to it (`kill PID`, `docker stop`) or to its whole process
        group (`kill -TERM -PGID`, `timeout`, a batch system's cancel), or Ctrl-C (SIGINT to the group);
        then its ending. How soon it ends is a benchmark's (docs/benchmarks.md), not a test's: the wait is
        bounded only so that a command that does not end fails."""
        number = {"kill-9": signal.SIGKILL, "ctrl-c": signal.SIGINT}.get(how, signal.SIGTERM)
        (os.killpg if how in ("sigterm-group", "ctrl-c") else os.kill)(self.proc.pid, number)
        try:
            code = self.proc.wait(ENDS_WITHIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{how}: the command did not end ({ENDS_WITHIN} s)")
        return self._ended(code)

    def finish(self, seconds=300):
        """Its ending, unsignalled: (exit code, stdout, stderr)."""
        return self._ended(self.proc.wait(seconds))

    def _ended(self, code):
        for reader in self._readers:
            reader.join(ENDS_WITHIN)  # at once, unless a process left behind holds the output open
        return code, b"".join(self._out).decode(), b"".join(self._err).decode(errors="replace")

    def commands(self):
        """{pid: command line} of the live processes of this run."""
        found = {}
        for pid in self.processes():
            try:
                found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
        return found


SAMPLE = dict(classes=4, per_class=12, validation_per_class=4)  # the sample every copy kind is written from
SMALL_SAMPLE = dict(classes=2, per_class=3, validation_per_class=2)  # the smallest: a test that damages each copy


@pytest.fixture(scope="module")
def small_copy(tmp_path_factory):
    """copy kind -> the small sample written as it, once per kind for the module (ilsvrc: as `sample --tarballs`
    writes it, the folders and the three archives beside them, which --from reads)."""
    made = {}

    def get(kind):
        if kind not in made:
            made[kind] = tmp_path_factory.mktemp(kind) / "copy"
            make_sample(made[kind], kind=kind, tarballs=kind == "ilsvrc", **SMALL_SAMPLE)
        return made[kind]

    return get


@pytest.fixture(scope="session")
def ilsvrc(tmp_path_factory):
    """The sample with the three ILSVRC2012 archives beside its folders: what every other copy is held to."""
    out = tmp_path_factory.mktemp("ilsvrc")
    make_sample(out, tarballs=True, **SAMPLE)
    return out


def layout_args(sample, *more):
    """The labels files of a sample and the small shard layout the tests use (one worker)."""
    return ["--labels-file", sample / "labels.txt", "--validation-labels-file", sample / "validation_labels.txt",
            "--train-shards", 4, "--validation-shards", 2, "--layout-threads", 2, "--workers", 1, *more]


def with_boxes(sample):
    """layout_args and the sample's box CSV, for copies that carry no boxes of their own."""
    return layout_args(sample, "--bounding-box-file", sample / "bboxes.csv")


def shard_files(out):
    """{path: sha256} of a build's shards and indexes: what must be the same bytes whatever copy it came from
    (not the manifest, nor the listings a .tar.gz copy's archives leave for a rerun)."""
    return {k: v for k, v in tree_digest(out).items()
            if k != "manifest.json" and not k.startswith(".imagenet-build-listings/")}


@pytest.fixture(scope="session")
def reference(ilsvrc, tmp_path_factory):
    """The build from the three ILSVRC2012 archives, named explicitly."""
    out = tmp_path_factory.mktemp("reference")
    result = CliRunner().invoke(cli, [str(a) for a in (
        "convert", "--train-tar", ilsvrc / "ILSVRC2012_img_train.tar", "--validation-tar",
        ilsvrc / "ILSVRC2012_img_val.tar", "--bbox-tar", ilsvrc / "ILSVRC2012_bbox_train_v2.tar.gz",
        "--output-dir", out, *layout_args(ilsvrc))], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def sample_copy(sample_dir, tmp_path):
    """A private copy of the sample, free to damage."""
    copy = tmp_path / "sample"
    shutil.copytree(sample_dir, copy)
    return copy


@pytest.fixture(scope="session")
def converted(sample_dir, tmp_path_factory):
    """The sample converted once (two workers), shared by the read-back tests."""
    out = tmp_path_factory.mktemp("converted")
    result = run_process(*sample_args(sample_dir, out, "--workers", 2, "--json"))
    assert result.returncode == 0, result.stderr
    return out


# The session sample's images are 64..160 pixels a side: 48 resizes every one, 96 some, 400 none.
RESIZE_TARGETS = "shorter:48,96,400"


@pytest.fixture(scope="session")
def resized(sample_dir, tmp_path_factory):
    """The session sample resized to three sizes in one pass, two workers, as a whole process."""
    out = tmp_path_factory.mktemp("resized")
    result = run_process(*sample_args(sample_dir, out, "--resize", RESIZE_TARGETS, "--workers", 2, "--json"))
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture
def build(converted, tmp_path):
    """A private copy of the converted sample, free to damage."""
    out = tmp_path / "build"
    shutil.copytree(converted, out)
    return out


@pytest.fixture(scope="session")
def s3_server():
    """A real S3 protocol server (moto's server mode) on loopback for the session; yields its endpoint.

    The tests and the processes they start reach it through the standard AWS_* variables.
    """
    import socket
    import urllib.request

    pytest.importorskip("s3fs")
    moto_server = Path(sys.executable).parent / "moto_server"
    if not moto_server.exists():
        pytest.skip("moto[server] is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([str(moto_server), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def answers():
        try:
            return urllib.request.urlopen(endpoint, timeout=1) is not None
        except OSError:
            return server.poll() is not None  # ended: it will never answer

    try:
        if not wait_until(answers) or server.poll() is not None:
            pytest.fail("moto_server did not start")
        saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                 "AWS_DEFAULT_REGION")}
        os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                          AWS_DEFAULT_REGION="us-east-1")
        # fsspec keeps file systems across sessions of one process (mutmut runs pytest more than once in
        # its own): one made for an earlier session's server would still point at that server's port
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
        yield endpoint
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    finally:
        server.terminate()
        server.wait(timeout=ENDS_WITHIN)


@pytest.fixture
def bucket(s3_server, request):
    """A new, empty bucket for one test: s3://<name>."""
    import re

    import boto3

    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:50].strip("-")
    boto3.client("s3").create_bucket(Bucket=name)
    return f"s3://{name}"


@pytest.fixture
def memory_prefix(tmp_path):
    """A memory:// prefix of its own (fsspec's in-memory object store), removed afterwards."""
    from imagenet_build.infra import storage

    url = f"memory://{tmp_path.name}"
    yield url
    if storage.exists(url):
        storage.file_system(url).rm(url, recursive=True)
