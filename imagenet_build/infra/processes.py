"""Two rules about processes, each stated once: how many workers a count of 0 means, and whether a process
still runs (what tells a lock or a spool left by a killed run from one in use)."""

from __future__ import annotations

import os


def pool_size(workers: int) -> int:
    """The processes `--workers N` (or `workers=N`) asks for: N, or one per core for 0 (the default of every verb
    that fans out: convert, verify, index, report)."""
    return workers or os.cpu_count() or 1


def process_alive(pid: object) -> bool:
    """Whether process `pid` of this machine still runs: one another user owns runs too (signal 0 is refused,
    not unanswered). Anything but a positive whole number (a lock file's damaged field) names no process."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it runs, as another user
        return True
    return True
