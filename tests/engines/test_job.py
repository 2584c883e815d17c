"""The job every engine runs: the plan written once and read a task at a time, the receipts, the count."""

import json
import os
import time

import pytest

from conftest import wait_until
from imagenet_build.engines.job import (
    MAGIC,
    JobRef,
    ResultWatcher,
    Task,
    TaskFailed,
    collect,
    earlier_results,
    load_task,
    receipt_path,
    reported,
    run_task,
    task_error,
    write_job,
)
from imagenet_build.infra.errors import BuildError, InputError


def double(x):
    return [x, x * 2]


def fails(path):
    raise InputError(path, "not a JPEG")


def breaks(_):
    raise KeyError("a bug")


def test_each_task_reads_back_as_written(tmp_path):
    tasks = [Task(f"shard-{n}", double, (n,)) for n in range(5)]
    job = write_job(str(tmp_path), iter(tasks))
    assert job.folder == str(tmp_path / ".convert-job") and len(job.id) == 16
    assert [load_task(job, n) for n in (4, 0, 2)] == [tasks[4], tasks[0], tasks[2]]
    assert (tmp_path / ".convert-job" / f"{job.id}.tasks").read_bytes().startswith(MAGIC)


def test_a_task_reports_its_result_in_a_receipt_after_running(tmp_path):
    job = write_job(str(tmp_path), [Task("a", double, (3,)), Task("b", double, (4,))])
    assert run_task(job, 1) == [4, 8]
    receipt = json.loads((tmp_path / ".convert-job" / "results" / job.id / "b.json").read_text())
    assert receipt == {"job": job.id, "task": 1, "key": "b", "result": [4, 8]}
    assert reported(job) == {"b"}


def test_a_tasks_own_error_is_one_line_and_leaves_no_receipt(tmp_path):
    job = write_job(str(tmp_path), [Task("a", fails, ("x.JPEG",)), Task("b", breaks, (1,))])
    with pytest.raises(TaskFailed, match=r"^x\.JPEG: not a JPEG$"):
        run_task(job, 0)
    with pytest.raises(KeyError):  # a bug is no task error: it keeps its traceback
        run_task(job, 1)
    assert reported(job) == set()


def test_the_task_error_is_found_in_an_engines_text():
    """Beam and Spark pass a worker's error on as text, the traceback included."""
    text = ("Traceback (most recent call last):\n  File ...\nimagenet_build.engines.job.TaskFailed: "
            "s3://b/x.tar: NoCredentialsError: Unable to locate credentials\n\n\tat org.apache.spark...")
    assert task_error(RuntimeError(text)) == "s3://b/x.tar: NoCredentialsError: Unable to locate credentials"
    assert task_error(TaskFailed("y: bad")) == "y: bad"
    assert task_error(RuntimeError("Channel closed prematurely")) is None


def test_collect_counts_every_planned_task_once(tmp_path):
    job = write_job(str(tmp_path), [Task(k, double, (n,)) for n, k in enumerate("abcd")])
    for n in (0, 1, 3):
        run_task(job, n)
    got = collect(job, list("abcd"), {"a": "given"})
    assert got.results == {"a": "given", "b": [1, 2], "d": [3, 6]}  # "a" as the engine handed it on, not re-read
    assert got.missing == ["c"] and got.unexpected == []


def test_collect_names_a_result_that_is_not_the_jobs(tmp_path):
    job = write_job(str(tmp_path), [Task(k, double, (n,)) for n, k in enumerate("ab")])
    run_task(job, 0)
    run_task(job, 1)
    planted = json.loads(open(receipt_path(job, "a")).read())
    with open(receipt_path(job, "z"), "w") as f:  # a task no plan of this job holds
        json.dump(dict(planted, key="z"), f)
    with open(receipt_path(job, "b"), "w") as f:  # another job's receipt in this job's folder
        json.dump(dict(planted, job="0" * 16, key="b"), f)
    got = collect(job, ["a", "b"], {})
    assert got.results == {"a": [0, 0]} and got.missing == [] and got.unexpected == ["b", "z"]


def test_a_stale_receipt_of_an_earlier_job_never_counts_for_this_one(tmp_path):
    """What an interrupted run left is a candidate for resume (checked against the files), never this job's result."""
    old = write_job(str(tmp_path), [Task("a", double, (1,))])
    run_task(old, 0)
    new = write_job(str(tmp_path), [Task("a", double, (1,))])
    assert collect(new, ["a"], {}).missing == ["a"]
    assert earlier_results(str(tmp_path), new.id) == [("a", [1, 2])]
    assert earlier_results(str(tmp_path)) == [("a", [1, 2])]
    with open(os.path.join(new.results, "b.json"), "w") as f:  # this job's own: no earlier run's
        json.dump({"job": new.id, "task": 0, "key": "b", "result": 5}, f)
    assert earlier_results(str(tmp_path), new.id) == [("a", [1, 2])]


@pytest.mark.parametrize("damage", [b"", b"{", b"[1]", b'{"key": 5, "result": 1}', b'{"key": "a"}', b"[" * 100000])
def test_a_damaged_receipt_is_no_result(tmp_path, damage):
    job = write_job(str(tmp_path), [Task("a", double, (1,))])
    os.makedirs(job.results, exist_ok=True)
    with open(receipt_path(job, "a"), "wb") as f:
        f.write(damage)
    assert collect(job, ["a"], {}).unexpected == ["a"]
    assert earlier_results(str(tmp_path)) == []


def test_a_tasks_file_that_is_not_ours_is_one_line(tmp_path):
    job = write_job(str(tmp_path), [Task("a", double, (1,))])
    with open(job.tasks_path, "wb") as f:
        f.write(b"something else entirely")
    with pytest.raises(BuildError, match="not a job of this imagenet-build"):
        load_task(JobRef(job.folder, job.id), 0)


def test_the_watcher_hands_on_each_new_receipt_once(tmp_path):
    job = write_job(str(tmp_path), [Task(k, double, (n,)) for n, k in enumerate("abc")])
    got = []
    watcher = ResultWatcher(job, list("abc"), lambda key, raw: got.append((key, raw)), every=3600)
    run_task(job, 1)
    watcher.poll()
    run_task(job, 0)
    watcher.poll()
    watcher.poll()
    assert got == [("b", [1, 2]), ("a", [0, 0])]


def test_the_plan_on_an_object_store_is_read_a_task_at_a_time(bucket):
    tasks = [Task(f"s{n}", double, (n,)) for n in range(3)]
    job = write_job(f"{bucket}/out", tasks)
    assert run_task(job, 2) == [2, 4]
    assert collect(job, ["s0", "s1", "s2"], {}).missing == ["s0", "s1"]


def test_a_tasks_file_cut_after_its_magic_is_not_ours(tmp_path):
    job = write_job(str(tmp_path), [Task("a", double, (1,))])
    with open(job.tasks_path, "wb") as f:
        f.write(MAGIC + b"\x00\x00")
    with pytest.raises(BuildError, match="not a job of this imagenet-build"):
        load_task(JobRef(job.folder, job.id), 0)


def test_a_task_of_another_job_is_named(tmp_path):
    job = write_job(str(tmp_path), [Task("a", double, (1,))])
    other = JobRef(job.folder, "f" * 16)
    os.replace(job.tasks_path, other.tasks_path)
    with pytest.raises(BuildError) as raised:
        load_task(other, 0)
    assert str(raised.value) == f"{other.tasks_path}: holds job {job.id}, not {other.id}"


def test_only_receipts_count_and_only_in_job_folders(tmp_path):
    """A temporary file or a folder among the receipts is no result; a stray file beside the job folders no job."""
    job = write_job(str(tmp_path), [Task(k, double, (n,)) for n, k in enumerate("ab")])
    run_task(job, 0)
    (tmp_path / ".convert-job" / "results" / job.id / ".b.json.123.tmp").write_text("{}")
    (tmp_path / ".convert-job" / "results" / job.id / "c.json").mkdir()
    (tmp_path / ".convert-job" / "results" / "notes.json").write_text("{}")
    (tmp_path / ".convert-job" / "results" / job.id / "b.txt").write_text(
        json.dumps({"job": job.id, "task": 1, "key": "b", "result": 1}))
    assert reported(job) == {"a"}
    assert earlier_results(str(tmp_path)) == [("a", [0, 0])]


def test_receipts_are_read_from_an_object_store_in_parallel(bucket):
    tasks = [Task(f"s{n}", double, (n,)) for n in range(5)]
    job = write_job(f"{bucket}/out", tasks)
    for n in range(5):
        run_task(job, n)
    got = collect(job, [f"s{n}" for n in range(5)], {})
    assert got.results == {f"s{n}": [n, 2 * n] for n in range(5)} and got.missing == [] == got.unexpected
    import fsspec

    fs, _ = fsspec.core.url_to_fs(job.results)
    fs.pipe_file(receipt_path(job, "s1"), json.dumps({"job": "0" * 16, "task": 1, "key": "s1", "result": 0}).encode())
    assert collect(job, [f"s{n}" for n in range(5)], {}).unexpected == ["s1"]  # another job's, on the store too
    assert sorted(earlier_results(f"{bucket}/out")) == [(f"s{n}", [n, 2 * n] if n != 1 else 0) for n in range(5)]


def test_the_watcher_hands_on_only_this_jobs_planned_readable_receipts(tmp_path):
    job = write_job(str(tmp_path), [Task(k, double, (n,)) for n, k in enumerate("abc")])
    got = []
    watcher = ResultWatcher(job, ["a", "b"], lambda key, raw: got.append(key), every=3600)
    run_task(job, 2)  # "c": not planned for this watcher
    planted = json.loads(open(receipt_path(job, "c")).read())
    with open(receipt_path(job, "a"), "w") as f:
        json.dump(dict(planted, job="0" * 16, key="a"), f)  # another job's
    with open(receipt_path(job, "b"), "w") as f:
        f.write("{")  # not yet whole
    watcher.poll()
    assert got == []
    run_task(job, 0)
    run_task(job, 1)
    watcher.poll()
    assert got == ["a", "b"]


def test_the_watcher_polls_on_its_own_thread_until_stopped(tmp_path):
    job = write_job(str(tmp_path), [Task(k, double, (n,)) for n, k in enumerate("ab")])
    got = []
    with ResultWatcher(job, ["a", "b"], lambda key, raw: got.append((key, raw)), every=0.01) as watcher:
        run_task(job, 1)
        wait_until(lambda: got)
    assert got == [("b", [1, 2])] and not watcher._thread.is_alive()
    run_task(job, 0)
    time.sleep(0.05)
    assert got == [("b", [1, 2])]  # stopped: nothing more handed on


def test_a_listing_that_fails_now_and_then_does_not_stop_the_watcher(tmp_path, monkeypatch):
    from imagenet_build.engines import job as job_module

    job = write_job(str(tmp_path), [Task("a", double, (1,))])
    calls = []

    def flaky(path):
        calls.append(path)
        if len(calls) == 1:
            raise OSError("the store did not answer")
        return real(path)

    real = job_module.storage.listdir
    monkeypatch.setattr(job_module.storage, "listdir", flaky)
    got = []
    with ResultWatcher(job, ["a"], lambda key, raw: got.append(key), every=0.01) as watcher:
        run_task(job, 0)
        wait_until(lambda: got)
    assert got == ["a"] and isinstance(watcher.error, OSError)


def test_the_job_folder_goes_once_the_manifest_vouches(tmp_path):
    from imagenet_build.engines.job import remove_job_folder

    write_job(str(tmp_path), [Task("a", double, (1,))])
    (tmp_path / "keep").write_text("x")
    remove_job_folder(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]
    remove_job_folder(str(tmp_path))  # none: nothing to do
    (tmp_path / ".convert-job").mkdir()
    remove_job_folder(str(tmp_path))  # an empty one goes too
    assert not (tmp_path / ".convert-job").exists()


@pytest.mark.parametrize("header,problem", [
    (b"[1, 2]", "not an object"), (b'{"job": 5, "tasks": []}', "job"), (b'{"job": "x"}', "tasks"),
    (b"{not json", "not valid JSON"),
])
def test_a_tasks_file_whose_header_is_not_ours_is_named(tmp_path, header, problem):
    import struct

    job = write_job(str(tmp_path), [Task("a", double, (1,))])
    with open(job.tasks_path, "wb") as f:
        f.write(MAGIC + struct.pack(">Q", len(header)) + header)
    with pytest.raises(BuildError) as raised:
        load_task(JobRef(job.folder, job.id), 0)
    assert str(raised.value).startswith(f"{job.tasks_path}: ") and problem in str(raised.value)


def test_a_receipt_past_its_size_limit_is_no_result(tmp_path, monkeypatch):
    from imagenet_build.engines import job as job_module

    job = write_job(str(tmp_path), [Task("a", double, (1,))])
    run_task(job, 0)
    assert collect(job, ["a"], {}).results == {"a": [1, 2]}
    monkeypatch.setattr(job_module, "RECEIPT_LIMIT", 10)
    assert collect(job, ["a"], {}).unexpected == ["a"]
