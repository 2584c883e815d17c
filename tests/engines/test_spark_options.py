"""The Spark engine's own rules, in this process: the Java it needs, pyspark missing, its configuration, where its
workers run, its failures' lines, and a small job run here (the whole-process runs are in test_engines.py)."""

import glob
import os
import sys
import tempfile

import pytest

from imagenet_build.engines.job import Task, reported, write_job
from imagenet_build.engines.spark import (
    DEFAULT_MASTER,
    LOG_READ,
    SparkEngine,
    _cause,
    _first_line,
    _linked_home,
    _masters_answer,
    _read_log,
    _spark_environment,
    find_java,
    java_version,
)
from imagenet_build.infra.errors import BuildError, UsageError


def square(x):
    return [x * x]


def spark(master=DEFAULT_MASTER, conf=()):
    return SparkEngine(1, {"spark_master": master, "spark_conf": conf})


@pytest.mark.parametrize("shown,major", [
    ('openjdk version "17.0.15" 2025-04-15', 17), ('java version "1.8.0_392"', 8), ('openjdk version "21" 2023', 21),
    ('openjdk version "11.0.2"', 11), ("something else", None),
])
def test_the_java_version_is_read_as_java_prints_it(tmp_path, shown, major):
    java = tmp_path / "java"
    java.write_text(f"#!/bin/sh\n[ \"$*\" = -version ] || exit 2\necho '{shown}' >&2\n")  # as `java -version` says
    java.chmod(0o755)
    assert java_version(str(java)) == major
    assert java_version(str(tmp_path / "no-such-java")) is None


def test_a_java_that_does_not_answer_is_one_that_does_not_run(tmp_path, monkeypatch):
    from imagenet_build.engines import spark as spark_module

    java = tmp_path / "java"
    java.write_text(f"#!{sys.executable}\nimport sys, time\ntime.sleep(120)  # it answers, long after it was asked\n"
                    "print('openjdk version \"17.0.2\"', file=sys.stderr)\n")
    java.chmod(0o755)
    monkeypatch.setattr(spark_module, "JAVA_TIMEOUT", 0.2)
    assert java_version(str(java)) is None


def test_java_is_found_in_java_home_first(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert find_java() is None
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "java").write_text("#!/bin/sh\n")
    assert find_java() is None  # not executable
    (tmp_path / "bin" / "java").chmod(0o755)
    assert find_java() == str(tmp_path / "bin" / "java")
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert find_java() == str(tmp_path / "bin" / "java")


def a_java(folder, prints):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "java").write_text(f"#!/bin/sh\necho '{prints}' >&2\n")
    (folder / "java").chmod(0o755)
    return folder / "java"


def test_spark_refuses_no_java_and_an_old_one(tmp_path, monkeypatch):
    pytest.importorskip("pyspark")
    hint = "set JAVA_HOME, or install it (Debian: apt-get install openjdk-17-jre-headless)"
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BuildError) as raised:
        spark().check()
    assert str(raised.value) == f"--runner spark needs Java 17 or newer, and there is no java on PATH: {hint}"
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "home"))
    with pytest.raises(BuildError) as raised:
        spark().check()
    assert str(raised.value) == f"--runner spark needs Java 17 or newer, and there is no java in JAVA_HOME: {hint}"
    for prints, said in (('openjdk version "11.0.2"', "is Java 11"), ("Error: no JVM", "is not a Java that runs")):
        java = a_java(tmp_path / "home" / "bin", prints)
        with pytest.raises(BuildError) as raised:
            spark().check()
        assert str(raised.value) == f"--runner spark needs Java 17 or newer, and {java} {said}: {hint}"
    a_java(tmp_path / "home" / "bin", 'openjdk version "17.0.1"')
    spark().check()  # 17 is enough


def test_pyspark_missing_is_one_line_when_checked_and_when_run(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    message = ("--runner spark needs Apache Spark (pyspark), which is not installed: in a clone of imagenet-build, "
               "pip install -c constraints.txt '.[spark]'")
    with pytest.raises(BuildError) as checked:
        spark().check()
    with pytest.raises(BuildError) as ran:
        spark().run(write_job(str(tmp_path), [Task("k0", abs, (1,))]), [(0, None)], lambda n, r: None, None)
    assert str(checked.value) == str(ran.value) == message


def test_sparks_configuration_is_ours_then_the_users():
    pytest.importorskip("pyspark")
    conf = dict(spark(conf=("spark.log.level=INFO", "spark.executor.memory=2g"))._conf().getAll())
    assert conf["spark.master"] == "local[*]" and conf["spark.app.name"] == "imagenet-build convert"
    assert conf["spark.ui.showConsoleProgress"] == "false" and conf["spark.ui.enabled"] == "false"
    assert conf["spark.log.level"] == "INFO" and conf["spark.executor.memory"] == "2g"
    assert dict(spark()._conf().getAll())["spark.log.level"] == "WARN"  # ours, where the user sets none
    assert "spark.ui.enabled" not in dict(spark("yarn")._conf().getAll())  # a cluster's UI is the user's


@pytest.mark.parametrize("master,here", [("local", True), ("local[*]", True), ("local[2,4]", True),
                                         ("local-cluster[2,1,1024]", True), ("yarn", False),
                                         ("spark://h:7077", False), ("k8s://https://h:443", False)])
def test_where_sparks_workers_run(master, here):
    assert spark(master).workers_see_local_paths() is here
    assert spark(master).describe() == f"Apache Spark ({master})"


def test_a_masters_environment_is_set_while_it_runs_and_put_back(monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/theirs")
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    with _spark_environment("local[2]", "/some/python"):
        assert os.environ["PYSPARK_PYTHON"] == "/some/python" and "SPARK_HOME" not in os.environ
        scratch = os.path.dirname(os.environ["SPARK_LOCAL_DIRS"])
        assert os.path.basename(os.environ["SPARK_LOCAL_DIRS"]) == "local" and os.path.isdir(scratch)
    assert os.environ["SPARK_LOCAL_DIRS"] == "/theirs" and "PYSPARK_PYTHON" not in os.environ
    assert not os.path.exists(scratch)
    monkeypatch.setenv("PYSPARK_PYTHON", "/their/python")
    with _spark_environment("yarn", None):
        assert os.environ["PYSPARK_PYTHON"] == "/their/python" and "SPARK_HOME" not in os.environ
    with _spark_environment("local-cluster[2,1,1024]", None):
        home = os.environ["SPARK_HOME"]
        assert os.path.dirname(home) == os.path.dirname(os.environ["SPARK_LOCAL_DIRS"])  # removed with the scratch
    assert "SPARK_HOME" not in os.environ and not os.path.exists(home)


def test_a_local_clusters_spark_home_links_to_pysparks_less_its_work_folder(tmp_path, monkeypatch):
    pytest.importorskip("pyspark")
    theirs = tmp_path / "spark"
    for name in ("bin", "jars", "work", "python"):
        (theirs / name).mkdir(parents=True)
    monkeypatch.setenv("SPARK_HOME", str(theirs))  # pyspark's rule: SPARK_HOME first, then its own folder
    home = _linked_home(str(tmp_path / "home"))
    assert sorted(os.listdir(home)) == ["bin", "jars", "python"]
    assert all(os.readlink(os.path.join(home, name)) == str(theirs / name) for name in os.listdir(home))
    monkeypatch.delenv("SPARK_HOME")
    import pyspark

    own = _linked_home(str(tmp_path / "own"))
    assert os.readlink(os.path.join(own, "jars")) == os.path.join(os.path.dirname(pyspark.__file__), "jars")


@pytest.mark.parametrize("conf,local,python", [
    ((), True, sys.executable), ((), False, None),
    (("spark.pyspark.python=/opt/venv/bin/python",), False, "/opt/venv/bin/python"),
    (("spark.pyspark.python=/opt/a",), True, "/opt/a"),
    (("spark.executorEnv.PYSPARK_PYTHON=/opt/b",), False, "/opt/b"),
    (("spark.executorEnv.PYSPARK_PYTHON=/opt/b", "spark.pyspark.python=/opt/a"), False, "/opt/a"),
])
def test_the_executors_python_is_the_one_configured_else_this_one_on_a_local_master(conf, local, python):
    assert spark("local[2]" if local else "yarn", conf).executor_python() == python


def test_sparks_log_is_searched_in_its_first_mebibyte_alone(tmp_path):
    log = tmp_path / "spark.log"
    log.write_bytes(b"x" * (LOG_READ + 10))
    assert len(_read_log(str(log))) == LOG_READ
    assert _read_log(str(tmp_path / "gone.log")) == ""


def test_a_standalone_master_that_answers_nothing_is_one_line_at_once():
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(BuildError) as raised:
            _masters_answer(f"spark://127.0.0.1:{port}")
        assert str(raised.value) == (f"Spark did not start: no master of spark://127.0.0.1:{port} answers "
                                     f"(127.0.0.1:{port}: Connection refused)")
        with socket.socket() as listening:
            listening.bind(("127.0.0.1", 0))
            listening.listen()
            other = listening.getsockname()[1]
            _masters_answer(f"spark://127.0.0.1:{port},127.0.0.1:{other}")  # one of them answers: Spark's to say
            with pytest.raises(BuildError, match=r"answers \(127\.0\.0\.1:\d+: Connection refused; "
                                                 r"127\.0\.0\.1:x: Port could not be cast"):
                _masters_answer(f"spark://127.0.0.1:{port},127.0.0.1:x")
    _masters_answer("yarn")  # nothing to connect to here
    _masters_answer("local[2]")


PYTHON_TRACEBACK = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 4 times, most recent \
failure: Lost task 0.3 (TID 3) (127.0.0.1 executor 1): org.apache.spark.api.python.PythonException: \
[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback (most recent call last):
  File "/x/pyspark/worker.py", line 4197, in invoke_udf
    func = read_command(pickleSer, init_info.udf_info)
ModuleNotFoundError: No module named 'imagenet_build'
 SQLSTATE: 38000
\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1097)
"""
GAVE_UP = """26/11/28 15:09:57 WARN StandaloneSchedulerBackend: Application ID is not initialized yet.
26/11/28 15:09:57 ERROR StandaloneSchedulerBackend: Application has been killed. Reason: All masters are \
unresponsive! Giving up.
"""
JAVA = """An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.
: org.apache.spark.SparkException: Asked to run locally with 0 threads
\tat org.apache.spark.SparkContext$.createTaskScheduler(SparkContext.scala:3333)
"""


@pytest.mark.parametrize("text,cause", [
    (PYTHON_TRACEBACK, "ModuleNotFoundError: No module named 'imagenet_build'"),
    (GAVE_UP, "All masters are unresponsive! Giving up."),
    (JAVA, "org.apache.spark.SparkException: Asked to run locally with 0 threads"),
    ("An error occurred while calling o1.x\njava.lang.IllegalStateException", "java.lang.IllegalStateException"),
    ('26/11/28 WARN Utils: x\nException in thread "main" org.apache.spark.SparkException: Master must either be yarn',
     "org.apache.spark.SparkException: Master must either be yarn"),
    ("Traceback (most recent call last):\n  File x\n", None), ("one line\nand no cause", None), ("", None),
    ("x\nTraceback (most recent call last):\nKeyboardInterrupt\n", "KeyboardInterrupt"),  # right after it
])
def test_the_cause_is_the_first_exception_line_in_sparks_words(text, cause):
    assert _cause(text) == cause


def test_a_spark_failure_is_its_tasks_line_else_its_cause_else_its_first(tmp_path):
    log = tmp_path / "spark.log"
    log.write_text(GAVE_UP)
    assert _first_line(RuntimeError("x\nimagenet_build.engines.job.TaskFailed: a.JPEG: bad\n"), str(log)) == \
        "a.JPEG: bad"
    assert _first_line(RuntimeError(PYTHON_TRACEBACK), str(log)) == \
        "the Spark job failed: ModuleNotFoundError: No module named 'imagenet_build'"
    assert _first_line(RuntimeError("An error occurred"), str(log), "") == "All masters are unresponsive! Giving up."
    missing = str(tmp_path / "no-log")
    said = "the Spark job failed: An error occurred"
    assert _first_line(RuntimeError("\n  An error occurred\nmore"), missing) == said
    assert _first_line(RuntimeError(""), missing) == "the Spark job failed: RuntimeError"

    class Unreadable(Exception):
        def __str__(self):
            raise ConnectionRefusedError(111, "Connection refused")  # a Py4J error whose JVM has ended

    assert _first_line(Unreadable(), missing) == "the Spark job failed: Unreadable"


def java_children():
    """This process's children that are a JVM (Spark's), by their command line."""
    from conftest import children_of

    found = []
    for pid in children_of(os.getpid()):
        try:
            if b"java" in open(f"/proc/{pid}/cmdline", "rb").read():
                found.append(pid)
        except OSError:
            continue
    return found


def test_spark_runs_a_job_here_and_its_jvm_ends_with_it(tmp_path, monkeypatch):
    pytest.importorskip("pyspark")
    if find_java() is None:
        pytest.skip("no Java for Spark (scripts/test.sh installs Debian's openjdk-17-jre-headless where it may)")
    from pyspark import SparkContext

    temp = tmp_path / "temp"  # this test's own: other tests running Spark at the same time leave their logs elsewhere
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    job = write_job(str(tmp_path), [Task(f"k{n}", abs, (-n,)) for n in range(3)])  # executors import no test module
    spark("local[1]").run(job, ((n, None) for n in range(3)), lambda n, result: pytest.fail("Spark hands nothing back"),
                          None)
    assert reported(job) == {"k0", "k1", "k2"}
    assert SparkContext._gateway is None and SparkContext._active_spark_context is None
    assert java_children() == []  # its JVM ended, waited for
    assert glob.glob(os.path.join(temp, "imagenet-build-spark-*.log")) == []
    bad = write_job(str(tmp_path / "bad"), [Task("bad", os.path.getsize, (str(tmp_path / "missing.JPEG"),))])
    with pytest.raises(BuildError) as raised:
        spark("local[1]").run(bad, [(0, None)], lambda n, result: None, None)
    line = str(raised.value)
    assert "missing.JPEG" in line and "(Spark's log: " in line
    log = line.rsplit("(Spark's log: ", 1)[1].rstrip(")")
    assert glob.glob(os.path.join(temp, "imagenet-build-spark-*.log")) == [log]


def test_a_spark_that_does_not_start_is_one_line_naming_its_log(tmp_path):
    pytest.importorskip("pyspark")
    if find_java() is None:
        pytest.skip("no Java for Spark (scripts/test.sh installs Debian's openjdk-17-jre-headless where it may)")
    job = write_job(str(tmp_path), [Task("k0", abs, (-1,))])
    with pytest.raises(BuildError) as raised:
        spark("no-such-master://x").run(job, [(0, None)], lambda n, result: None, None)
    line = str(raised.value)
    assert line.startswith("Spark did not start: org.apache.spark.SparkException: Master must either be yarn or "
                           "start with spark, k8s, or local (Spark's log: ")  # the JVM's words, from its log
    assert "\n" not in line
    log = line.rsplit("(Spark's log: ", 1)[1].rstrip(")")
    assert os.path.basename(log).startswith("imagenet-build-spark-") and log.endswith(".log") and os.path.exists(log)
    assert java_children() == []
    os.unlink(log)


def needs_spark():
    pytest.importorskip("pyspark")
    if find_java() is None:
        pytest.skip("no Java for Spark (scripts/test.sh installs Debian's openjdk-17-jre-headless where it may)")


def test_a_spark_that_fails_once_its_jvm_is_up_says_why_and_ends_it(tmp_path):
    """local[0]: Spark refuses it after its JVM started; its words are read from the JVM before it is ended."""
    from pyspark import SparkContext

    needs_spark()
    job = write_job(str(tmp_path), [Task("k0", abs, (-1,))])
    with pytest.raises(BuildError) as raised:
        spark("local[0]").run(job, [(0, None)], lambda n, result: None, None)
    line = str(raised.value)
    assert line.startswith("Spark did not start: org.apache.spark.SparkException: Asked to run locally with 0 "
                           "threads (Spark's log: ")
    assert SparkContext._gateway is None and java_children() == []
    os.unlink(line.rsplit("(Spark's log: ", 1)[1].rstrip(")"))


def python_without_imagenet_build(folder):
    """A Python that runs pyspark's worker (from the zips Spark puts on its path) but cannot import imagenet-build:
    what a cluster node's `python3` is where imagenet-build is not installed."""
    folder.mkdir(parents=True, exist_ok=True)
    python = folder / "python3"
    python.write_text("#!/bin/sh\n"
                      "PYTHONPATH=$(printf '%s' \"$PYTHONPATH\" | tr ':' '\\n' | grep '[.]zip$' | paste -sd: -)\n"
                      f"export PYTHONPATH\nexec {sys.executable} -S -P \"$@\"\n")
    python.chmod(0o755)
    return python


def test_the_executors_python_is_the_configured_one_and_its_failure_is_named(tmp_path):
    needs_spark()
    python = python_without_imagenet_build(tmp_path / "bin")
    job = write_job(str(tmp_path), [Task("k0", abs, (-1,))])
    with pytest.raises(BuildError) as raised:
        spark("local[1]", (f"spark.pyspark.python={python}",)).run(job, [(0, None)], lambda n, r: None, None)
    line = str(raised.value)
    assert line.startswith("the Spark job failed: ModuleNotFoundError: No module named 'imagenet_build' (Spark's "
                           "log: "), line
    os.unlink(line.rsplit("(Spark's log: ", 1)[1].rstrip(")"))


@pytest.mark.parametrize("pair", ["spark.executor.memory", "=4g", " =4g"])
def test_spark_conf_is_key_equals_value_read_by_the_engine(pair):
    """--spark-conf KEY=VALUE as spark-submit's --conf: a key and an '=' needed; the key trimmed, the value kept."""
    with pytest.raises(UsageError) as refused:
        spark(conf=(pair,))
    assert str(refused.value) == f"--spark-conf takes KEY=VALUE (as spark-submit's --conf), not {pair!r}"
    assert spark(conf=(" spark.a = 1 ", "spark.b=x=y")).conf == [("spark.a", " 1 "), ("spark.b", "x=y")]
