"""The Beam engine: one Apache Beam task per shard, on the runner `--beam-options` names (extra [beam]; Dataflow
needs [dataflow]).

The job's elements are shard numbers; each task reads its own part of the plan from the output's storage and
reports there (engines/job.py), so the job graph is a few KB whatever the plan, and no result travels through
Beam. The runner is always named: without `--runner` in the options, FnApiRunner, the local runner behind Beam's
DirectRunner (which first tries to download and start Prism, a separate binary, and silently falls back when it
cannot). apache-beam is imported only here, and only when the engine runs.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shlex
import signal
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from imagenet_build.engines.engine import SHARED_FILESYSTEM, Engine, EngineOption, OnResult, Tasks, register
from imagenet_build.engines.job import JobRef, TaskFailed, run_task
from imagenet_build.infra import write_door
from imagenet_build.infra.errors import BuildError, Interrupted, UsageError
from imagenet_build.infra.optional import missing_message, require, require_all

if TYPE_CHECKING:
    from imagenet_build.infra.workers import Workers

DEFAULT_RUNNER = "FnApiRunner"
# runners whose workers run on this machine, whatever their options
_LOCAL_RUNNERS = {"fnapirunner", "directrunner", "bundlebaseddirectrunner", "switchingdirectrunner", "direct",
                  "fnapi", "testdirectrunner"}
_DATAFLOW_RUNNERS = {"dataflowrunner", "dataflow", "testdataflowrunner"}
_DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"
_BY_PATH_ONLY = {"daskrunner": _DASK_RUNNER, "dask": _DASK_RUNNER}  # runners Beam makes by their path alone


def runner_path(name: str) -> str:
    """The name Beam's create_runner takes for a runner: its own short names, or the module path of one it knows
    only that way (DaskRunner)."""
    return _BY_PATH_ONLY.get(name.lower(), name)


def _option(args: Sequence[str], name: str) -> str | None:
    """The value of `--name X` or `--name=X` in Beam's options (the last one given), else None."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def beam_task(number: int, job: JobRef) -> None:
    """One shard on a Beam worker (its result goes to its receipt, not down the pipeline)."""
    run_task(job, number)


@register
class BeamEngine(Engine):
    name = "beam"
    help = ("Apache Beam, one task per shard, on the runner --beam-options names (FnApiRunner, this machine's, "
            "unless named; extra [beam], [dataflow] for Dataflow)")
    options = (
        EngineOption("beam_options", "", help="--runner beam: Beam's pipeline options, e.g. '--runner DataflowRunner "
                     "--project P --region R --temp_location gs://B/tmp' (docs/scaling.md). [default: --runner "
                     "FnApiRunner, on this machine]"),
        SHARED_FILESYSTEM,
    )

    @property
    def args(self) -> list[str]:
        """Beam's options as given, with the runner named."""
        try:
            args = shlex.split(self.values["beam_options"])
        except ValueError as e:
            raise UsageError(f"--beam-options: {e}") from None
        return args if _option(args, "--runner") else ["--runner", DEFAULT_RUNNER, *args]

    @property
    def runner(self) -> str:
        return _option(self.args, "--runner") or DEFAULT_RUNNER

    def describe(self) -> str:
        return f"Apache Beam ({self.runner})"

    def workers_see_local_paths(self) -> bool:
        runner = self.runner.lower()
        if runner in _LOCAL_RUNNERS:
            return True
        if runner_path(self.runner) == _DASK_RUNNER:  # without a scheduler named, Dask starts one here
            return not (_option(self.args, "--dask_client_address") or _option(self.args, "--dask_scheduler_file"))
        return (_option(self.args, "--environment_type") or "").upper() == "LOOPBACK"

    def check(self) -> None:
        """Beam installed, the runner known, what Dataflow's or Dask's runner needs there, and Beam's options as Beam
        parses them, before anything is listed or written."""
        require("apache_beam", "--runner beam", quiet=True)
        from apache_beam.runners.runner import create_runner

        if self.runner.lower() in _DATAFLOW_RUNNERS:
            try:
                from apache_beam.runners.dataflow.internal import apiclient  # noqa: F401
            except ImportError:
                raise BuildError(missing_message("apache_beam.runners.dataflow", f"--runner beam with {self.runner}")
                                 ) from None
        if runner_path(self.runner) == _DASK_RUNNER:
            require_all(["dask", "distributed"], f"--runner beam with {self.runner}")
        try:
            create_runner(runner_path(self.runner))  # imports the runner's module: its options are then Beam's
        except (ImportError, ValueError) as e:
            raise UsageError(f"--beam-options: --runner {self.runner}: {e}") from None
        parse_options(self.args)

    def run(self, job: JobRef, tasks: Tasks, on_result: OnResult, pool: Workers) -> None:
        numbers = [n for n, _ in tasks]  # its workers read their task from the tasks file
        log = write_door.scratch_file("imagenet-build-beam-", ".log")
        log.close()
        kept = False
        try:
            pipeline = self.pipeline(job, numbers, log.name)
            with _beam_logs_quiet(), _worker_deaths_fail_the_job():
                result = pipeline.run()
                try:
                    finish(result)
                finally:
                    _close_client(result)
        except BuildError as e:  # the job's end, not a task's own line: where its workers said why
            kept = not isinstance(e, TaskFailed) and os.path.getsize(log.name) > 0
            if kept:
                raise BuildError(f"{e} (Beam's workers' log: {log.name})") from None
            raise
        finally:
            if not kept:
                write_door.remove(log.name)

    def pipeline(self, job: JobRef, numbers: Sequence[int], log: str = os.devnull) -> Any:
        """The job as a Beam pipeline: shard numbers, spread over the workers (one Dask partition each), each one's
        task run; local worker processes' stderr to `log`."""
        beam = require("apache_beam", "--runner beam", quiet=True)
        args = self.args
        if not _option(args, "--default_sdk_harness_log_level"):  # workers' INFO lines, a few dozen a run
            args.append("--default_sdk_harness_log_level=ERROR")
        if runner_path(self.runner) == _DASK_RUNNER and not (
                _option(args, "--dask_npartitions") or _option(args, "--dask_partition_size")):
            args.append(f"--dask_npartitions={max(1, len(numbers))}")  # Beam's default: 128 tasks in one partition
        options = parse_options(args)
        pipeline = beam.Pipeline(runner=_runner(self.runner, options, log), options=options)
        _ = (pipeline
             | "shards" >> beam.Create(list(numbers), reshuffle=True)
             | "write" >> beam.Map(beam_task, job))
        return pipeline


def parse_options(args: Sequence[str]) -> Any:
    """Beam's options, parsed: Beam's refusal (argparse's usage text and exit 2), or its help and exit 0, as one
    UsageError line."""
    from apache_beam.options.pipeline_options import PipelineOptions

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            options = PipelineOptions(list(args))
            options.get_all_options()  # parsed now, not when the pipeline first reads them
    except SystemExit:
        errors = [line.split(": error: ", 1)[1] for line in said.getvalue().splitlines() if ": error: " in line]
        raise UsageError(f"--beam-options: {errors[-1] if errors else 'Beam would not run with them'}") from None
    return options


def finish(result: Any) -> None:
    """A running job waited for: cancelled when the wait is stopped (a job elsewhere runs on otherwise), a
    BuildError when it ended in any state but done."""
    from apache_beam.runners.runner import PipelineState

    try:
        state = result.wait_until_finish()
    except KeyboardInterrupt:
        _cancel(result)
        raise
    if state is not None and state != PipelineState.DONE:
        raise BuildError(f"the Beam job ended {state}")


def _runner(name: str, options: Any, log: str) -> Any:
    """The runner `name`; FnApiRunner made as Beam's DirectRunner makes it, with the pipeline's options for its
    worker processes (made by name, it gives them none: their log level, among others, is then INFO), and their
    stderr (their start-up lines, Beam's import warnings, their tracebacks when a stop ends them) to `log`."""
    from apache_beam.runners.runner import create_runner

    if name.lower() not in ("fnapirunner", "fnapi"):
        return create_runner(runner_path(name))
    from apache_beam.portability import python_urns
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    class FnApiRunnerLogged(fn_runner.FnApiRunner):
        def run_via_runner_api(self, pipeline_proto: Any, options: Any) -> Any:
            for environment in pipeline_proto.components.environments.values():
                if environment.urn == python_urns.SUBPROCESS_SDK:  # its payload: the worker's shell command
                    environment.payload += f" 2>>{shlex.quote(log)}".encode()
            return super().run_via_runner_api(pipeline_proto, options)

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    return FnApiRunnerLogged(provision_info=fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))


def _close_client(result: Any) -> None:
    """Dask's runner leaves its client open (and the local cluster it started running): closed with the job."""
    client = getattr(result, "client", None)  # a Dask runner's result's: a distributed.Client
    if client is not None:
        client.close()


class WorkerDied(Exception):
    """A worker process of Beam's local runner ended (killed, out of memory)."""


_QUIET_THREADS: weakref.WeakSet[threading.Thread] = weakref.WeakSet()  # the threads Beam started for a job


class _QuietHook:
    """threading.excepthook once a job has run: what a thread Beam started for it raises (a broken channel, a worker
    a stop ended) is not printed; the job said how it ended. Other threads' errors go to the hook before it."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, args: Any) -> None:
        if args.thread not in _QUIET_THREADS:
            self.previous(args)


@contextlib.contextmanager
def _worker_deaths_fail_the_job() -> Iterator[None]:
    """Beam's local runner waits forever for the work of a worker process that died: the thread that ran it reports
    the death and ends, and nothing else notices. Here that report stops the job at once (raised in the main
    thread, where the job waits), unless a stop is under way already (a signal to the process group ends the
    workers too); and what Beam's threads raise is not printed, during the job or after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    died: list[str] = []
    before = set(threading.enumerate())
    previous_hook = threading.excepthook

    def hook(args: Any) -> None:
        if "Worker subprocess exited" in str(args.exc_value):
            if not died and not Interrupted.requested:
                main = threading.main_thread().ident
                assert main is not None
                signal.pthread_kill(main, signal.SIGUSR1)  # a real signal: it wakes the main thread from its wait
            died.append(str(args.exc_value))
        elif args.thread in before:  # not one of Beam's for this job
            previous_hook(args)

    def stop(signum: int, frame: Any) -> None:
        if not Interrupted.requested:  # a stop under way: that is the news, and Beam is cleaning up
            raise WorkerDied(died[0] if died else "a worker process died")

    previous_handler = signal.signal(signal.SIGUSR1, stop)
    threading.excepthook = hook
    try:
        yield
    except WorkerDied as e:
        raise BuildError(f"a worker process of Beam's local runner died ({e})") from None
    finally:
        _QUIET_THREADS.update(set(threading.enumerate()) - before)
        threading.excepthook = previous_hook if isinstance(previous_hook, _QuietHook) else _QuietHook(previous_hook)
        signal.signal(signal.SIGUSR1, previous_handler)


@contextlib.contextmanager
def _beam_logs_quiet() -> Iterator[None]:
    """Beam's own log lines (a worker's start-up relayed by the local job service, its errors on the way out after a
    failure) off stderr while the job runs: a failure reaches convert as the job's, which says it in one line."""
    logger = logging.getLogger("apache_beam")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _cancel(result: object) -> None:
    """Stop a job still running elsewhere (Dataflow, a job service); a local runner has stopped with us."""
    try:
        result.cancel()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - runners that cannot cancel (a finished or local job) say so by raising
        pass
