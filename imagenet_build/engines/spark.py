"""The Spark engine: one Apache Spark task per shard, on the master `--spark-master` names (extra [spark]; Java 17+).

`local[*]` (the default) and `local-cluster[...]` run executors on this machine; a `spark://`, `yarn` or
`k8s://` master runs them on a cluster, configured with `--spark-conf KEY=VALUE` as spark-submit's --conf
would (executor environment, memory, ...). Spark retries a failed task; shard writes are idempotent, so a
retried task writes the same bytes. Spark's JVM logs go to a file, named when the job fails; progress is
convert's own bar, from the tasks' receipts. pyspark is imported only here, and only when the engine runs.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.parse
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from imagenet_build.engines.engine import SHARED_FILESYSTEM, Engine, EngineOption, OnResult, Tasks, register
from imagenet_build.engines.job import JobRef, TaskFailed, run_task, task_error
from imagenet_build.infra import read_door, write_door
from imagenet_build.infra.errors import BuildError, UsageError
from imagenet_build.infra.optional import native_stderr_to, require

if TYPE_CHECKING:
    from imagenet_build.infra.workers import Workers

DEFAULT_MASTER = "local[*]"
JAVA = 17  # the oldest Java the pinned Spark runs on
JAVA_TIMEOUT = 30.0  # seconds `java -version` may take before the Java is called one that does not run
JAVA_HINT = "set JAVA_HOME, or install it (Debian: apt-get install openjdk-17-jre-headless)"


def java_version(java: str) -> int | None:
    """The major version `java -version` reports (1.8 -> 8), or None when it does not run."""
    try:
        shown = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=JAVA_TIMEOUT).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', shown)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def find_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def spark_task(number: int, job: JobRef) -> None:
    """One shard on a Spark executor (its result goes to its receipt)."""
    run_task(job, number)


@register
class SparkEngine(Engine):
    name = "spark"
    help = "Apache Spark, one task per shard, on --spark-master (extra [spark], Java 17+)"
    options = (
        EngineOption("spark_master", DEFAULT_MASTER, show_default=True, help="--runner spark: the master URL "
                     "(local[N], local-cluster[...], spark://HOST:PORT, yarn, k8s://...)."),
        EngineOption("spark_conf", (), multiple=True, metavar="KEY=VALUE", help="--runner spark: a Spark "
                     "configuration setting, as spark-submit's --conf (repeat for each); e.g. "
                     "spark.executorEnv.AWS_PROFILE=P."),
        SHARED_FILESYSTEM,
    )

    def read_options(self) -> None:
        """The master, and --spark-conf's KEY=VALUE settings as (key, value) pairs (set after ours)."""
        self.master: str = self.values["spark_master"]
        self.conf: list[tuple[str, str]] = []
        for pair in self.values["spark_conf"]:
            key, sep, value = pair.partition("=")
            if not (sep and key.strip()):
                raise UsageError(f"--spark-conf takes KEY=VALUE (as spark-submit's --conf), not {pair!r}")
            self.conf.append((key.strip(), value))

    def describe(self) -> str:
        return f"Apache Spark ({self.master})"

    def workers_see_local_paths(self) -> bool:
        return self.master.startswith("local")

    def check(self) -> None:
        """pyspark installed and a Java it runs on, before anything is listed."""
        require("pyspark", "--runner spark")
        java = find_java()
        if java is None:
            where = "in JAVA_HOME" if os.environ.get("JAVA_HOME") else "on PATH"
            raise BuildError(f"--runner spark needs Java {JAVA} or newer, and there is no java {where}: {JAVA_HINT}")
        version = java_version(java)
        if version is None or version < JAVA:
            raise BuildError(f"--runner spark needs Java {JAVA} or newer, and {java} is "
                             f"{'Java ' + str(version) if version else 'not a Java that runs'}: {JAVA_HINT}")

    def _conf(self) -> Any:
        from pyspark import SparkConf

        conf = (SparkConf().setMaster(self.master).setAppName("imagenet-build convert")
                .set("spark.ui.showConsoleProgress", "false").set("spark.log.level", "WARN"))
        if self.workers_see_local_paths():
            conf.set("spark.ui.enabled", "false")
        for key, value in self.conf:
            conf.set(key, value)
        return conf

    def executor_python(self) -> str | None:
        """The Python the executors run: `spark.pyspark.python` (or `spark.executorEnv.PYSPARK_PYTHON`) as given;
        else this one on a local master; else None (PYSPARK_PYTHON, then "python3", as pyspark takes it). pyspark
        takes it from the driver's PYSPARK_PYTHON alone: spark-submit sets that from the configuration, a driver
        that starts Spark itself must."""
        conf = dict(self.conf)
        given = conf.get("spark.pyspark.python") or conf.get("spark.executorEnv.PYSPARK_PYTHON")
        return given or (sys.executable if self.workers_see_local_paths() else None)

    def run(self, job: JobRef, tasks: Tasks, on_result: OnResult, pool: Workers) -> None:
        numbers = [n for n, _ in tasks]  # its workers read their task from the job's tasks file
        require("pyspark", "--runner spark")
        _masters_answer(self.master)
        log = write_door.scratch_file("imagenet-build-spark-", ".log")
        log.close()
        failed = True
        try:
            with _spark_environment(self.master, self.executor_python()), _python_logs_off():
                context = _start(self._conf(), log.name)
                try:
                    context.parallelize(list(numbers), len(numbers)).foreach(functools.partial(spark_task, job=job))
                    failed = False
                except KeyboardInterrupt:
                    context.cancelAllJobs()
                    raise
                except Exception as e:
                    raise BuildError(f"{_first_line(e, log.name)} (Spark's log: {log.name})") from e
                finally:
                    _stop(context)
        finally:
            if not failed:
                write_door.remove(log.name)


def _start(conf: Any, log: str) -> Any:
    """A SparkContext, its JVM's output going to `log`; a Spark that does not start is one BuildError line, its
    cause read while its JVM still answers, then the JVM ended."""
    from pyspark import SparkContext

    with native_stderr_to(write_door.open_fd(log, append=True)):  # the JVM started now keeps it for its logs
        try:
            context = SparkContext(conf=conf)
        except Exception as e:  # no JVM, a master that does not answer, a configuration Spark refuses
            said = _first_line(e, log, "")
            _end_jvm()
            raise BuildError(f"Spark did not start: {said} (Spark's log: {log})") from None
    server = getattr(context, "_accumulatorServer", None)  # pyspark's, for accumulators (none here): when a stop
    if server is not None:  # ends the JVM first, it prints an EOFError traceback; its errors are not news
        server.handle_error = lambda request, address: None
    return context


MASTER_TIMEOUT = 30.0  # seconds a standalone master may take to accept a connection before it is said not to answer


def _masters_answer(master: str) -> None:
    """A standalone master (`spark://h:p[,h2:p2]`) that accepts no connection is said at once: Spark itself tries to
    register for a minute and more, then fails the job with its reason in its log alone."""
    if not master.startswith("spark://"):
        return
    said = []
    for place in master[len("spark://"):].split(","):
        where = urllib.parse.urlsplit("spark://" + place)
        try:
            with socket.create_connection((where.hostname or "", where.port or 7077), timeout=MASTER_TIMEOUT):
                return
        except (OSError, ValueError) as e:
            said.append(f"{place}: {e.strerror or e}" if isinstance(e, OSError) else f"{place}: {e}")
    raise BuildError(f"Spark did not start: no master of {master} answers ({'; '.join(said)})")


def _first_line(error: BaseException, log: str, said: str = "the Spark job failed: ") -> str:
    """A task's own line in Spark's error; else `said` and the cause: the first exception line of the Python
    traceback or Java error it holds, else of Spark's log (the reason it gave an application up), else its first
    line. Read while the JVM answers: a Py4J error's text comes from it."""
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - a JVM that no longer answers: its class is all there is
        text = ""
    found = task_error(error if isinstance(error, TaskFailed) else RuntimeError(text))
    if found:
        return found
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cause = _cause(text) or _cause(_read_log(log))
    return said + (cause or (lines[0] if lines else type(error).__name__))


_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION = re.compile(r'^(?:Exception in thread "[^"]*" )?:?\s*((?:[\w$]+\.)*\w*(?:Exception|Error)(?::.*)?)$')
_GAVE_UP = re.compile(r" ERROR \S+: .*Reason: (.+)$")


def _cause(text: str) -> str | None:
    """The first cause in Spark's words: a Python worker's exception line (the first unindented line after its
    traceback), else the reason Spark gave an application up, else the first exception line below the first line
    (Py4J's "An error occurred while calling ...", a log's first line), a JVM's uncaught one included."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().endswith(_TRACEBACK):
            for after in lines[i + 1:]:
                if after and not after[0].isspace():
                    return after.strip()
    for line in lines:
        gave_up = _GAVE_UP.search(line)
        if gave_up:
            return gave_up.group(1).strip()
    for line in lines[1:]:
        match = _EXCEPTION.match(line.strip())
        if match:
            return match.group(1)
    return None


LOG_READ = 1 << 20  # bytes of Spark's log searched for a cause


def _read_log(path: str) -> str:
    try:
        with read_door.open_read(path) as f:
            return f.read(LOG_READ).decode(errors="replace")
    except OSError:
        return ""


def _stop(context: Any) -> None:
    """The context stopped, and Spark's JVM (with the executors it started) ended before convert goes on. A JVM a
    signal to the process group ended first makes pyspark warn that it could not shut it down: that is the stop."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        context.stop()
    _end_jvm()


def _end_jvm() -> None:
    """pyspark keeps its JVM for the next context of the process: end it (and wait for it) now."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    process = getattr(gateway, "proc", None)
    gateway.shutdown()
    if process is not None:
        process.stdin.close()  # the JVM ends when its input does
        process.wait()
    SparkContext._gateway = SparkContext._jvm = None


@contextlib.contextmanager
def _python_logs_off() -> Iterator[None]:
    """py4j logs a traceback through the root logger when a stop signal breaks its call into the JVM (the stop is
    what convert reports): Python's log records stay off stderr while Spark runs (the JVM's go to its log file)."""
    logging.disable(logging.ERROR)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


@contextlib.contextmanager
def _spark_environment(master: str, python: str | None) -> Iterator[None]:
    """What Spark reads from the driver's environment, for as long as it runs: the executors' Python
    (PYSPARK_PYTHON), the driver's scratch (SPARK_LOCAL_DIRS) in a temporary folder removed at the end, and for a
    `local-cluster` master a Spark home of links to pyspark's own, whose `work` folder (its workers' and executors'
    folders, which Spark puts in its home) is in that temporary folder too, not in the installed package."""
    with write_door.scratch_folder("imagenet-build-spark-") as scratch:
        settings = {"SPARK_LOCAL_DIRS": os.path.join(scratch, "local")}
        if python:
            settings["PYSPARK_PYTHON"] = python
        if master.startswith("local-cluster"):
            settings["SPARK_HOME"] = _linked_home(os.path.join(scratch, "home"))
        saved = {name: os.environ.get(name) for name in settings}
        os.environ.update(settings)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _linked_home(folder: str) -> str:
    """A Spark home whose entries link to the one pyspark runs from, less its `work` folder."""
    from pyspark.find_spark_home import _find_spark_home

    home = _find_spark_home()
    write_door.make_new_folder(folder)
    for name in os.listdir(home):
        if name != "work":
            write_door.symlink(os.path.join(home, name), os.path.join(folder, name), within=folder)
    return folder
