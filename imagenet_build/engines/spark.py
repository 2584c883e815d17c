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
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from imagenet_build.engines.base import Engine, OnResult, Tasks, register
from imagenet_build.engines.job import JobRef, run_task, task_error
from imagenet_build.infra import write_door
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.optional import native_stderr_to, require

if TYPE_CHECKING:
    from imagenet_build.infra.workers import Workers

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

    def describe(self) -> str:
        return f"Apache Spark ({self.settings.spark_master})"

    def workers_see_local_paths(self) -> bool:
        return self.settings.spark_master.startswith("local")

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

        conf = (SparkConf().setMaster(self.settings.spark_master).setAppName("imagenet-build convert")
                .set("spark.ui.showConsoleProgress", "false").set("spark.log.level", "WARN"))
        if self.workers_see_local_paths():
            conf.set("spark.ui.enabled", "false")
        for key, value in self.settings.spark_conf:
            conf.set(key, value)
        return conf

    def run(self, job: JobRef, tasks: Tasks, on_result: OnResult, pool: Workers) -> None:
        numbers = [n for n, _ in tasks]  # its workers read their task from the job's tasks file
        require("pyspark", "--runner spark")
        from pyspark import SparkContext

        log = write_door.scratch_file("imagenet-build-spark-", ".log")
        log.close()
        failed = True
        try:
            with _spark_dirs(self.workers_see_local_paths()), _python_logs_off():
                with native_stderr_to(write_door.open_fd(log.name, append=True)):  # the JVM keeps it for its logs
                    try:
                        context = SparkContext(conf=self._conf())
                    except Exception as e:  # no JVM, a master that does not answer, a configuration Spark refuses
                        _end_jvm()
                        raise BuildError(f"Spark did not start: {_first_line(e, '')} (Spark's log: {log.name})"
                                         ) from None
                try:
                    context.parallelize(list(numbers), len(numbers)).foreach(functools.partial(spark_task, job=job))
                    failed = False
                except KeyboardInterrupt:
                    context.cancelAllJobs()
                    raise
                except Exception as e:
                    raise BuildError(f"{_first_line(e)} (Spark's log: {log.name})") from e
                finally:
                    _stop(context)
        finally:
            if not failed:
                write_door.remove(log.name)


def _first_line(error: BaseException, said: str = "the Spark job failed: ") -> str:
    """A task's own line in Spark's error, else its first line after `said`."""
    found = task_error(error)
    if found:
        return found
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return said + (lines[0] if lines else type(error).__name__)


def _stop(context: Any) -> None:
    """The context stopped, and Spark's JVM (with the executors it started) ended before convert goes on."""
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
def _spark_dirs(local: bool) -> Iterator[None]:
    """A local master's scratch and worker folders in a temporary folder, not in the pyspark package's own, and its
    executors' Python this one (pyspark takes it from PYSPARK_PYTHON, "python3" otherwise)."""
    if not local:
        yield
        return
    with write_door.scratch_folder("imagenet-build-spark-") as scratch:
        saved = {name: os.environ.get(name) for name in ("SPARK_WORKER_DIR", "SPARK_LOCAL_DIRS", "PYSPARK_PYTHON")}
        os.environ["SPARK_WORKER_DIR"] = os.path.join(scratch, "work")
        os.environ["SPARK_LOCAL_DIRS"] = os.path.join(scratch, "local")
        os.environ["PYSPARK_PYTHON"] = sys.executable  # executors here: this Python, with this environment's packages
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
