"""Run tasks in this process or on worker processes, and show progress.

Every stage that fans out (writing shards, checking them, indexing them) runs
one pure task per shard through Workers, so the result never depends on how
many processes ran.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

from imagenet_build.infra.errors import BuildError, Interrupted

_parent_pid: int | None = None


PR_SET_PDEATHSIG = 1  # linux/prctl.h
ORPHAN_POLL = 1.0  # seconds between a watchdog's looks at the parent, where the kernel cannot tell


def _die_with_parent(parent_pid: int, forked_by_main_thread: bool) -> None:
    """Make this worker end when its parent does, even idle in the pool's queue.

    A worker of a parent killed by kill -9 holds both ends of the pool's pipes, so it never
    sees EOF and would sleep forever. On Linux the kernel sends SIGKILL on the parent's death
    (prctl PR_SET_PDEATHSIG); elsewhere a daemon thread checks the parent every second. The
    kernel's signal comes when the parent *thread* that started the worker ends, not the
    process: it is asked for only where that thread was the main one (whose end is the
    process's); a worker started from another thread gets the watchdog.
    """
    if sys.platform.startswith("linux") and forked_by_main_thread:
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent_pid:  # the parent died before the request was made
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass  # no usable libc: fall back to the watchdog

    def watch() -> None:
        while True:
            time.sleep(ORPHAN_POLL)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="orphan-watchdog", daemon=True).start()


def _init_worker(parent_pid: int, forked_by_main_thread: bool) -> None:
    """Workers ignore Ctrl-C (the parent stops them) and end when the parent dies. SIGTERM ends them
    (the pool ends a worker with it where its queues may be broken, a worker having died), not the
    handler a forked worker inherits from the CLI, which would make it a task's error."""
    global _parent_pid
    _parent_pid = parent_pid
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # blocked while it started (Workers.__enter__)
    _die_with_parent(parent_pid, forked_by_main_thread)


def _init_loader_worker(parent_pid: int, forked_by_main_thread: bool, worker_id: int) -> None:
    """As Workers': Ctrl-C is the parent's to handle. A worker that took it left its loop with a batch
    still to hand on, and the parent, stopping, waited 5 s for each such worker before ending it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid, forked_by_main_thread)


def end_with_this_process() -> Callable[[int], None]:
    """A DataLoader's worker_init_fn: its workers end when this process does, as Workers' do.

    PyTorch's own check (every 5 s, from the worker's loop) misses a worker blocked handing on a
    batch: after kill -9 or SIGTERM of the parent such workers stayed, 300-500 MB each. Make the
    DataLoader here, in the thread that iterates it (the one that starts the workers).
    """
    return functools.partial(_init_loader_worker, os.getpid(),
                             threading.current_thread() is threading.main_thread())


def exit_if_orphaned() -> None:
    """In a worker: stop at once if the parent was killed (kill -9 leaves workers behind)."""
    if _parent_pid is not None and os.getppid() != _parent_pid:
        os._exit(1)


def _noop() -> None:
    return None


STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def _stop_signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM held back while worker processes start (as multiprocessing does for its
    resource tracker): a started one inherits the block until its initializer has set its own
    handling. A spawned worker took a Ctrl-C to the process group while importing, and printed a
    KeyboardInterrupt traceback. The parent gets a signal held back as soon as they have started."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


class Workers:
    """Runs tasks in this process (one worker) or on worker processes.

    The processes start when the pool is opened, before the inputs are listed:
    forked then (where fork exists), they start in milliseconds and inherit
    nothing of the plan. Tasks are drawn lazily, two per worker in flight, so a
    big plan is never all in memory at once. All of them start in the thread that
    opens the pool, which outlives them (the `with` block's end stops them).
    """

    def __init__(self, count: int) -> None:
        self.count = max(1, count)
        self._pool: ProcessPoolExecutor | None = None
        self._processes: list[Any] = []  # kept from a pool told to stop early, to wait for in close()

    def __enter__(self) -> Workers:
        if self.count > 1:
            import multiprocessing

            # fork only a single-threaded process (a host program with threads could deadlock the child)
            can_fork = "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
            context = multiprocessing.get_context("fork" if can_fork else "spawn")
            main = threading.current_thread() is threading.main_thread()
            if not can_fork:  # started now, its start would end the hold below (it unblocks both signals)
                from multiprocessing import resource_tracker

                resource_tracker.ensure_running()
            with _stop_signals_held():
                self._pool = ProcessPoolExecutor(
                    max_workers=self.count, mp_context=context, initializer=_init_worker,
                    initargs=(os.getpid(), main))
                futures = [self._pool.submit(_noop) for _ in range(self.count)]
            try:
                for future in futures:
                    future.result()
            except BaseException:  # interrupted while they start: no `with` block will stop them
                self.close()
                raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker processes (after the tasks they are running); nothing they write comes after."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        for process in self._processes:
            process.join()
        self._processes = []

    def _stop_early(self, pool: ProcessPoolExecutor) -> None:
        """No task not yet started will run. The pool's own thread cancels them (a cancel from here races
        its handling of a worker that died meanwhile, and Python 3.11 then loses that thread to an
        InvalidStateError, leaving the other workers waiting forever); its processes are kept to be
        waited for in close(), which the pool no longer does once told not to wait here."""
        self._processes = list(pool._processes.values())
        pool.shutdown(wait=False, cancel_futures=True)

    def run(self, fn: Callable[..., Any], tasks: Iterable[Any], on_result: Callable[[Any, Any], None]) -> None:
        """fn(*task) for each task; on_result(task, result) in the calling process as each ends.

        Stopped early (an interrupt, a task's error), it hands out no more tasks, lets those
        running finish and passes on_result what they did, then raises: a task that finished
        is never lost (convert records every shard written, even while it stops). The pool
        then takes no more tasks.
        """
        todo = iter(tasks)
        pool = self._pool
        if pool is None:
            for task in todo:
                _raise_if_interrupted()
                on_result(task, fn(*task))
            return
        pending: dict[Future[Any], Any] = {}

        def top_up() -> None:
            while len(pending) < 2 * self.count:
                task = next(todo, None)
                if task is None:
                    return
                pending[pool.submit(fn, *task)] = task

        try:
            top_up()
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    on_result(pending[future], future.result())
                    del pending[future]  # only once handed on: an interrupt in on_result leaves it to _hand_on_running
                _raise_if_interrupted()
                top_up()
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                Interrupted.stopping = True  # the tasks running now finish; a second signal changes nothing
            self._stop_early(pool)
            _hand_on_running(pending, on_result)
            if isinstance(e, BrokenProcessPool):
                if Interrupted.requested:  # SIGTERM to the whole process group ended the workers too
                    raise Interrupted from None
                raise BuildError("a worker process died (out of memory, or killed); run the command again") from None
            raise


def _raise_if_interrupted() -> None:
    """A stop signal whose raise was lost (it came in a __del__, say) still stops the run here."""
    if Interrupted.requested:
        raise Interrupted


def _hand_on_running(pending: dict[Future[Any], Any], on_result: Callable[[Any, Any], None]) -> None:
    """The tasks running when a run stopped end, and what each did is handed on."""
    for future, task in pending.items():
        try:
            result = future.result()
        except Exception:  # cancelled, a task's error, or the pool broken: the error raised already says what
            continue
        try:
            on_result(task, result)
        except Exception:  # the caller fails already (a full disk, say): its first error is the one to raise
            continue


class _NoBar:
    """What progress_bar gives where stderr is no terminal: tqdm would be silent there, and loading it costs a run
    ~50 ms."""

    def update(self, n: float = 1) -> None:
        Interrupted.raise_if_requested()

    def close(self) -> None:
        pass


@functools.cache
def _looking_bar(tqdm: Any) -> Any:
    """tqdm's bar, whose every step looks for a stop whose raise was lost (Interrupted.raise_if_requested)."""

    class LookingBar(tqdm):
        def update(self, n: float | None = 1) -> bool | None:
            Interrupted.raise_if_requested()
            return super().update(n)

    return LookingBar


def progress_bar(total: int | None, initial: int, desc: str, unit: str) -> Any:
    """A tqdm bar on stderr where it is a terminal, else nothing (tqdm's own rule: silent in logs)."""
    if not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return _NoBar()
    from tqdm import tqdm

    # tqdm's monitor thread (started by every bar, shown or not) would make the process threaded before a
    # pool opens: the workers were then spawned, not forked (each importing the package), and spawning
    # leaves multiprocessing's resource tracker running past the tool's exit. The bars refresh themselves.
    tqdm.monitor_interval = 0
    return _looking_bar(tqdm)(
        total=total,
        initial=initial,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        dynamic_ncols=True,
        disable=None,  # shown on a terminal, silent in logs
    )


def progress_note(text: str) -> None:
    """One line of progress on stderr where it is a terminal, as the bars are shown (never in a log or a pipe):
    what a command is doing while no bar moves (libraries loading, a build being opened, a check's next step)."""
    isatty = getattr(sys.stderr, "isatty", None)
    if isatty is not None and isatty():
        print(text, file=sys.stderr, flush=True)
