"""Every engine (--runner) as a user runs it: the local build's bytes, what finished kept when the job fails or is
stopped, every result counted, and nothing that cannot run started at all.

Each engine runs here for real: worker processes, Apache Beam's FnApiRunner with two worker processes, and an
Apache Spark local cluster (separate executor JVMs, killed in a test as a cluster loses a machine).
"""

import json
import os
import signal

import pytest

from conftest import Run, run_process, sample_args, tree_digest, wait_until_gone
from helpers import request_for
from imagenet_build.engines import ENGINE_NAMES
from imagenet_build.engines.local import LocalEngine
from imagenet_build.engines.spark import find_java
from imagenet_build.infra.errors import BuildError
from imagenet_build.request import ConvertOptions, convert_request
from imagenet_build.writer.convert_run import convert

# how each registered engine runs here: more than one worker process (or executor JVM) each
ENGINE_ARGS = {
    "local": ["--workers", "2"],
    "beam": ["--beam-options", "--runner FnApiRunner --direct_running_mode=multi_processing --direct_num_workers=2"],
    "spark": ["--spark-master", "local-cluster[2,1,1024]"],
}
ENGINE_NEEDS = {"beam": "apache_beam", "spark": "pyspark"}
MORE_SHARDS = ["--train-shards", "16", "--validation-shards", "4"]  # 3-4 images a shard: a job with time to stop


def engine_args(engine):
    if engine in ENGINE_NEEDS:
        pytest.importorskip(ENGINE_NEEDS[engine])
    if engine == "spark" and find_java() is None:
        pytest.skip("no Java for Spark (scripts/test.sh installs Debian's openjdk-17-jre-headless where it may)")
    return ["--runner", engine, *ENGINE_ARGS[engine]]


def receipts(out):
    return sorted((out / ".convert-job" / "results").glob("*/*.json"))


def shards_of(out):
    return sorted(p.name for p in out.glob("*") if p.name.startswith(("train-", "validation-")))


def test_every_registered_engine_is_held_here():
    assert set(ENGINE_ARGS) == set(ENGINE_NAMES) and ENGINE_NAMES[0] == "local"


@pytest.fixture(scope="module")
def more_shards(sample_dir, tmp_path_factory):
    """The sample in 20 shards, written by the local engine: what every engine must write."""
    out = tmp_path_factory.mktemp("more-shards")
    result = run_process(*sample_args(sample_dir, out, "--workers", 2, *MORE_SHARDS))
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_each_engine_writes_the_local_builds_bytes_and_leaves_nothing_running(engine, sample_dir, converted,
                                                                              tmp_path):
    out = tmp_path / "out"
    spark_work = spark_work_folders()
    with Run(*sample_args(sample_dir, out, *engine_args(engine), "--json")) as run:
        code, stdout, err = run.finish()
        left = wait_until_gone(run.processes())
    assert code == 0, err
    assert json.loads(stdout)["shards_written"] == 6
    assert tree_digest(out) == tree_digest(converted)  # the manifest included; no job folder left
    assert left == [], "processes of the run outlived it"
    assert err == ""  # nor Beam's workers' start-up lines, nor a library's warnings
    assert spark_work_folders() - spark_work == set()  # local-cluster's executors in a temporary folder


def spark_work_folders():
    """The folders Spark's standalone workers leave in the Spark home they run from (pyspark's package)."""
    try:
        import pyspark
    except ImportError:
        return set()
    work = os.path.join(os.path.dirname(pyspark.__file__), "work")
    return set(os.listdir(work)) if os.path.isdir(work) else set()


@pytest.mark.slow
def test_spark_retries_the_tasks_of_an_executor_killed_mid_job(sample_dir, more_shards, tmp_path):
    """A cluster loses a machine: Spark runs its tasks again elsewhere, and the build comes out the same."""
    out = tmp_path / "out"
    with Run(*sample_args(sample_dir, out, *engine_args("spark"), *MORE_SHARDS)) as run:
        run.wait_for(lambda r: receipts(out) and executors(r), seconds=180)
        reported_before = len(receipts(out))
        os.kill(executors(run)[0], signal.SIGKILL)
        code, _, err = run.finish()
        left = wait_until_gone(run.processes())
    assert reported_before < 20, "the job had ended before an executor was killed: make it longer"
    assert code == 0, err
    assert tree_digest(out) == tree_digest(more_shards)
    assert left == []


def executors(run):
    return [pid for pid, line in run.commands().items() if "CoarseGrainedExecutorBackend" in line]


@pytest.mark.slow
def test_a_beam_worker_killed_fails_the_job_naming_the_shards_not_written(sample_dir, more_shards, tmp_path):
    """Beam's local runner gives up when its workers die (the machine's OOM killer): one line naming the shards
    without a result; what they finished is kept, and the rerun writes only the rest. (Both are killed: Beam may
    have given every task to one of them, and the death of an idle one changes nothing.)"""
    out = tmp_path / "out"
    args = sample_args(sample_dir, out, *MORE_SHARDS)
    with Run(*args, *engine_args("beam")) as run:
        run.wait_for(lambda r: receipts(out) and len(beam_workers(r)) == 2, seconds=180)
        for worker in beam_workers(run):
            os.kill(worker, signal.SIGKILL)
        code, _, err = run.finish()
        left = wait_until_gone(run.processes())
    assert code == 1 and left == []
    errors = err.splitlines()
    assert len(errors) == 1 and errors[0].startswith("error: a worker process of Beam's local runner died (Worker "
                                                     "subprocess exited with return code "), err  # no traceback
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] is False and manifest["ended"] == "failed"
    kept = [entry["name"] for entry in manifest["shards"]]
    assert shards_of(out) == sorted(kept)
    if len(kept) < 20:  # the workers died with shards to do: the line names them
        assert "shards have no result (" in errors[0] and \
            errors[0].endswith("run the same command again to write them"), errors[0]
    else:  # on a loaded machine every task may have reported before the kill reached Beam: still a failed job
        assert errors[0].endswith("every shard reported; run the same command again to finish the build"), errors[0]
    rerun = run_process(*args, "--workers", 2, "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["shards_written"] == 20 - len(kept)
    assert tree_digest(out) == tree_digest(more_shards)


def beam_workers(run):
    return [pid for pid, line in run.commands().items() if "sdk_worker_main" in line and not line.startswith("/bin/sh")]


@pytest.mark.slow
@pytest.mark.parametrize("engine", [name for name in ENGINE_NAMES if name != "local"])
def test_the_driver_stopped_mid_job_says_so_and_the_rerun_resumes(engine, sample_dir, more_shards, tmp_path):
    """SIGTERM to the driver while its engine's workers write (the local engine's case, with its signals to the whole
    process group too: tests/e2e/test_reliability.py)."""
    out = tmp_path / "out"
    args = sample_args(sample_dir, out, *MORE_SHARDS)
    with Run(*args, *engine_args(engine), "--json") as run:
        run.wait_for(lambda r: receipts(out) or shards_of(out), seconds=180)
        code, stdout, err = run.signal("sigterm")
        left = wait_until_gone(run.processes())
    assert code == 1 and left == [], (err, left)
    assert [line for line in err.splitlines() if line.startswith("error: ")] == [
        "error: interrupted; run the same command again to resume"], err
    assert json.loads(stdout)["ok"] is False and "Traceback" not in err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ended"] == "interrupted"
    assert shards_of(out) == sorted(entry["name"] for entry in manifest["shards"])  # what is on disk is listed
    assert not (out / ".convert-job").exists()
    rerun = run_process(*args, "--workers", 2, "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["shards_kept"] == len(manifest["shards"])
    assert tree_digest(out) == tree_digest(more_shards)


@pytest.mark.slow
def test_the_receipts_of_a_killed_driver_are_kept_by_the_rerun(sample_dir, more_shards, tmp_path):
    """kill -9 of the driver: no manifest lists what the workers finished since its last write, but their receipts
    do; the rerun checks those shards as it checks the manifest's, and keeps them."""
    out = tmp_path / "out"
    args = sample_args(sample_dir, out, *MORE_SHARDS)
    with Run(*args, *engine_args("spark"), "--spark-master", "local[2]") as run:
        run.wait_for(lambda r: len(receipts(out)) >= 2, seconds=180)
        run.signal("kill-9")
        wait_until_gone(run.processes())
    reported = {path.stem for path in receipts(out)}
    listed = {entry["name"] for entry in json.loads((out / "manifest.json").read_text())["shards"]}
    assert reported - listed, "every receipt was in the manifest already: the test shows nothing"
    rerun = run_process(*args, "--workers", 2, "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["shards_kept"] >= len(reported | listed)
    assert tree_digest(out) == tree_digest(more_shards)


def test_a_forged_receipt_is_checked_like_a_manifest_entry(sample_dir, converted, tmp_path):
    """A receipt naming a shard whose bytes are not the ones it says (a worker that died mid-upload, a hand
    edit) is no reason to keep the shard: the rerun rewrites it."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(converted, out)
    manifest = json.loads((out / "manifest.json").read_text())
    entry = manifest["shards"][1]
    results = out / ".convert-job" / "results" / "0123456789abcdef"
    results.mkdir(parents=True)
    (results / f"{entry['name']}.json").write_text(json.dumps({
        "job": "0123456789abcdef", "task": 1, "key": entry["name"],
        "result": [[str(out), dict(entry, sha256="0" * 64), manifest["inputs"]["shards"][entry["name"]]]]}))
    manifest["shards"] = manifest["shards"][:1]
    manifest["complete"] = False
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = run_process(*sample_args(sample_dir, out, "--workers", 1, "--json"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["shards_kept"] == 1
    assert tree_digest(out) == tree_digest(converted)


class LosingEngine(LocalEngine):
    """An engine that says it ran the job but never ran its last task (a lost result)."""

    def run(self, job, tasks, on_result, pool):
        super().run(job, list(tasks)[:-1], on_result, pool)


class StrayEngine(LocalEngine):
    """An engine whose job leaves a result no task of the plan has."""

    def run(self, job, tasks, on_result, pool):
        super().run(job, tasks, on_result, pool)
        with open(os.path.join(job.results, "train-00099-of-00100.json"), "w") as f:
            json.dump({"job": job.id, "task": 99, "key": "train-00099-of-00100", "result": []}, f)


@pytest.mark.parametrize("engine,message", [
    (LosingEngine, "1 local worker process ran the job, but 1 of 6 shards have no result "
                   "(validation-00001-of-00002); run the same command again to write them"),
    (StrayEngine, "1 local worker process ran the job, but results that are not this job's: train-00099-of-00100; "
                  "run the same command again to write them"),
])
def test_a_result_missing_or_not_planned_fails_the_run(sample_dir, converted, tmp_path, engine, message):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(BuildError) as raised:
        convert(request_for(sample_dir, out, engine))
    assert str(raised.value) == message
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] is False and manifest["ended"] == "failed" and manifest["error"] == message
    rerun = run_process(*sample_args(sample_dir, out, "--workers", 1, "--json"))
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["shards_written"] == (1 if engine is LosingEngine else 0)
    assert tree_digest(out) == tree_digest(converted)


# ------------------------------------------------------------------ what cannot run is refused before any listing


def test_spark_without_java_is_one_line_before_anything_is_read(tmp_path):
    pytest.importorskip("pyspark")
    result = run_process("convert", "--runner", "spark", "--train-dir", tmp_path / "nothing-here",
                         "--output-dir", tmp_path / "out", env=dict(os.environ, JAVA_HOME=str(tmp_path)))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: --runner spark needs Java 17 or newer, and there is no java in JAVA_HOME: set JAVA_HOME, or install "
        "it (Debian: apt-get install openjdk-17-jre-headless)"]
    assert not (tmp_path / "out").exists()


def test_a_java_too_old_is_named(tmp_path):
    pytest.importorskip("pyspark")
    (tmp_path / "bin").mkdir()
    java = tmp_path / "bin" / "java"
    java.write_text('#!/bin/sh\necho \'openjdk version "1.8.0_392"\' >&2\n')
    java.chmod(0o755)
    result = run_process("convert", "--runner", "spark", "--train-dir", tmp_path / "nothing-here",
                         "--output-dir", tmp_path / "out", env=dict(os.environ, JAVA_HOME=str(tmp_path)))
    assert result.returncode == 1
    assert f"and {java} is Java 8: set JAVA_HOME" in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("module,runner,fragment", [
    ("pyspark", ["--runner", "spark"], "--runner spark needs Apache Spark (pyspark), which is not installed: in a "
                                       "clone of imagenet-build, pip install -c constraints.txt '.[spark]'"),
    ("apache_beam", ["--runner", "beam"], "--runner beam needs Apache Beam, which is not installed: in a clone of "
                                          "imagenet-build, pip install -c constraints.txt '.[beam]'"),
    ("apache_beam.runners.dataflow.internal.apiclient",
     ["--runner", "beam", "--beam-options", "--runner DataflowRunner --project p --temp_location gs://b/t"],
     "pip install -c constraints.txt '.[dataflow]'"),
])
def test_a_missing_engine_package_is_one_line_before_anything_is_read(tmp_path, module, runner, fragment):
    import subprocess
    import sys

    code = ("import sys; sys.modules[sys.argv[1]] = None\n"
            "from imagenet_build.cli import main; sys.argv = ['imagenet-build'] + sys.argv[2:]; main()")
    args = ["convert", *runner, "--from", "gs://b/nothing-here", "--output-dir", "gs://b/out"]
    result = subprocess.run([sys.executable, "-c", code, module, *args], capture_output=True, text=True)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr


def test_a_local_output_for_workers_elsewhere_is_refused_unless_shared(tmp_path, sample_dir):
    pytest.importorskip("pyspark")
    args = sample_args(sample_dir, tmp_path / "out", "--runner", "spark", "--spark-master", "spark://nowhere:7077")
    result = run_process(*args)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: --output-dir {tmp_path / 'out'} is a local path, and Apache Spark "
                                    "(spark://nowhere:7077) may run its workers on other machines")
    assert not (tmp_path / "out").exists()
    options = ConvertOptions(output_dir=str(tmp_path / "out"), train_dir=str(sample_dir / "train"),
                             labels_file=str(sample_dir / "labels.txt"), train_shards=4, layout_threads=2,
                             runner="spark", engine_options=(("spark_master", "spark://nowhere:7077"),
                                                             ("shared_filesystem", True)))
    assert convert_request(options).engine.describe() == "Apache Spark (spark://nowhere:7077)"
