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
import logging
import shlex
import signal
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from imagenet_build.engines.base import Engine, OnResult, Tasks, register
from imagenet_build.engines.job import JobRef, run_task
from imagenet_build.infra.errors import BuildError, UsageError
from imagenet_build.infra.optional import missing_message, require

if TYPE_CHECKING:
    from imagenet_build.infra.workers import Workers

DEFAULT_RUNNER = "FnApiRunner"
# runners whose workers run on this machine, whatever their options
_LOCAL_RUNNERS = {"fnapirunner", "directrunner", "bundlebaseddirectrunner", "switchingdirectrunner", "direct",
                  "fnapi", "testdirectrunner"}
_DATAFLOW_RUNNERS = {"dataflowrunner", "dataflow", "testdataflowrunner"}


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

    @property
    def args(self) -> list[str]:
        """Beam's options as given, with the runner named."""
        try:
            args = shlex.split(self.settings.beam_options)
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
        return (_option(self.args, "--environment_type") or "").upper() == "LOOPBACK"

    def check(self) -> None:
        """Beam installed, the runner known, and what Dataflow's runner needs there, before anything is listed."""
        require("apache_beam", "--runner beam", quiet=True)
        from apache_beam.runners.runner import create_runner

        if self.runner.lower() in _DATAFLOW_RUNNERS:
            try:
                from apache_beam.runners.dataflow.internal import apiclient  # noqa: F401
            except ImportError:
                raise BuildError(missing_message("apache_beam.runners.dataflow", f"--runner beam with {self.runner}")
                                 ) from None
        try:
            create_runner(self.runner)
        except (ImportError, ValueError) as e:
            raise UsageError(f"--beam-options: --runner {self.runner}: {e}") from None

    def run(self, job: JobRef, tasks: Tasks, on_result: OnResult, pool: Workers) -> None:
        pipeline = self.pipeline(job, [n for n, _ in tasks])  # its workers read their task from the tasks file
        with _beam_logs_quiet(), _worker_deaths_fail_the_job():
            finish(pipeline.run())

    def pipeline(self, job: JobRef, numbers: Sequence[int]) -> Any:
        """The job as a Beam pipeline: shard numbers, spread over the workers, each one's task run."""
        beam = require("apache_beam", "--runner beam", quiet=True)
        from apache_beam.options.pipeline_options import PipelineOptions

        args = self.args
        if not _option(args, "--default_sdk_harness_log_level"):  # workers' INFO lines, a few dozen a run
            args.append("--default_sdk_harness_log_level=ERROR")
        options = PipelineOptions(args)
        pipeline = beam.Pipeline(runner=_runner(self.runner, options), options=options)
        _ = (pipeline
             | "shards" >> beam.Create(list(numbers), reshuffle=True)
             | "write" >> beam.Map(beam_task, job))
        return pipeline


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


def _runner(name: str, options: Any) -> Any:
    """The runner `name`; FnApiRunner made as Beam's DirectRunner makes it, with the pipeline's options for its
    worker processes (made by name, it gives them none: their log level, among others, is then INFO)."""
    from apache_beam.runners.runner import create_runner

    if name.lower() not in ("fnapirunner", "fnapi"):
        return create_runner(name)
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    return fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))


class WorkerDied(Exception):
    """A worker process of Beam's local runner ended (killed, out of memory)."""


@contextlib.contextmanager
def _worker_deaths_fail_the_job() -> Iterator[None]:
    """Beam's local runner waits forever for the work of a worker process that died: the thread that ran it reports
    the death and ends, and nothing else notices. Here that report stops the job at once (raised in the main
    thread, where the job waits), and Beam's threads' tracebacks after it are not printed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    died: list[str] = []
    previous_hook = threading.excepthook

    def hook(args: Any) -> None:
        if "Worker subprocess exited" in str(args.exc_value):
            if not died:
                died.append(str(args.exc_value))
                main = threading.main_thread().ident
                assert main is not None
                signal.pthread_kill(main, signal.SIGUSR1)  # a real signal: it wakes the main thread from its wait
            return
        if not died:  # after a death, Beam's other threads fail on their broken channels: its own words said it
            previous_hook(args)

    def stop(signum: int, frame: Any) -> None:
        raise WorkerDied(died[0] if died else "a worker process died")

    previous_handler = signal.signal(signal.SIGUSR1, stop)
    threading.excepthook = hook
    try:
        yield
    except WorkerDied as e:
        raise BuildError(f"a worker process of Beam's local runner died ({e})") from None
    finally:
        threading.excepthook = previous_hook
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
