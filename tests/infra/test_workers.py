"""infra/workers.py: the process pool every stage shares: results whatever the worker count, a task's error as
itself, a worker killed as one clear error."""

import os
import signal
import subprocess
import sys

import pytest

from imagenet_build.infra.errors import BuildError, InputError
from imagenet_build.infra.workers import Workers


def square(x):
    return x * x


def fail_on_three(x):
    if x == 3:
        raise InputError(f"image{x}.JPEG", "broken JPEG")
    return x


def die(x):
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize("count", [1, 2, 3])
def test_results_do_not_depend_on_the_number_of_workers(count):
    got = {}
    with Workers(count) as pool:
        pool.run(square, [(k,) for k in range(20)], lambda task, result: got.__setitem__(task[0], result))
    assert got == {k: k * k for k in range(20)}


@pytest.mark.parametrize("count", [1, 2])
def test_a_task_error_reaches_the_caller_as_itself(count):
    with Workers(count) as pool, pytest.raises(InputError) as info:
        pool.run(fail_on_three, [(k,) for k in range(6)], lambda task, result: None)
    assert info.value.path == "image3.JPEG" and info.value.problem == "broken JPEG"


def test_a_worker_killed_mid_task_is_one_clear_error():
    with Workers(2) as pool, pytest.raises(BuildError, match="a worker process died"):
        pool.run(die, [(1,)], lambda task, result: None)


def test_a_progress_bar_shown_first_leaves_the_workers_forked_and_nothing_behind():
    """A bar made before the pool opens (verify's) starts no thread: the workers are forked, not spawned (each
    importing the package), and no resource tracker outlives the process."""
    script = (
        "import threading\n"
        "from imagenet_build.infra.workers import Workers, progress_bar\n"
        "bar = progress_bar(3, 0, 'verify', 'shard')\n"
        "assert threading.active_count() == 1, threading.enumerate()\n"
        "with Workers(2) as pool:\n"
        "    print(pool._pool._mp_context.get_start_method())\n"
        "from multiprocessing import resource_tracker\n"
        "print(resource_tracker._resource_tracker._pid)\n"
        "from tqdm import tqdm\n"
        "print(isinstance(bar, tqdm))\n"
    )
    import pty

    master, terminal = pty.openpty()  # stderr a terminal: the bar is tqdm's, shown (elsewhere there is none)
    try:
        done = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=terminal, text=True, timeout=60)
    finally:
        os.close(terminal)
        os.close(master)
    assert done.returncode == 0
    assert done.stdout.split() == ["fork", "None", "True"]


def test_without_a_terminal_there_is_no_bar_and_tqdm_is_not_loaded():
    script = ("import sys\nfrom imagenet_build.infra.workers import progress_bar\n"
              "bar = progress_bar(3, 0, 'verify', 'shard')\nbar.update(2)\nbar.close()\n"
              "print('tqdm' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "False\n", "")
