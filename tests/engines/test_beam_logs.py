"""Beam's workers' log: FnApiRunner's worker processes' stderr goes to a log in the temporary folder, removed when
the job succeeds, named in the line of a failed job when they wrote to it."""

import os
import signal
import threading
import time

import pytest

from imagenet_build.engines.beam import BeamEngine
from imagenet_build.engines.job import Task, reported, write_job
from imagenet_build.infra.errors import BuildError


def beam(options):
    return BeamEngine(1, {"beam_options": options})


def beams_logs(folder):
    return sorted(folder.glob("imagenet-build-beam-*.log"))


def test_beams_worker_processes_write_to_a_log_named_when_the_job_fails(tmp_path, monkeypatch):
    """FnApiRunner's worker processes' stderr (their start-up lines, Beam's import warnings) goes to a log in the
    temporary folder: removed when the job succeeds, named in the line when it fails (its workers killed here)."""
    import tempfile

    from conftest import children_of

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    many = "--direct_running_mode=multi_processing --direct_num_workers=2"
    job = write_job(str(tmp_path / "ok"), [Task(f"k{n}", abs, (-n,)) for n in range(4)])  # workers: no test module
    beam(many).run(job, ((n, None) for n in range(4)), lambda n, result: None, None)
    assert reported(job) == {"k0", "k1", "k2", "k3"} and beams_logs(tmp_path) == []

    def workers():
        return [pid for child in children_of(os.getpid()) for pid in [child, *children_of(child)]
                if b"sdk_worker_main" in open(f"/proc/{pid}/cmdline", "rb").read()
                and not open(f"/proc/{pid}/cmdline", "rb").read().startswith(b"/bin/sh")]

    def kill_the_workers():
        deadline = time.monotonic() + 120
        while len(workers()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in workers():
            os.kill(pid, signal.SIGKILL)

    slow = write_job(str(tmp_path / "killed"), [Task(f"k{n}", time.sleep, (60,)) for n in range(4)])
    killer = threading.Thread(target=kill_the_workers)
    killer.start()
    with pytest.raises(BuildError) as raised:
        beam(many).run(slow, ((n, None) for n in range(4)), lambda n, result: None, None)
    killer.join()
    logs = beams_logs(tmp_path)
    assert str(raised.value).startswith("a worker process of Beam's local runner died (Worker subprocess exited "
                                        "with return code ")
    assert len(logs) == 1 and str(raised.value).endswith(f") (Beam's workers' log: {logs[0]})")
    assert logs[0].stat().st_size > 0  # what they said on their way: not on the command's stderr


@pytest.mark.parametrize("said", [b"", b"x"])
def test_a_failed_job_names_the_workers_log_only_when_they_wrote_to_it(said, tmp_path, monkeypatch):
    """A job that ended failed (not a task's own error) names the workers' log when they wrote a byte to it, and
    otherwise says nothing of it; the log is removed unless named."""
    import tempfile

    from imagenet_build.engines import beam as beam_module

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def ended_failed(result):
        result.wait_until_finish()
        beams_logs(tmp_path)[0].write_bytes(said)  # as the workers would have written on their way
        raise BuildError("the Beam job ended FAILED")

    monkeypatch.setattr(beam_module, "finish", ended_failed)
    job = write_job(str(tmp_path / "job"), [Task("k0", abs, (-1,))])
    with pytest.raises(BuildError) as raised:
        beam("--direct_running_mode=in_memory").run(job, [(0, None)], lambda n, result: None, None)
    logs = beams_logs(tmp_path)
    if said:
        assert len(logs) == 1 and str(raised.value) == f"the Beam job ended FAILED (Beam's workers' log: {logs[0]})"
    else:
        assert str(raised.value) == "the Beam job ended FAILED" and logs == []
