"""How every verb stops on SIGTERM or Ctrl-C: as a KeyboardInterrupt raised where the command is, so that every
`finally` on the way runs (workers stopped, the manifest written, locks and temporary files released).
"""

from __future__ import annotations

import functools
import signal
import sys
import threading
from types import FrameType
from typing import Any, Callable

from imagenet_build.infra.errors import Interrupted

_PUT_BACK: dict[int, Any] = {}  # the handlers a command replaced, put back when it ends
_RAISING_AGAIN: list[threading.Timer] = []  # a swallowed stop's raise, due in a moment (_swallowed)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM or Ctrl-C: stop the command where it is, as a KeyboardInterrupt (every `finally` runs:
    workers stopped, the manifest written, locks and temporary files released). Once the stop is
    under way, later signals change nothing; until then (a raise lost in a __del__) each raises again."""
    if Interrupted.stopping:
        return
    Interrupted.requested = True
    raise Interrupted


def _swallowed(unraisable: Any, other: Callable[[Any], None]) -> None:
    """sys.unraisablehook while a command runs: a stop signal's raise that Python swallowed (it came
    in a __del__ or an at-fork hook, where an exception goes nowhere) is raised again a moment later,
    outside it, instead of being printed and lost (the command then ran on to its end)."""
    if not isinstance(unraisable.exc_value, Interrupted):
        other(unraisable)
    elif not Interrupted.stopping:  # _interrupt again, as Ctrl-C would; sent to the main thread, a signal
        main = threading.main_thread().ident  # also wakes it from a blocking call, as the first one did
        assert main is not None
        again = threading.Timer(0.05, _raise_again, (main,))
        again.daemon = True  # never waited for at exit
        _RAISING_AGAIN.append(again)
        again.start()


def _raise_again(main: int) -> None:
    """The swallowed stop, raised again in the main thread, unless the stop got under way meanwhile (another
    error the signal set off, a worker it ended): then it would come after the command has put Python's
    handlers back, as a KeyboardInterrupt traceback at exit."""
    if not Interrupted.stopping:
        signal.pthread_kill(main, signal.SIGINT)


def _cancel_raising_again() -> None:
    for again in _RAISING_AGAIN:
        again.cancel()
    _RAISING_AGAIN.clear()


def _replace_handler(number: int, handler: Any) -> None:
    _PUT_BACK.setdefault(number, signal.getsignal(number))
    signal.signal(number, handler)


def stopping() -> None:
    """The stop is under way: later signals are ignored, and so is a child's end. PyTorch's SIGCHLD
    handler would raise for a DataLoader worker the same signal ended, in the DataLoader's __del__ at
    exit (after the command has printed its line): it is not put back."""
    Interrupted.stopping = True
    _cancel_raising_again()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def stop_on_signals() -> Callable[[], None]:
    """Every verb: SIGTERM and Ctrl-C end it through _interrupt. Returns what puts the handlers (and the
    stop's state) back: the CLI may run inside another program, a test's process."""
    Interrupted.requested = Interrupted.stopping = False
    if threading.current_thread() is not threading.main_thread():
        return lambda: None  # only the main thread may set handlers; there, Python's defaults stay
    for number in (signal.SIGINT, signal.SIGTERM):
        _replace_handler(number, _interrupt)
    unraisable_hook = sys.unraisablehook
    sys.unraisablehook = functools.partial(_swallowed, other=unraisable_hook)

    def restore() -> None:
        _cancel_raising_again()
        Interrupted.requested = Interrupted.stopping = False
        sys.unraisablehook = unraisable_hook
        for number, handler in _PUT_BACK.items():
            if handler is not None:  # None: a handler not set from Python, which cannot be put back
                signal.signal(number, handler)
        _PUT_BACK.clear()

    return restore

