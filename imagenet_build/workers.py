"""Run tasks in this process or on worker processes, and show progress.

Every stage that fans out (writing shards, checking them, indexing them) runs
one pure task per shard through Workers, so the result never depends on how
many processes ran.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

from imagenet_build.errors import BuildError

_parent_pid: int | None = None


PR_SET_PDEATHSIG = 1  # linux/prctl.h
ORPHAN_POLL = 1.0  # seconds between a watchdog's looks at the parent, where the kernel cannot tell


def _die_with_parent(parent_pid: int) -> None:
    """Make this worker end when its parent does, even idle in the pool's queue.

    A worker of a parent killed by kill -9 holds both ends of the pool's pipes, so it never
    sees EOF and would sleep forever. On Linux the kernel sends SIGKILL on the parent's death
    (prctl PR_SET_PDEATHSIG); elsewhere a daemon thread checks the parent every second.
    """
    if sys.platform.startswith("linux"):
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
            exit_if_orphaned()

    threading.Thread(target=watch, name="orphan-watchdog", daemon=True).start()


def _init_worker(parent_pid: int) -> None:
    """Workers ignore Ctrl-C (the parent stops them) and end when the parent dies."""
    global _parent_pid
    _parent_pid = parent_pid
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)


def exit_if_orphaned() -> None:
    """In a worker: stop at once if the parent was killed (kill -9 leaves workers behind)."""
    if _parent_pid is not None and os.getppid() != _parent_pid:
        os._exit(1)


def _noop() -> None:
    return None


class Workers:
    """Runs tasks in this process (one worker) or on worker processes.

    The processes start when the pool is opened, before the inputs are listed:
    forked then (where fork exists), they start in milliseconds and inherit
    nothing of the plan. Tasks are drawn lazily, two per worker in flight, so a
    big plan is never all in memory at once.
    """

    def __init__(self, count: int) -> None:
        self.count = max(1, count)
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Workers:
        if self.count > 1:
            import multiprocessing

            # fork only a single-threaded process (a host program with threads could deadlock the child)
            can_fork = "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
            context = multiprocessing.get_context("fork" if can_fork else "spawn")
            self._pool = ProcessPoolExecutor(
                max_workers=self.count, mp_context=context, initializer=_init_worker, initargs=(os.getpid(),)
            )
            for future in [self._pool.submit(_noop) for _ in range(self.count)]:
                future.result()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def run(self, fn: Callable[..., Any], tasks: Iterable[Any], on_result: Callable[[Any, Any], None]) -> None:
        """fn(*task) for each task; on_result(task, result) in the calling process as each ends."""
        todo = iter(tasks)
        pool = self._pool
        if pool is None:
            for task in todo:
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
                    on_result(pending.pop(future), future.result())
                top_up()
        except BrokenProcessPool:
            raise BuildError(
                "a worker process died (out of memory, or killed); run the command again"
            ) from None
        finally:
            for future in pending:
                future.cancel()


def progress_bar(total: int | None, initial: int, desc: str, unit: str) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        dynamic_ncols=True,
        disable=None,  # shown on a terminal, silent in logs
    )
