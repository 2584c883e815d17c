"""infra/processes.py: what 0 workers means, and whether a process still runs (a lock's holder, a spool's maker)."""

import os
import subprocess
import sys

import pytest

from imagenet_build.infra.processes import pool_size, process_alive


def test_zero_workers_is_one_per_core_and_any_other_count_is_itself(monkeypatch):
    assert pool_size(0) == (os.cpu_count() or 1)
    assert [pool_size(n) for n in (1, 3, 64)] == [1, 3, 64]
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # a platform that cannot tell
    assert pool_size(0) == 1


def test_a_running_process_is_alive_and_an_ended_one_is_not():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert process_alive(child.pid) and process_alive(os.getpid())
    finally:
        child.communicate(b"")
    assert not process_alive(child.pid)  # ended and reaped: its number names no process


@pytest.mark.parametrize("pid", [None, "123", 1.0, True, 0, -1])
def test_what_names_no_process_is_not_alive(pid):
    """A damaged lock file's pid (a string, a float, a bool) and 0 or less, which kill() takes for a process group."""
    assert not process_alive(pid)
