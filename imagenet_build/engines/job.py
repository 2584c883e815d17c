"""A convert job as every engine runs it: tasks named by number, and each task's result reported beside the
output as a small receipt; for engines whose workers may be elsewhere (Beam, Spark), the plan written once to the
output's storage.

Such an engine then carries only shard numbers (its job graph stays small whatever the plan: Dataflow refuses
graphs of more than a few MB, and full ImageNet's ShardSpecs pickle to ~100 MB), and every result travels
through the output's own storage, never through an engine's file system or collect step. So results
survive a job that fails or is killed (a rerun trusts a shard whose receipt and sha256 agree), and the
driver counts them the same way whatever ran them. The local engine's workers are handed their tasks instead
(writing the plan first would hold up the first shard: write_job).

    <output>/.convert-job/<job>.tasks          the plan: a header (each task's key and place), then each task
    <output>/.convert-job/results/<job>/<key>.json   one receipt per task, written after its shard and index

The tasks file is pickled: it is written and read by this tool in the output folder the run holds (a
writer who can replace it can replace the shards too). A receipt is JSON.
"""

from __future__ import annotations

import json
import pickle
import re
import struct
import threading
import uuid
import zlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, List, NamedTuple, TypedDict

from imagenet_build.format.naming import JOB_FOLDER
from imagenet_build.infra import read_door, storage, write_door
from imagenet_build.infra.errors import BuildError, one_line
from imagenet_build.infra.jsonfile import JsonError, parse_json, read_json

MAGIC = b"imagenet-build tasks 1\n"
_LENGTH = struct.Struct(">Q")
RESULTS = "results"
RECEIPT_SUFFIX = ".json"
READ_THREADS = 16  # receipts read at once from an object store (one GET each)


class JobHeader(TypedDict):
    """The tasks file's header: its job, and each task's [offset, length, key] after it."""

    job: str
    tasks: List[List[Any]]


class Receipt(TypedDict):
    """What a task reports, in its receipt: its job, its place in the job, its key, what it returned."""

    job: str
    task: int
    key: str
    result: Any


RECEIPT_LIMIT = 64 << 20  # bytes: a resized shard's entry lists each image it re-encoded, some hundred KB


class JobRef(NamedTuple):
    """What a task needs to find its job: where it lies and which run it is (the only thing an engine ships)."""

    folder: str  # <output>/.convert-job
    id: str

    @property
    def tasks_path(self) -> str:
        return storage.join(self.folder, f"{self.id}.tasks")

    @property
    def results(self) -> str:
        return storage.join(self.folder, RESULTS, self.id)


class Task(NamedTuple):
    """One task of a job: its key (the shard's name), and the call that does it."""

    key: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]


class TaskFailed(BuildError):
    """A task's own error (a bad input, a full disk, no credentials), as one line. Engines that run tasks
    elsewhere pass on only text: the driver finds this class's name and the line after it there."""


_TASK_FAILED = re.compile(rf"{TaskFailed.__name__}: (.+?)(?: \[while running '[^']*'\])?$", re.MULTILINE)


def task_error(engine_error: BaseException) -> str | None:
    """The first task's own one line in an engine's error, or None when no task said why."""
    if isinstance(engine_error, TaskFailed):
        return str(engine_error)
    match = _TASK_FAILED.search(str(engine_error))
    return match.group(1).strip() if match else None


def job_folder(output: str) -> str:
    return storage.join(output, JOB_FOLDER)


def new_job(output: str) -> JobRef:
    """A job of its own (its receipts apart from any earlier run's), its results folder made."""
    job = JobRef(job_folder(output), uuid.uuid4().hex[:16])
    write_door.make_folder(job.results, within=output)
    return job


def write_job(output: str, tasks: Iterable[Task]) -> JobRef:
    """The plan written once, atomically, before the engine starts, for workers that read their task from the
    output's storage: a header (each task's key, offset and length), then each task compressed on its own, so that
    a task reads its own bytes and nothing else. (~6 µs of the driver's CPU an image, all before the first task:
    an engine whose workers are this machine's processes is handed its tasks instead, as they are drawn.)"""
    job = new_job(output)
    blobs, places, offset = [], [], 0
    for task in tasks:
        blob = zlib.compress(pickle.dumps(tuple(task), protocol=pickle.HIGHEST_PROTOCOL), 1)
        blobs.append(blob)
        places.append([offset, len(blob), task.key])
        offset += len(blob)
    header = json.dumps({"job": job.id, "tasks": places}).encode()
    write_door.write_bytes(job.tasks_path, b"".join([MAGIC, _LENGTH.pack(len(header)), header, *blobs]), within=output)
    return job


class _Plan(NamedTuple):
    start: int  # where the first task's bytes begin
    places: list[list[Any]]  # [offset, length, key] per task


_PLANS: dict[str, _Plan] = {}  # a worker process reads a job's header once
_PLANS_LOCK = threading.Lock()


def _plan(job: JobRef) -> _Plan:
    with _PLANS_LOCK:
        if job.tasks_path not in _PLANS:
            with read_door.open_read(job.tasks_path, random_access=True) as f:
                head = f.read(len(MAGIC) + _LENGTH.size)
                if head[:len(MAGIC)] != MAGIC or len(head) != len(MAGIC) + _LENGTH.size:
                    raise BuildError(f"{job.tasks_path}: not a job of this imagenet-build")
                (length,) = _LENGTH.unpack(head[len(MAGIC):])
                try:
                    header = parse_json(f.read(length), job.tasks_path, JobHeader)
                except JsonError as e:
                    raise BuildError(str(e)) from None
            if header["job"] != job.id:
                raise BuildError(f"{job.tasks_path}: holds job {header['job']}, not {job.id}")
            _PLANS.clear()  # one job at a time per process
            _PLANS[job.tasks_path] = _Plan(len(head) + length, header["tasks"])
        return _PLANS[job.tasks_path]


def load_task(job: JobRef, number: int) -> Task:
    """Task `number` of a job, read from its storage (the header once per process, then its own bytes)."""
    plan = _plan(job)
    offset, length, key = plan.places[number]
    with read_door.open_read(job.tasks_path, random_access=True) as f:
        f.seek(plan.start + offset)
        blob = f.read(length)
    task = Task(*pickle.loads(zlib.decompress(blob)))
    assert task.key == key, f"task {number} of {job.tasks_path} is {task.key}, its header says {key}"
    return task


def receipt_path(job: JobRef, key: str) -> str:
    return storage.join(job.results, key + RECEIPT_SUFFIX)


def run_task(job: JobRef, number: int, task: Task | None = None) -> Any:
    """What every engine runs for one task: the task (handed over, or read from the job's tasks file), then its
    receipt (after the task's own files: a receipt never names a shard that is not there). A task's own error is
    raised as TaskFailed, one line."""
    try:
        if task is None:
            task = load_task(job, number)  # a worker without credentials for the output's store fails here first
        result = task.fn(*task.args)
        receipt = json.dumps({"job": job.id, "task": number, "key": task.key, "result": result}, sort_keys=True)
        # not fsync'd (~0.7 ms of CPU a shard): a rerun holds a receipt to the shard's and index's sha256, and
        # a receipt a crash took back or emptied only has its shard written again
        write_door.write_bytes(receipt_path(job, task.key), receipt.encode(), within=storage.parent(job.folder),
                               sync=False)
    except (BuildError, OSError) as e:
        raise TaskFailed(one_line(e)) from None
    return result


def read_receipt(path: str, job_id: str | None = None) -> tuple[str, Any] | None:
    """(key, result) of a receipt, or None when it is unreadable or not of job `job_id` (when given)."""
    try:
        receipt = read_json(path, Receipt, RECEIPT_LIMIT)
    except (OSError, JsonError):
        return None
    if job_id is not None and receipt["job"] != job_id:
        return None
    return receipt["key"], receipt["result"]


def read_receipts(paths: Iterable[str], job_id: str | None = None) -> list[tuple[str, Any] | None]:
    """Each receipt read (in parallel from an object store), in order."""
    paths = list(paths)
    if len(paths) > 1 and storage.is_url(paths[0]):
        with ThreadPoolExecutor(READ_THREADS) as pool:
            return list(pool.map(lambda p: read_receipt(p, job_id), paths))
    return [read_receipt(path, job_id) for path in paths]


def reported(job: JobRef) -> set[str]:
    """The keys this job's receipts name, from one listing of its results folder."""
    return {name[:-len(RECEIPT_SUFFIX)] for name, is_dir in storage.listdir(job.results).items()
            if not is_dir and name.endswith(RECEIPT_SUFFIX)}


class Collected(NamedTuple):
    """A job's results as its receipts report them, and what does not add up."""

    results: dict[str, Any]  # key -> result, for every planned key that reported
    missing: list[str]  # planned keys with no receipt
    unexpected: list[str]  # receipts of this job naming no planned key, or unreadable


def collect(job: JobRef, planned: Sequence[str], known: dict[str, Any]) -> Collected:
    """Every planned task's result: those `known` already (given by the engine, or polled), the rest read from their
    receipts. Each planned key must have reported once, and nothing else."""
    names = reported(job)
    unexpected = sorted(names - set(planned))
    to_read = [key for key in planned if key in names and key not in known]
    results = dict(known)
    for key, receipt in zip(to_read, read_receipts([receipt_path(job, k) for k in to_read], job.id)):
        if receipt is None or receipt[0] != key:
            unexpected.append(key)
        else:
            results[key] = receipt[1]
    missing = [key for key in planned if key not in results and key not in unexpected]
    return Collected({k: results[k] for k in planned if k in results}, missing, sorted(unexpected))


def earlier_results(output: str, current: str | None = None) -> list[tuple[str, Any]]:
    """(key, result) of every receipt an earlier run left (a job that failed or was killed), for resume to check."""
    folder = storage.join(job_folder(output), RESULTS)
    paths = [storage.join(folder, job_id, name)
             for job_id, is_dir in sorted(storage.listdir(folder).items()) if is_dir and job_id != current
             for name, leaf in sorted(storage.listdir(storage.join(folder, job_id)).items())
             if not leaf and name.endswith(RECEIPT_SUFFIX)]
    return [receipt for receipt in read_receipts(paths) if receipt is not None]


def remove_job_folder(output: str) -> None:
    """The job folder, once the manifest vouches for every shard its receipts name."""
    folder = job_folder(output)
    if storage.listdir(folder) or storage.exists(folder):
        write_door.remove_tree(folder, within=output)


class ResultWatcher:
    """For engines that do not hand results back as tasks end: a thread that lists the job's receipts every few
    seconds and hands each new one on (progress, and the manifest rewritten as shards finish)."""

    def __init__(self, job: JobRef, planned: Sequence[str], on_result: Callable[[str, Any], None],
                 every: float = 2.0) -> None:
        self.job, self.planned, self.on_result, self.every = job, planned, on_result, every  # planned may grow
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="result-watcher", daemon=True)
        self.error: BaseException | None = None

    def __enter__(self) -> ResultWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.poll()
            except Exception as e:  # a store that fails a listing now and then: the final collect says what is missing
                self.error = e

    def poll(self) -> None:
        new = sorted((reported(self.job) & set(self.planned)) - self.seen)
        for key, receipt in zip(new, read_receipts([receipt_path(self.job, k) for k in new], self.job.id)):
            if receipt is not None and receipt[0] == key:
                self.seen.add(key)
                self.on_result(key, receipt[1])
