"""trainer-check's DataLoaders: how many workers they get, and how their workers start and end.

Workers are bounded by the cores (more only contend, and PyTorch warns on every loader that has
more) and by the batches of an epoch (a worker loads whole batches: one without a batch to load is
a process started for nothing; `--workers 1000` started hundreds and took minutes to stop). They are
started with the stop signals held back until each has set its own handling (a SIGTERM to the
process group that reached a worker while it forked printed its traceback). A worker that SIGTERM
reaches leaves at once, without handing on what it holds: one that finished its loop first stayed
flushing a batch into a pipe nobody read any more, for the parent's 5 s wait, then printed a
BrokenPipeError traceback. Ctrl-C is the parent's to handle (infra/workers.py). The parent ends its
workers in a `finally` as soon as it stops, not when the garbage collector gets to them; they end
with it if it is killed. A batch's tensors reach the parent as file descriptors that the parent
fetches from the worker's resource sharer (multiprocessing's thread, which prints what goes wrong);
a parent stopped mid-fetch hangs up on it, and that is the parent's to report, not the worker's.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
from multiprocessing import resource_sharer
from types import TracebackType
from typing import Any, Callable, Generator, Iterator

from imagenet_build.infra.optional import require
from imagenet_build.infra.workers import end_with_this_process

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def usable_cores() -> int:
    """The cores this process may run on (its affinity, as PyTorch counts them for its warning)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def worker_count(asked: int | None, default: int, records: int, batch_size: int) -> tuple[int, str]:
    """(DataLoader workers per rank, a note when an asked number was cut). `default` (the reader's, from the
    registry) where none was asked; any number is cut to the usable cores and to the batches of an epoch."""
    cores, batches = usable_cores(), -(-records // batch_size)
    wanted = asked if asked is not None else default
    used = min(wanted, cores, batches)
    if asked is None or used == asked:
        return used, ""
    if used == cores:
        return used, f"--workers {asked}: {used} used, one per usable core (more would only contend)"
    return used, (f"--workers {asked}: {used} used, one per batch of an epoch ({records} records in batches of "
                  f"{batch_size}; more would sit idle)")


def _leave_at_once(signum: int, frame: Any) -> None:
    os._exit(0)  # no cleanup: nothing a worker holds is wanted any more; 0: no "worker died" from PyTorch


def _receiver_hung_up(hook: Callable[..., Any], kind: type[BaseException], error: BaseException,
                      trace: TracebackType | None) -> None:
    """A worker's sys.excepthook: what its resource sharer's thread hands it, less a receiver that hung up
    mid-fetch (a parent stopped while it fetched a batch's file descriptor printed the worker's
    `ConnectionResetError` traceback, from `resource_sharer.py ... in _serve`, before `error: interrupted`).
    The receiver sees that fetch fail itself, and reports it as it reports any error of its own."""
    where = (trace.tb_frame.f_code.co_filename, trace.tb_frame.f_code.co_name) if trace is not None else None
    if where == (resource_sharer.__file__, "_serve") and isinstance(error, (EOFError, ConnectionError)):
        return
    hook(kind, error, trace)


def _start_worker(init: Callable[[int], None], worker_id: int) -> None:
    """A worker's start: the parent's (it ends with the parent; Ctrl-C is the parent's), SIGTERM leaving at
    once, a parent hanging up on its resource sharer left to the parent to report, then the stop signals it
    was started with held let through."""
    init(worker_id)
    signal.signal(signal.SIGTERM, _leave_at_once)
    sys.excepthook = functools.partial(_receiver_hung_up, sys.excepthook)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def loader(dataset: Any, batch_size: int, workers: int) -> Any:
    """The DataLoader of trainer-check's reads (batches collated by the reader's own collate)."""
    from imagenet_build.readers.torch_dataset import collate

    torch = require("torch", "trainer-check --framework torch")
    return torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, num_workers=workers, collate_fn=collate,
        prefetch_factor=4 if workers else None,
        worker_init_fn=functools.partial(_start_worker, end_with_this_process()) if workers else None)


@contextlib.contextmanager
def _stops_deferred() -> Iterator[None]:
    """SIGTERM and Ctrl-C put off while the workers fork, and delivered as they came once they have: a stop
    raised inside PyTorch's loader while it starts them left it half made ("Exception ignored in ...
    __del__"). The signals are blocked too, which the workers inherit until each has set its own handling
    (_start_worker); blocking alone is not enough, as another thread of this process may take the signal."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield  # only the main thread runs signal handlers, and may set them
        return
    came: list[int] = []
    held = {number: signal.signal(number, lambda signum, frame: came.append(signum)) for number in STOP_SIGNALS}
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a signal blocked till now is taken here
        for number, handler in held.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)  # None: one set from C
        if came:
            signal.raise_signal(came[0])  # to the handler it was meant for


def batches(dataset: Any, batch_size: int, workers: int) -> Generator[dict, None, None]:
    """One epoch's batches; the workers, started with the stop signals held, end when the epoch does, when
    the caller stops early, or when it closes this generator."""
    data = loader(dataset, batch_size, workers)
    epoch = None
    try:
        with _stops_deferred():
            epoch = iter(data)
        yield from epoch
    finally:
        # now, not when the last reference goes: a stop's traceback holds the iterator's frame a while
        shutdown = getattr(epoch, "_shutdown_workers", None)  # PyTorch's own, also run by its __del__
        if shutdown is not None:
            shutdown()


def cycle(dataset: Any, batch_size: int, workers: int) -> Generator[dict, None, None]:
    """Batches epoch after epoch (set_epoch before each, as a training loop does)."""
    epoch = 0
    while True:
        dataset.set_epoch(epoch)
        yield from batches(dataset, batch_size, workers)
        epoch += 1
