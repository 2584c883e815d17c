"""convert's side of the engines, in this process: results handed on or polled, a job that fails or is stopped part
way (what finished recorded, the rest named), and the receipts of an earlier job read back for resume."""

import json
import os

import pytest

from conftest import run_process, sample_args, tree_digest, wait_until
from helpers import request_for
from imagenet_build.engines.job import RESULTS, job_folder
from imagenet_build.engines.local import LocalEngine
from imagenet_build.format.destination import destination
from imagenet_build.infra.errors import BuildError, Stopped
from imagenet_build.writer.convert_run import convert
from imagenet_build.writer.dispatch import _names, earlier_shards
from imagenet_build.writer.shard_writer import ShardWriteResult

SHARDS = ["train-00000-of-00004", "train-00001-of-00004", "train-00002-of-00004", "train-00003-of-00004",
          "validation-00000-of-00002", "validation-00001-of-00002"]


class PolledEngine(LocalEngine):
    """Hands nothing back as tasks end, as Beam and Spark: every result comes from the receipts."""

    reports_as_tasks_end = False

    def run(self, job, tasks, on_result, pool):
        super().run(job, tasks, lambda n, raw: None, pool)


def stopping_after(count, error, base=LocalEngine):
    class Stops(base):
        """Runs the first `count` tasks, then fails as `error` says."""

        def run(self, job, tasks, on_result, pool):
            super().run(job, list(tasks)[:count], on_result, pool)
            raise error

    return Stops


def manifest_of(out):
    return json.loads((out / "manifest.json").read_text())


def shards_on_disk(out):
    return sorted(p.name for p in out.iterdir() if p.name.startswith(("train-", "validation-")))


def test_an_engine_that_hands_nothing_back_is_counted_from_its_receipts(sample_dir, converted, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    summary = convert(request_for(sample_dir, out, PolledEngine))
    assert summary["shards_written"] == 6
    assert tree_digest(out) == tree_digest(converted)


@pytest.mark.parametrize("count,error,said", [
    (2, RuntimeError("the cluster went away\nat line 2"), "1 local worker process failed: RuntimeError: the cluster "
                                                          "went away"),
    (2, BuildError("s3://b/out: no such bucket"), "s3://b/out: no such bucket"),
])
def test_a_failed_job_keeps_what_finished_and_names_the_rest(sample_dir, converted, tmp_path, count, error, said):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(BuildError) as raised:
        convert(request_for(sample_dir, out, stopping_after(count, error)))
    missing = SHARDS[count:]
    assert str(raised.value) == (f"{said}; {len(missing)} of 6 shards have no result ({_names(missing)}); run the same "
                                 "command again to write them")
    manifest = manifest_of(out)
    assert manifest["ended"] == "failed" and manifest["error"] == str(raised.value)
    assert [entry["name"] for entry in manifest["shards"]] == SHARDS[:count] == shards_on_disk(out)
    assert not (out / ".convert-job").exists()
    rerun = run_process(*sample_args(sample_dir, out, "--workers", 1, "--json"))
    assert json.loads(rerun.stdout)["shards_kept"] == count
    assert tree_digest(out) == tree_digest(converted)


def test_a_tasks_own_error_is_its_line_alone(sample_dir, tmp_path):
    """A bad input, a full disk, missing credentials: what the task said is the news (a rerun would say it again)."""
    out = tmp_path / "out"
    out.mkdir()
    error = RuntimeError("Traceback ...\nimagenet_build.engines.job.TaskFailed: a.JPEG: not a JPEG\n")
    with pytest.raises(BuildError) as raised:
        convert(request_for(sample_dir, out, stopping_after(3, error)))
    assert str(raised.value) == "a.JPEG: not a JPEG"
    assert [entry["name"] for entry in manifest_of(out)["shards"]] == SHARDS[:3] == shards_on_disk(out)


def test_a_job_that_fails_after_every_shard_reported_says_so(sample_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(BuildError) as raised:
        convert(request_for(sample_dir, out, stopping_after(6, RuntimeError("lost on the way out"))))
    assert str(raised.value) == ("1 local worker process failed: RuntimeError: lost on the way out; every shard "
                                 "reported; run the same command again to finish the build")
    assert [entry["name"] for entry in manifest_of(out)["shards"]] == SHARDS


@pytest.mark.parametrize("base", [LocalEngine, PolledEngine], ids=["handed back", "polled"])
def test_a_job_stopped_part_way_records_what_finished(sample_dir, tmp_path, base):
    """Polled: the shards whose receipts came since the last look are recorded on the way out, not rewritten."""
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(Stopped, match="interrupted; run the same command again to resume"):
        convert(request_for(sample_dir, out, stopping_after(4, KeyboardInterrupt(), base)))
    manifest = manifest_of(out)
    assert manifest["ended"] == "interrupted"
    assert [entry["name"] for entry in manifest["shards"]] == SHARDS[:4] == shards_on_disk(out)


class FileReadingEngine(LocalEngine):
    """Local processes that read each task from the job's tasks file, as Beam's and Spark's workers do."""

    reads_tasks_file = True


def test_workers_that_read_the_tasks_file_write_the_same_build(sample_dir, converted, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    seen = []

    class Watching(FileReadingEngine):
        def run(self, job, tasks, on_result, pool):
            tasks = list(tasks)
            seen.append((os.path.exists(job.tasks_path), [task for _, task in tasks]))
            super().run(job, tasks, on_result, pool)

    convert(request_for(sample_dir, out, Watching))
    assert seen == [(True, [None] * 6)]  # the plan on disk before the engine starts; numbers only
    assert tree_digest(out) == tree_digest(converted)


def test_the_job_is_where_workers_in_another_folder_find_it(sample_dir, converted, tmp_path, monkeypatch):
    """A relative --output-dir: Spark's executors run in folders of their own, so the job they read and report to
    is named by its absolute path."""
    jobs = []

    class Recording(FileReadingEngine):
        def run(self, job, tasks, on_result, pool):
            jobs.append(job)
            super().run(job, tasks, on_result, pool)

    monkeypatch.chdir(tmp_path)
    convert(request_for(sample_dir, "out", Recording))
    assert jobs[0].folder == str(tmp_path / "out" / ".convert-job")  # what the engine ships to its workers
    assert tree_digest(tmp_path / "out") == tree_digest(converted)


def live_manifest_engine(base):
    class Live(base):
        """Checks, once its tasks have ended and before it returns, that the manifest lists what they wrote: results
        are recorded as they come, not only when the job is over."""

        listed = []

        def run(self, job, tasks, on_result, pool):
            super().run(job, tasks, on_result, pool)
            manifest = job.folder.rsplit("/", 1)[0] + "/manifest.json"
            Live.listed.append(len(wait_until(
                lambda: json.loads(open(manifest).read())["shards"] if os.path.exists(manifest) else [])))

    return Live


@pytest.mark.parametrize("base", [LocalEngine, PolledEngine], ids=["handed back", "polled"])
def test_results_reach_the_manifest_while_the_job_runs(sample_dir, tmp_path, base):
    out = tmp_path / "out"
    out.mkdir()
    engine = live_manifest_engine(base)
    convert(request_for(sample_dir, out, engine))
    assert engine.listed and engine.listed[0] >= 1


class LosingAndStray(LocalEngine):
    def run(self, job, tasks, on_result, pool):
        super().run(job, list(tasks)[:-1], on_result, pool)
        with open(os.path.join(job.results, "train-00099-of-00100.json"), "w") as f:
            json.dump({"job": job.id, "task": 99, "key": "train-00099-of-00100", "result": []}, f)


def test_a_result_missing_and_one_not_planned_are_both_named(sample_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(BuildError) as raised:
        convert(request_for(sample_dir, out, LosingAndStray))
    assert str(raised.value) == (
        "1 local worker process ran the job, but 1 of 6 shards have no result (validation-00001-of-00002); results "
        "that are not this job's: train-00099-of-00100; run the same command again to write them")


def test_what_the_driver_keeps_of_each_task(sample_dir, tmp_path):
    from imagenet_build.writer.dispatch import Planned, _Drawn
    from imagenet_build.writer.shard_writer import ShardWriteTask

    request = request_for(sample_dir, tmp_path, LocalEngine)
    from imagenet_build.catalog.classes import load_catalog
    from imagenet_build.plan import SplitPlan
    from imagenet_build.sources import scan_class_folders
    from imagenet_build.writer.convert_run import _shard_task  # noqa: F401  (the tasks convert draws)

    catalog = load_catalog(sample_dir / "labels.txt")
    plan = SplitPlan(scan_class_folders("train", sample_dir / "train", catalog, "fail"), catalog, {}, 4, 2)
    drawn = _Drawn(ShardWriteTask(plan.spec(k), (request.dest,), "fail") for k in range(4))
    tasks = list(drawn)
    assert drawn.keys == plan.names == [task.key for task in tasks]
    assert drawn.planned[plan.names[2]] == Planned((request.dest,), len(plan.spec(2).entries))


def test_names_are_three_then_more():
    assert _names(["a", "b", "c"]) == "a, b, c" and _names(["a", "b", "c", "d"]) == "a, b, c ..."


# ------------------------------------------------------------------ an earlier job's receipts, for resume


ENTRY = {"split": "train", "name": "train-00000-of-00001", "records": 1, "bytes": 10, "sha256": "a" * 64,
         "index_sha256": "b" * 64, "skipped": [], "reencoded": []}


def plant(output, job, key, result):
    folder = os.path.join(job_folder(str(output)), RESULTS, job)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, key + ".json"), "w") as f:
        json.dump({"job": job, "task": 0, "key": key, "result": result}, f)


def test_an_earlier_jobs_receipts_go_to_the_build_they_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    top, small = destination("out", None), destination("out/shorter-96", None)  # relative: receipts name them whole
    plant(tmp_path / "out", "1" * 16, "train-00000-of-00001", [[str(tmp_path / "out"), ENTRY, "state"],
                                                                [str(tmp_path / "out" / "shorter-96"), ENTRY, "s2"]])
    plant(tmp_path / "out", "2" * 16, "train-00001-of-00001", [[str(tmp_path / "elsewhere"), ENTRY, "state"]])
    found = earlier_shards("out", [top, small])
    assert found == {top: [ShardWriteResult(ENTRY, "state")], small: [ShardWriteResult(ENTRY, "s2")]}


@pytest.mark.parametrize("result", [
    lambda out: {"not": "a list"}, lambda out: ["not an item"], lambda out: [[out, ENTRY]],
    lambda out: [[1, ENTRY, "state"]], lambda out: [[out, ENTRY, 5]], lambda out: [[out, ENTRY, "s", "more"]],
    lambda out: [[out, dict(ENTRY, records="many"), "state"]], lambda out: [[out, "not an entry", "state"]],
], ids=["object", "item not a list", "two fields", "output not a string", "state not a string", "four fields",
        "entry of the wrong shape", "entry not an object"])
def test_a_receipt_this_version_did_not_write_vouches_for_nothing(tmp_path, result):
    out = destination(str(tmp_path / "out"), None)
    plant(tmp_path / "out", "1" * 16, "k", result(out.output))
    plant(tmp_path / "out", "1" * 16, "sound", [[out.output, ENTRY, "state"]])
    assert earlier_shards(out.output, [out]) == {out: [ShardWriteResult(ENTRY, "state")]}


def test_a_sound_result_after_a_broken_one_in_one_receipt_counts(tmp_path):
    out = destination(str(tmp_path / "out"), None)
    plant(tmp_path / "out", "1" * 16, "k", [["not", "a result"], [out.output, ENTRY, "state"]])
    assert earlier_shards(out.output, [out]) == {out: [ShardWriteResult(ENTRY, "state")]}


def test_an_earlier_jobs_receipts_on_an_object_store(bucket):
    import fsspec

    out = destination(f"{bucket}/out", None)
    fs, _ = fsspec.core.url_to_fs(out.output)
    receipt = {"job": "1" * 16, "task": 0, "key": "k", "result": [[out.output, ENTRY, "state"]]}
    fs.pipe_file(f"{job_folder(out.output)}/{RESULTS}/{'1' * 16}/k.json", json.dumps(receipt).encode())
    assert earlier_shards(out.output, [out]) == {out: [ShardWriteResult(ENTRY, "state")]}


def test_overwrite_forgets_an_earlier_jobs_receipts(sample_dir, converted, tmp_path):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(converted, out)
    manifest = manifest_of(out)
    results = [[str(out), entry, manifest["inputs"]["shards"][entry["name"]]] for entry in manifest["shards"]]
    for entry, result in zip(manifest["shards"], results):
        plant(out, "1" * 16, entry["name"], [result])
    (out / "manifest.json").unlink()
    kept = run_process(*sample_args(sample_dir, out, "--workers", 1, "--json"))
    assert json.loads(kept.stdout)["shards_kept"] == 6  # the receipts vouched for every shard
    for entry, result in zip(manifest["shards"], results):
        plant(out, "1" * 16, entry["name"], [result])
    again = run_process(*sample_args(sample_dir, out, "--workers", 1, "--json", "--overwrite"))
    assert json.loads(again.stdout)["shards_kept"] == 0
    assert tree_digest(out) == tree_digest(converted)
