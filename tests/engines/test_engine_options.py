"""Each engine's own rules, in this process: the options it reads, what it refuses, where its workers run, and the
Beam and Spark engines running a small job here (the whole-process runs are in test_engines.py)."""

import glob
import logging
import os
import signal
import sys
import tempfile
import threading
import time

import pytest

from imagenet_build.engines import ENGINES, make_engine
from imagenet_build.engines.base import DEFAULT_SPARK_MASTER, EngineSettings
from imagenet_build.engines.beam import DEFAULT_RUNNER, BeamEngine, _option, _worker_deaths_fail_the_job
from imagenet_build.engines.job import Task, reported, write_job
from imagenet_build.engines.local import LocalEngine
from imagenet_build.engines.spark import SparkEngine, _first_line, _spark_dirs, find_java, java_version
from imagenet_build.infra.errors import BuildError, UsageError
from imagenet_build.infra.workers import Workers


def square(x):
    return [x * x]


def beam(options):
    return BeamEngine(EngineSettings(beam_options=options))


def spark(master=DEFAULT_SPARK_MASTER, conf=()):
    return SparkEngine(EngineSettings(spark_master=master, spark_conf=conf))


def test_the_registry_holds_each_engine_by_its_name():
    assert ENGINES == {"local": LocalEngine, "beam": BeamEngine, "spark": SparkEngine}
    made = make_engine("spark", EngineSettings(spark_master="yarn"))
    assert isinstance(made, SparkEngine) and made.settings.spark_master == "yarn"
    assert LocalEngine.reports_as_tasks_end and not BeamEngine.reports_as_tasks_end
    assert not SparkEngine.reports_as_tasks_end


@pytest.mark.parametrize("settings,paths,refused", [
    (EngineSettings(spark_master="yarn"), {"--output-dir": ["out"]}, "--output-dir out"),
    (EngineSettings(spark_master="yarn"), {"--output-dir": ["s3://b/o"], "--from": ["s3://b/a", "/data/b"]},
     "--from /data/b"),
    (EngineSettings(spark_master="yarn"), {"--output-dir": ["gs://b/o"], "--index-dir": [""]}, None),
    (EngineSettings(spark_master="yarn", shared_filesystem=True), {"--output-dir": ["/nfs/out"]}, None),
    (EngineSettings(spark_master="local[4]"), {"--output-dir": ["out"]}, None),
    (EngineSettings(spark_master="local-cluster[2,1,1024]"), {"--output-dir": ["out"]}, None),
])
def test_a_local_path_is_refused_only_where_workers_may_be_elsewhere(settings, paths, refused):
    engine = SparkEngine(settings)
    if refused is None:
        engine.refuse_unreachable(paths)
        return
    with pytest.raises(UsageError) as raised:
        engine.refuse_unreachable(paths)
    assert str(raised.value) == (
        f"{refused} is a local path, and Apache Spark ({settings.spark_master}) may run its workers on other "
        "machines: give an object-store URL (s3://, gs://), or --shared-filesystem if every worker sees this path")


def test_the_local_engine_says_how_many_processes():
    assert LocalEngine(EngineSettings(workers=1)).describe() == "1 local worker process"
    assert LocalEngine(EngineSettings(workers=2)).describe() == "2 local worker processes"
    assert LocalEngine(EngineSettings(workers=3)).workers_see_local_paths()


def test_the_local_engine_runs_each_number_and_hands_each_result_on(tmp_path):
    job = write_job(str(tmp_path), [Task(f"k{n}", square, (n,)) for n in range(5)])
    got = {}
    with Workers(2) as pool:
        tasks = [(4, None), (1, None), (3, Task("k3", square, (5,)))]  # read from the tasks file, or handed over
        LocalEngine(EngineSettings(workers=2)).run(job, tasks, lambda n, result: got.update({n: result}), pool)
    assert got == {4: [16], 1: [1], 3: [25]} and reported(job) == {"k4", "k1", "k3"}


# ------------------------------------------------------------------ Beam


@pytest.mark.parametrize("args,expected", [
    (["--runner", "X"], "X"), (["--runner=Y"], "Y"), (["--runner", "X", "--runner=Z"], "Z"),
    (["--project", "p"], None), (["--runner"], None), (["--runners", "X"], None), ([], None),
    (["--runner=X=Y"], "X=Y"), (["--runner=a=b=c"], "a=b=c"),
])
def test_an_option_of_beams_is_read_as_beam_reads_it(args, expected):
    assert _option(args, "--runner") == expected


def test_the_runner_is_always_named():
    assert beam("").args == ["--runner", DEFAULT_RUNNER] and DEFAULT_RUNNER == "FnApiRunner"
    assert beam("--direct_num_workers 2").args == ["--runner", "FnApiRunner", "--direct_num_workers", "2"]
    assert beam("--runner DirectRunner --x 'a b'").args == ["--runner", "DirectRunner", "--x", "a b"]
    assert beam("--runner=PortableRunner").runner == "PortableRunner"
    assert beam("").describe() == "Apache Beam (FnApiRunner)"
    with pytest.raises(UsageError, match="--beam-options: No closing quotation"):
        _ = beam("--x 'open").args


@pytest.mark.parametrize("options,here", [
    ("", True), ("--runner DirectRunner", True), ("--runner fnapirunner", True), ("--runner direct", True),
    ("--runner BundleBasedDirectRunner", True), ("--runner SwitchingDirectRunner", True),
    ("--runner PortableRunner --environment_type LOOPBACK", True),
    ("--runner PortableRunner --environment_type=loopback", True),
    ("--runner PortableRunner --environment_type EXTERNAL", False), ("--runner DataflowRunner", False),
    ("--runner FlinkRunner", False), ("--runner SparkRunner", False),
])
def test_where_beams_workers_run(options, here):
    assert beam(options).workers_see_local_paths() is here


def test_beam_refuses_an_unknown_runner_and_dataflow_without_its_extra(monkeypatch):
    with pytest.raises(UsageError, match="--beam-options: --runner NoSuchRunner: "):
        beam("--runner NoSuchRunner").check()
    beam("--runner DirectRunner").check()
    monkeypatch.setitem(sys.modules, "apache_beam.runners.dataflow.internal.apiclient", None)
    with pytest.raises(BuildError) as raised:
        beam("--runner DataflowRunner").check()
    assert str(raised.value) == (
        "--runner beam with DataflowRunner needs Apache Beam's Dataflow runner (apache-beam[gcp]), which is not "
        "installed: in a clone of imagenet-build, pip install -c constraints.txt '.[dataflow]'")


def test_beam_runs_every_task_of_a_job_here_and_keeps_its_logs_quiet(tmp_path):
    job = write_job(str(tmp_path), [Task(f"k{n}", square, (n,)) for n in range(4)])
    logger = logging.getLogger("apache_beam")
    before = logger.level
    beam("").run(job, ((n, None) for n in range(4)), lambda n, result: pytest.fail("Beam hands nothing back"), None)
    assert reported(job) == {"k0", "k1", "k2", "k3"} and logger.level == before


def test_beams_pipeline_spreads_the_numbers_and_quiets_its_workers(tmp_path):
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    job = write_job(str(tmp_path), [Task("k0", square, (1,)), Task("k1", square, (2,))])
    pipeline = beam("--direct_num_workers 2").pipeline(job, [0, 1])
    assert isinstance(pipeline.runner, fn_runner.FnApiRunner)
    options = pipeline.options.get_all_options()
    assert options["default_sdk_harness_log_level"] == "ERROR" and options["direct_num_workers"] == 2
    provided = pipeline.runner._provision_info.provision_info.pipeline_options
    assert provided["beam:option:default_sdk_harness_log_level:v1"] == "ERROR"  # the worker processes get them
    transforms = {t.unique_name for t in pipeline.to_runner_api().components.transforms.values()}
    assert "shards/MaybeReshuffle/Reshuffle" in transforms  # the numbers spread over the workers
    given = beam("--default_sdk_harness_log_level=DEBUG").pipeline(job, [0]).options.get_all_options()
    assert given["default_sdk_harness_log_level"] == "DEBUG"
    direct = beam("--runner DirectRunner").pipeline(job, [0])
    assert type(direct.runner).__name__ == "SwitchingDirectRunner"  # what Beam makes of the name
    alias = beam("--runner fnapi").pipeline(job, [0]).runner
    assert alias._provision_info.provision_info.pipeline_options["beam:option:default_sdk_harness_log_level:v1"] \
        == "ERROR"  # made as for FnApiRunner, with the options


class Result:
    """A running Beam job as far as finish() sees it: its end state, or a stop while it is waited for."""

    def __init__(self, state=None, stopped=False, cancel_fails=False):
        self.state, self.stopped, self.cancel_fails, self.cancelled = state, stopped, cancel_fails, False

    def wait_until_finish(self):
        if self.stopped:
            raise KeyboardInterrupt
        return self.state

    def cancel(self):
        if self.cancel_fails:
            raise RuntimeError("a local job cannot be cancelled")
        self.cancelled = True


def test_a_beam_job_is_waited_for_cancelled_when_stopped_and_judged_by_its_state():
    from apache_beam.runners.runner import PipelineState

    from imagenet_build.engines.beam import finish

    finish(Result(PipelineState.DONE))
    finish(Result(None))  # a runner that says nothing: its wait raised nothing
    with pytest.raises(BuildError, match="^the Beam job ended FAILED$"):
        finish(Result(PipelineState.FAILED))
    stopped = Result(stopped=True)
    with pytest.raises(KeyboardInterrupt):
        finish(stopped)
    assert stopped.cancelled
    with pytest.raises(KeyboardInterrupt):
        finish(Result(stopped=True, cancel_fails=True))  # the stop is what is said, not the cancel's failure


def test_beam_missing_is_one_line_when_checked_and_when_run(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "apache_beam", None)
    message = ("--runner beam needs Apache Beam, which is not installed: in a clone of imagenet-build, pip install -c "
               "constraints.txt '.[beam]'")
    with pytest.raises(BuildError) as checked:
        beam("").check()
    with pytest.raises(BuildError) as ran:
        beam("").pipeline(write_job(str(tmp_path), [Task("k0", square, (1,))]), [0])
    assert str(checked.value) == str(ran.value) == message


def test_a_failed_beam_task_fails_its_job_with_its_own_line(tmp_path):
    from imagenet_build.engines.job import task_error

    job = write_job(str(tmp_path), [Task("bad", os.path.getsize, (str(tmp_path / "missing.JPEG"),))])
    with pytest.raises(Exception) as raised:
        beam("").run(job, [(0, None)], lambda n, result: None, None)
    assert "missing.JPEG" in task_error(raised.value)


def raise_in_a_thread(error):
    thread = threading.Thread(target=lambda: (_ for _ in ()).throw(error), name="run_worker")
    thread.start()
    thread.join()


def test_a_dead_beam_worker_stops_the_job_waiting_for_it():
    """Beam's local runner waits forever for a dead worker's bundle: the thread that saw the death stops the wait."""
    hook, handler = threading.excepthook, signal.getsignal(signal.SIGUSR1)
    started = time.monotonic()
    with pytest.raises(BuildError) as raised, _worker_deaths_fail_the_job():
        raise_in_a_thread(RuntimeError("Worker subprocess exited with return code 137"))
        time.sleep(30)  # Beam's wait
    assert time.monotonic() - started < 10
    assert str(raised.value) == ("a worker process of Beam's local runner died (Worker subprocess exited with "
                                 "return code 137)")
    assert threading.excepthook is hook and signal.getsignal(signal.SIGUSR1) == handler


def test_other_thread_errors_are_left_to_pythons_hook(monkeypatch):
    seen = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(str(args.exc_value)))
    with _worker_deaths_fail_the_job():
        raise_in_a_thread(KeyError("a bug"))
    assert seen == ["'a bug'"]


# ------------------------------------------------------------------ Spark


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
    java.write_text("#!/bin/sh\nexec sleep 30\n")
    java.chmod(0o755)
    monkeypatch.setattr(spark_module, "JAVA_TIMEOUT", 0.2)
    started = time.monotonic()
    assert java_version(str(java)) is None and time.monotonic() - started < 10


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


def test_spark_runs_a_job_here_and_its_jvm_ends_with_it(tmp_path):
    pytest.importorskip("pyspark")
    if find_java() is None:
        pytest.skip("no Java for Spark (scripts/test.sh installs Debian's openjdk-17-jre-headless where it may)")
    from pyspark import SparkContext

    logs_before = set(glob.glob(os.path.join(tempfile.gettempdir(), "imagenet-build-spark-*.log")))
    job = write_job(str(tmp_path), [Task(f"k{n}", abs, (-n,)) for n in range(3)])  # executors import no test module
    spark("local[1]").run(job, ((n, None) for n in range(3)), lambda n, result: pytest.fail("Spark hands nothing back"),
                          None)
    assert reported(job) == {"k0", "k1", "k2"}
    assert SparkContext._gateway is None and SparkContext._active_spark_context is None
    assert java_children() == []  # its JVM ended, waited for
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "imagenet-build-spark-*.log"))) == logs_before
    bad = write_job(str(tmp_path / "bad"), [Task("bad", os.path.getsize, (str(tmp_path / "missing.JPEG"),))])
    with pytest.raises(BuildError) as raised:
        spark("local[1]").run(bad, [(0, None)], lambda n, result: None, None)
    line = str(raised.value)
    assert "missing.JPEG" in line and "(Spark's log: " in line
    log = line.rsplit("(Spark's log: ", 1)[1].rstrip(")")
    assert os.path.exists(log)
    os.unlink(log)


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
