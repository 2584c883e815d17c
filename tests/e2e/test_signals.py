"""Every process of a run ends with it: idle workers of a killed run, kill -9, SIGTERM (to the process or its
group) and Ctrl-C during trainer-check, verify and convert, and what a stopped run leaves."""

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import imagenet_build
import imagenet_build.trainercheck  # noqa: F401  (registers every reader, the trainers' among them)
from conftest import (
    Run,
    children_of,
    run_process,
    tree_digest,
    wait_until_gone,
)
from imagenet_build.infra.lock import LOCK_NAME
from imagenet_build.trainercheck.trainers import TRAINERS as REGISTERED
from imagenet_build.trainercheck.trainers import missing, trainers
from run_helpers import cpu_load


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to list a process's children")
def test_idle_workers_of_a_killed_run_end_with_it():
    """kill -9 of the main process while its pool waits idle (as while inputs are listed): no worker stays."""
    proc = subprocess.Popen([sys.executable, "-c",
                             "import time\nfrom imagenet_build.infra.workers import Workers\n"
                             "with Workers(2):\n    print('pool', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "pool"
    workers = children_of(proc.pid)
    assert len(workers) == 2
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wait_until_gone(workers) == []


# ------------------------------------------------------------------ signals: every process of a run ends with it


def dali_running(run):
    """A DALI pipeline runs in the main process: its threads are there (named "[DALI]...")."""
    names = []
    for task in Path(f"/proc/{run.proc.pid}/task").glob("*/comm"):
        try:
            names.append(task.read_text())
        except OSError:
            continue
    return any(name.startswith("[DALI]") for name in names)


def assert_ended_as_interrupted(code, out, err):
    """What SIGTERM gives every verb: exit 1, one `error: interrupted` line, with --json the document."""
    assert code == 1, (code, err)
    errors = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("error: ")]
    assert errors == ["error: interrupted"], err
    for noise in ("Traceback", "leaked semaphore", "Exception ignored"):
        assert noise not in err, err
    assert json.loads(out) == {"ok": False, "error": "interrupted", "exit_code": 1,
                               "imagenet_build_version": imagenet_build.__version__}


@pytest.fixture(scope="module")
def longer_build(tmp_path_factory):
    """A build that verify --deep takes about a second to read with two workers."""
    from imagenet_build.tools.sample_dataset import make_sample

    sample = tmp_path_factory.mktemp("longer")
    make_sample(sample, classes=8, per_class=150, validation_per_class=2, min_size=200, max_size=400)
    out = tmp_path_factory.mktemp("longer-build")
    result = run_process("convert", "--train-dir", sample / "train", "--labels-file", sample / "labels.txt",
                         "--output-dir", out, "--train-shards", 32, "--layout-threads", 4, "--workers", 2)
    assert result.returncode == 0, result.stderr
    return sample, out


SIGNALS = ["kill-9", "sigterm", "sigterm-group", "ctrl-c"]
TRAINERS = [trainer.name for trainer in trainers()]  # every trainer trainer-check runs through (the registry's)


@contextlib.contextmanager
def trainer_check_running(converted, framework, *more):
    """trainer-check on the CPU, once it reads: the DataLoader's workers at work, or DALI's pipeline."""
    lacking = missing(REGISTERED[framework])  # found, not imported: TensorFlow then torch in this process would crash
    if lacking:
        pytest.skip(f"not installed: {', '.join(lacking)}")
    args = ["trainer-check", converted, "--framework", framework, "--device", "cpu", "--steps", 500, "--json", *more]
    with Run(*args, *(["--workers", 2] if framework == "torch" else [])) as run:
        if framework == "torch":
            run.wait_for(lambda r: len(r.processes()) >= 3)
        else:
            run.wait_for(dali_running)
        time.sleep(0.5)
        if framework != "torch":
            assert run.processes() == [run.proc.pid]  # DALI's CPU pipelines run on threads: no process of its own
        yield run


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find a run's processes")
@pytest.mark.parametrize("how", SIGNALS)
@pytest.mark.parametrize("framework", TRAINERS)
def test_trainer_check_stopped_leaves_no_process(converted, framework, how):
    """trainer-check's DataLoader workers stayed after kill -9 or SIGTERM (parent pid 1, 300-500 MB each);
    SIGTERM gave exit 143 and no JSON. DALI's CPU pipelines start no process (threads only): whatever
    it would start must end too."""
    with trainer_check_running(converted, framework) as run:
        started = run.processes()
        code, out, err = run.signal(how)
        assert wait_until_gone(started + run.processes()) == []
    if how != "kill-9":
        assert_ended_as_interrupted(code, out, err)


STOPS_REPEATED = 20  # a fault seen once in 20 stops is caught with odds of 1 - (19/20)^20 = 64% a run
STOPPED_WITHIN = 3.0  # seconds after the workers start, over which the stops are spread: an epoch is 3 batches


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find a run's processes")
def test_trainer_check_with_dataloader_workers_stops_in_one_line_every_time(converted):
    """SIGTERM to trainer-check --framework torch with DataLoader workers, again and again, at random moments of
    the run (its loaders fork new workers every epoch, 3 batches here), to the process and to its group in turn,
    on a machine kept busy (one busy process per core): 1 stop in 12 added a BrokenPipeError traceback, or a
    worker's own traceback (the signal reached it while it forked), or an `Exception ignored` KeyboardInterrupt
    at exit; on a busy machine, a worker's resource sharer's ConnectionResetError (the parent stopped while it
    fetched a batch from it). Every stop: exit 1, `error: interrupted` alone, no process left. The moments are
    drawn from a seed the failure names."""
    pytest.importorskip("torch")
    seed = random.randrange(2**32)
    moments = random.Random(seed).uniform
    args = ["trainer-check", converted, "--framework", "torch", "--device", "cpu", "--steps", 500, "--json",
            "--workers", 8]
    with cpu_load():
        for attempt in range(STOPS_REPEATED):
            how = ("sigterm", "sigterm-group")[attempt % 2]
            with Run(*args) as run:
                run.wait_for(lambda r: len(r.processes()) >= 3)
                time.sleep(moments(0, STOPPED_WITHIN))
                started = run.processes()
                code, out, err = run.signal(how)
                assert wait_until_gone(started + run.processes()) == [], (seed, attempt, how)
            assert code == 1 and [line for line in err.splitlines() if line] == ["error: interrupted"], \
                (seed, attempt, how, err)
            assert_ended_as_interrupted(code, out, err)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find a run's processes")
@pytest.mark.parametrize("framework", TRAINERS)
def test_trainer_check_stopped_leaves_no_picture(converted, tmp_path, framework):
    """--show's PNG is written whole, once the checks are done: a run stopped before leaves nothing under its
    name, and no temporary file (not the one that tried the name before the run either)."""
    shows = tmp_path / "shows"
    shows.mkdir()
    with trainer_check_running(converted, framework, "--show", shows / "batches.png") as run:
        code, out, err = run.signal("ctrl-c")
    assert_ended_as_interrupted(code, out, err)
    assert list(shows.iterdir()) == []


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find a run's processes")
@pytest.mark.parametrize("how", SIGNALS)
def test_verify_stopped_leaves_no_process(longer_build, how):
    """verify --json with two workers, on a terminal: SIGTERM gave exit 143, no JSON and multiprocessing's
    "leaked semaphore" warning."""
    with Run("verify", longer_build[1], "--deep", "--workers", 2, "--json", tty=True) as run:
        run.wait_for(lambda r: len(r.processes()) >= 3)
        time.sleep(0.1)
        started = run.processes()
        code, out, err = run.signal(how)
        assert wait_until_gone(started + run.processes()) == []
    if how != "kill-9":
        assert_ended_as_interrupted(code, out, err)


def sha256_of(path):
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm", "sigterm-group"])
def test_sigterm_during_a_two_worker_convert_records_every_shard_on_disk(longer_build, tmp_path, how):
    """Shards that finished after the signal were on disk but missing from the manifest written on the
    way out, and the rerun wrote them again. (SIGTERM to the whole group ends the workers mid-shard:
    what they were writing is removed, and redone by the rerun.)"""
    sample, reference = longer_build
    out = tmp_path / "out"
    args = ["convert", "--train-dir", sample / "train", "--labels-file", sample / "labels.txt", "--output-dir", out,
            "--train-shards", 32, "--layout-threads", 4, "--workers", 2, "--json"]
    with Run(*args) as run:
        run.wait_for(lambda r: len(list(out.glob("train-*"))) >= 3)
        code, stdout, err = run.signal(how)
    assert code == 1 and err.splitlines() == ["error: interrupted; run the same command again to resume"], err
    assert json.loads(stdout)["error"] == "interrupted; run the same command again to resume"
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {entry["name"]: entry for entry in manifest["shards"]}
    on_disk = sorted(p.name for p in out.glob("train-*"))
    assert on_disk == sorted(listed) and len(on_disk) < 32
    if how == "sigterm":  # the workers finished what they had, and it is recorded
        assert len(on_disk) >= 3
    assert manifest["complete"] is False and manifest["ended"] == "interrupted"
    for name, entry in listed.items():
        assert sha256_of(out / name) == entry["sha256"]
        assert sha256_of(out / "dali_idx" / f"{name}.idx") == entry["index_sha256"]
    assert sorted(p.name for p in (out / "dali_idx").iterdir()) == [f"{name}.idx" for name in on_disk]
    assert not [p for p in out.rglob("*") if p.name.startswith(".") and p.name != LOCK_NAME]
    rerun = run_process(*args)
    assert rerun.returncode == 0
    summary = json.loads(rerun.stdout)
    assert summary["shards_kept"] == len(listed) and summary["shards_written"] == 32 - len(listed)
    assert tree_digest(out) == tree_digest(reference)


def slow_square(x):
    time.sleep(0.5 if x else 0)
    return x * x


def test_tasks_running_when_a_run_stops_finish_and_are_handed_on():
    """Stopped (here by an interrupt while the first result is recorded), a pool hands out no more tasks,
    but what its workers were doing finishes and reaches on_result: convert records a shard written while
    it stops instead of leaving it on disk unlisted."""
    from imagenet_build.infra.errors import Interrupted
    from imagenet_build.infra.workers import Workers

    got = []

    def on_result(task, result):
        got.append(task[0])
        if got == [0]:
            raise KeyboardInterrupt  # as Ctrl-C does, while the other worker is busy with task 1

    try:
        with Workers(2) as pool, pytest.raises(KeyboardInterrupt):
            pool.run(slow_square, [(k,) for k in range(20)], on_result)
    finally:
        Interrupted.stopping = False  # what Workers.run set on the way out
    assert got[:2] == [0, 0] and 1 in got, got  # task 0 again: the interrupt may have come before it was recorded
    assert set(got) <= {0, 1, 2, 3}, got  # nothing started after it stopped: two tasks per worker at most


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_a_dataloader_worker_started_from_another_thread_outlives_that_thread():
    """The kernel's parent-death signal fires when the parent *thread* ends: a worker started from a thread
    that then ended must live on (a watchdog ends it with its process), and still end when that is killed."""
    code = (
        "import multiprocessing, threading, time\n"
        "from imagenet_build.infra.workers import end_with_this_process\n"
        "def child(init):\n"
        "    init(0); time.sleep(60)\n"
        "started = []\n"
        "def start():\n"
        "    p = multiprocessing.get_context('fork').Process(target=child, args=(end_with_this_process(),))\n"
        "    p.start(); started.append(p)\n"
        "thread = threading.Thread(target=start); thread.start(); thread.join()\n"
        "time.sleep(1.5)\n"
        "print('alive' if started[0].is_alive() else 'ended', started[0].pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    state, pid = proc.stdout.readline().split()
    try:
        assert state == "alive"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert wait_until_gone([int(pid)]) == []
