"""Each engine's own rules, in this process: the options it reads, what it refuses, where its workers run, and the
Beam engine running a small job here (Spark's: test_spark_options.py; the whole-process runs: test_engines.py)."""

import logging
import os
import signal
import sys
import threading
import time

import pytest

from imagenet_build.engines import ENGINES, make_engine
from imagenet_build.engines.beam import (
    DEFAULT_RUNNER,
    BeamEngine,
    _option,
    _QuietHook,
    _worker_deaths_fail_the_job,
    runner_path,
)
from imagenet_build.engines.job import Task, reported, write_job
from imagenet_build.engines.local import LocalEngine
from imagenet_build.engines.spark import DEFAULT_MASTER, SparkEngine
from imagenet_build.infra.errors import BuildError, Interrupted, UsageError
from imagenet_build.infra.workers import Workers


def square(x):
    return [x * x]


def beam(options):
    return BeamEngine(1, {"beam_options": options})


def spark(master=DEFAULT_MASTER, conf=()):
    return SparkEngine(1, {"spark_master": master, "spark_conf": conf})


def test_the_registry_holds_each_engine_by_its_name():
    assert ENGINES == {"local": LocalEngine, "beam": BeamEngine, "spark": SparkEngine}
    made = make_engine("spark", 3, {"spark_master": "yarn", "spark_conf": "a=b"})
    assert isinstance(made, SparkEngine) and (made.workers, made.master, made.conf) == (3, "yarn", [("a", "b")])
    assert LocalEngine.reports_as_tasks_end and not BeamEngine.reports_as_tasks_end
    assert not SparkEngine.reports_as_tasks_end


def test_convert_takes_each_engines_own_options_in_runner_order_then_those_several_take():
    from imagenet_build import engines
    from imagenet_build.engines.engine import SHARED_FILESYSTEM

    assert [o.name for o in engines._engine_options()] == ["beam_options", "spark_master", "spark_conf",
                                                           "shared_filesystem"]
    assert engines.ENGINE_OPTIONS == engines._engine_options()
    assert engines.runners_taking(SHARED_FILESYSTEM) == ["beam", "spark"]


def test_an_engine_takes_only_its_own_options_and_registers_by_its_name(monkeypatch):
    from imagenet_build.engines import engine

    with pytest.raises(ValueError) as refused:
        SparkEngine(1, {"beam_options": "x", "added_speed": 1, "spark_master": "yarn"})
    assert str(refused.value) == "--runner spark takes no added_speed, beam_options"
    monkeypatch.setattr(engine, "ENGINES", {})
    added = type("Added", (engine.Engine,), {"name": "added", "help": "an added engine", "run": lambda *a: None})
    assert engine.register(added) is added and engine.ENGINES == {"added": added}
    with pytest.raises(ValueError, match="engine 'added' registered twice"):  # not the first replaced in silence
        engine.register(type("Again", (added,), {}))
    assert engine.ENGINES == {"added": added}


@pytest.mark.parametrize("settings,paths,refused", [
    ({"spark_master": "yarn"}, {"--output-dir": ["out"]}, "--output-dir out"),
    ({"spark_master": "yarn"}, {"--output-dir": ["s3://b/o"], "--from": ["s3://b/a", "/data/b"]},
     "--from /data/b"),
    ({"spark_master": "yarn"}, {"--output-dir": ["gs://b/o"], "--index-dir": [""]}, None),
    ({"spark_master": "yarn", "shared_filesystem": True}, {"--output-dir": ["/nfs/out"]}, None),
    ({"spark_master": "local[4]"}, {"--output-dir": ["out"]}, None),
    ({"spark_master": "local-cluster[2,1,1024]"}, {"--output-dir": ["out"]}, None),
])
def test_a_local_path_is_refused_only_where_workers_may_be_elsewhere(settings, paths, refused):
    engine = SparkEngine(1, settings)
    if refused is None:
        engine.refuse_unreachable(paths)
        return
    with pytest.raises(UsageError) as raised:
        engine.refuse_unreachable(paths)
    assert str(raised.value) == (
        f"{refused} is a local path, and Apache Spark ({settings['spark_master']}) may run its workers on other "
        "machines: give an object-store URL (s3://, gs://), or --shared-filesystem if every worker sees this path")


def test_the_local_engine_says_how_many_processes():
    assert LocalEngine(1).describe() == "1 local worker process"
    assert LocalEngine(2).describe() == "2 local worker processes"
    assert LocalEngine(3).workers_see_local_paths()


def test_the_local_engine_runs_each_number_and_hands_each_result_on(tmp_path):
    job = write_job(str(tmp_path), [Task(f"k{n}", square, (n,)) for n in range(5)])
    got = {}
    with Workers(2) as pool:
        tasks = [(4, None), (1, None), (3, Task("k3", square, (5,)))]  # read from the tasks file, or handed over
        LocalEngine(2).run(job, tasks, lambda n, result: got.update({n: result}), pool)
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
    with pytest.raises(BuildError) as raised, _worker_deaths_fail_the_job():
        raise_in_a_thread(RuntimeError("Worker subprocess exited with return code 137"))
        time.sleep(120)  # Beam's wait, which the death must stop
        pytest.fail("the wait was not stopped")
    assert str(raised.value) == ("a worker process of Beam's local runner died (Worker subprocess exited with "
                                 "return code 137)")
    assert signal.getsignal(signal.SIGUSR1) == handler
    assert threading.excepthook is hook or threading.excepthook.previous is hook  # Beam's threads quiet after it


def test_beams_threads_are_quiet_during_the_job_and_after_it_others_are_not(monkeypatch):
    seen = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(str(args.exc_value)))
    go = threading.Event()
    theirs = threading.Thread(target=lambda: go.wait(60) and (_ for _ in ()).throw(KeyError("theirs")))
    theirs.start()  # a thread of the program's, not Beam's
    late = threading.Event()
    with _worker_deaths_fail_the_job():
        raise_in_a_thread(RuntimeError("Beam's channel broke"))
        beams = threading.Thread(target=lambda: late.wait(60) and (_ for _ in ()).throw(RuntimeError("after")))
        beams.start()  # a thread of the job's, still running when it ends
        go.set()
        theirs.join()
    assert isinstance(threading.excepthook, _QuietHook)
    late.set()
    beams.join()
    assert seen == ["'theirs'"]
    raise_in_a_thread(KeyError("later"))  # a thread started after the job: the program's again
    assert seen == ["'theirs'", "'later'"]


def test_off_the_main_thread_a_job_is_waited_for_as_it_is():
    """Signals reach the main thread alone: elsewhere (a program's own thread running convert) nothing is set."""
    done = []

    def job():
        with _worker_deaths_fail_the_job():
            done.append(signal.getsignal(signal.SIGUSR1))
        done.append("ended")

    handler = signal.getsignal(signal.SIGUSR1)
    thread = threading.Thread(target=job)
    thread.start()
    thread.join()
    assert done == [handler, "ended"] and signal.getsignal(signal.SIGUSR1) == handler


def test_a_worker_ended_by_a_stop_under_way_is_the_stop(monkeypatch):
    """A signal to the process group ends Beam's workers too: their deaths are not a second error raised into the
    stop's own cleanup."""
    monkeypatch.setattr(Interrupted, "requested", True)
    with _worker_deaths_fail_the_job():
        raise_in_a_thread(RuntimeError("Worker subprocess exited with return code -15"))
        os.kill(os.getpid(), signal.SIGUSR1)  # as a death seen before the stop would have sent it
        time.sleep(0.1)


@pytest.mark.parametrize("options,said", [
    ("--runner", "argument --runner: expected one argument"),
    ("--direct_num_workers=abc", "argument --direct_num_workers: invalid int value: 'abc'"),
    ("'--direct_num_workers=: error: x'", "argument --direct_num_workers: invalid int value: ': error: x'"),
    ("--help", "Beam would not run with them"),  # its help, on stdout, and exit 0
    ("--runner FnApiRunner --direct_running_mode=sometimes", "argument --direct_running_mode: invalid choice: "
                                                             "'sometimes' (choose from 'in_memory', 'multi_threading', "
                                                             "'multi_processing')"),
])
def test_beams_refusal_of_its_options_is_one_line_before_anything_runs(options, said, capfd):
    with pytest.raises(UsageError) as raised:
        beam(options).check()
    assert str(raised.value) == f"--beam-options: {said}"
    assert capfd.readouterr() == ("", "")  # not Beam's usage text


def test_dasks_runner_by_its_short_name_with_a_partition_for_each_task(tmp_path):
    from apache_beam.runners.dask.dask_runner import DaskOptions, DaskRunner
    from apache_beam.runners.dask.overrides import dask_overrides

    assert runner_path("DaskRunner") == runner_path("dask") == "apache_beam.runners.dask.dask_runner.DaskRunner"
    assert runner_path("FnApiRunner") == "FnApiRunner"
    beam("--runner DaskRunner").check()
    assert beam("--runner DaskRunner").workers_see_local_paths()  # Dask's own cluster, started here
    assert not beam("--runner DaskRunner --dask_client_address tcp://h:8786").workers_see_local_paths()
    assert not beam("--runner dask --dask_scheduler_file /s.json").workers_see_local_paths()
    job = write_job(str(tmp_path), [Task(f"k{n}", square, (n,)) for n in range(40)])
    pipeline = beam("--runner DaskRunner").pipeline(job, range(40))
    assert isinstance(pipeline.runner, DaskRunner)
    bag_kwargs = DaskOptions._extract_bag_kwargs(pipeline.options.view_as(DaskOptions).get_all_options(
        drop_default=True))
    pipeline.replace_all(dask_overrides())  # as DaskRunner makes its dask.bag of the pipeline
    visitor = DaskRunner.to_dask_bag_visitor(bag_kwargs)
    pipeline.visit(visitor)
    assert [bag.npartitions for bag in visitor.bags.values()][0] == 40  # Beam's default: 1 partition of 128
    given = beam("--runner DaskRunner --dask_partition_size 8").pipeline(job, range(40)).options.get_all_options()
    assert given["partition_size"] == 8 and given["npartitions"] is None
    given = beam("--runner DaskRunner --dask_npartitions 7").pipeline(job, range(40)).options.get_all_options()
    assert given["npartitions"] == 7  # the user's partitions kept, not one per task


def test_dasks_runner_runs_every_task_of_a_job(tmp_path):
    from distributed import LocalCluster, default_client

    job = write_job(str(tmp_path), [Task(f"k{n}", square, (n,)) for n in range(3)])
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster:
        beam(f"--runner DaskRunner --dask_client_address {cluster.scheduler_address}").run(
            job, ((n, None) for n in range(3)), lambda n, result: pytest.fail("Beam hands nothing back"), None)
        with pytest.raises(ValueError, match="No clients found"):  # the runner's client closed with the job
            default_client()
    assert reported(job) == {"k0", "k1", "k2"}


def test_dasks_runner_without_dask_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(BuildError) as raised:
        beam("--runner dask").check()
    said = str(raised.value)  # the install hint's wording is optional.py's own
    assert said.startswith("--runner beam with dask needs Dask's distributed scheduler, which is not installed: ")
    assert "'.[dask]'" in said and "\n" not in said
