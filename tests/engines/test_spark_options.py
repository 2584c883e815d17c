"""The Spark engine's own rules, in this process: the Java it needs, pyspark missing, its configuration, where its
workers run, its failures' lines, and a small job run here (the whole-process runs are in test_engines.py)."""

import glob
import os
import sys
import tempfile

import pytest

from imagenet_build.engines.base import DEFAULT_SPARK_MASTER, EngineSettings
from imagenet_build.engines.job import Task, reported, write_job
from imagenet_build.engines.spark import SparkEngine, _first_line, _spark_dirs, find_java, java_version
from imagenet_build.infra.errors import BuildError


def square(x):
    return [x * x]


def spark(master=DEFAULT_SPARK_MASTER, conf=()):
    return SparkEngine(EngineSettings(spark_master=master, spark_conf=conf))


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
    conf = dict(spark(conf=(("spark.log.level", "INFO"), ("spark.executor.memory", "2g")))._conf().getAll())
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


def test_a_local_masters_folders_and_python_are_set_while_it_runs_and_put_back(monkeypatch):
    monkeypatch.setenv("SPARK_WORKER_DIR", "/theirs")
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    with _spark_dirs(True):
        assert os.environ["PYSPARK_PYTHON"] == sys.executable
        scratch = os.path.dirname(os.environ["SPARK_WORKER_DIR"])
        assert os.environ["SPARK_LOCAL_DIRS"] == os.path.join(scratch, "local") and os.path.isdir(scratch)
    assert os.environ["SPARK_WORKER_DIR"] == "/theirs" and "PYSPARK_PYTHON" not in os.environ
    assert not os.path.exists(scratch)
    with _spark_dirs(False):
        assert os.environ["SPARK_WORKER_DIR"] == "/theirs" and "PYSPARK_PYTHON" not in os.environ


def test_a_spark_failure_is_its_tasks_line_or_its_first():
    assert _first_line(RuntimeError("x\nimagenet_build.engines.job.TaskFailed: a.JPEG: bad\n")) == "a.JPEG: bad"
    assert _first_line(RuntimeError("\n  An error occurred\nmore")) == "the Spark job failed: An error occurred"
    assert _first_line(RuntimeError("")) == "the Spark job failed: RuntimeError"


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
    assert line.startswith("Spark did not start: [JAVA_GATEWAY_EXITED] Java gateway process exited")
    assert "\n" not in line
    log = line.rsplit("(Spark's log: ", 1)[1].rstrip(")")
    assert os.path.basename(log).startswith("imagenet-build-spark-") and log.endswith(".log") and os.path.exists(log)
    assert java_children() == []
    os.unlink(log)
