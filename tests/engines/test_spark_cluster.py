"""Spark on a standalone cluster, as a user runs one: a master and two workers started here on 127.0.0.1 with the
launcher pyspark ships (bin/spark-class), each worker its own JVM launching executors in a folder of its own, and
convert run with `--spark-master spark://...` from another folder. The workers' `python3` is a Python without
imagenet-build, as on a cluster node where it was not installed."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from test_engines import MORE_SHARDS, more_shards, receipts  # noqa: F401  (more_shards: a fixture)
from test_spark_options import needs_spark, python_without_imagenet_build

from conftest import Run, alive, children_of, sample_args, tree_digest, wait_until_gone

WAIT = 180  # seconds a JVM may take to start on a loaded machine, only so that a hang fails


class Cluster:
    """A standalone master and its workers, each in a process group of its own (a worker's executors in its)."""

    def __init__(self, folder):
        from pyspark.find_spark_home import _find_spark_home

        self.folder, self.workers = folder, {}
        self.launcher = os.path.join(_find_spark_home(), "bin", "spark-class")
        python_without_imagenet_build(folder / "bin")
        self.env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
        self.env.update(PATH=f"{folder / 'bin'}:{os.environ['PATH']}", SPARK_LOCAL_IP="127.0.0.1",
                        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
        self.master = self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", "0", "--webui-port", "0")
        self.url = self._said("master", r"Starting Spark master at (spark://\S+)")
        self.ui = "http://127.0.0.1:" + self._said("master", r"MasterWebUI.* started at http://\S+:(\d+)")

    def _start(self, name, *args):
        with open(self.folder / f"{name}.log", "w") as log:
            return subprocess.Popen([self.launcher, *args], stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                    start_new_session=True)

    def _said(self, name, pattern):
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            found = re.search(pattern, (self.folder / f"{name}.log").read_text())
            if found:
                return found.group(1)
            time.sleep(0.2)
        pytest.fail(f"the Spark {name} did not start: {(self.folder / f'{name}.log').read_text()[-2000:]}")

    def start_worker(self):
        name = f"worker-{len(self.workers)}"
        worker = self._start(name, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                             "--memory", "1g", "--webui-port", "0", "--work-dir", str(self.folder / name), self.url)
        self.workers[worker.pid] = worker

    def alive_workers(self):
        with urllib.request.urlopen(self.ui + "/json/", timeout=30) as answer:
            return json.load(answer)["aliveworkers"]

    def ready(self, count=2):
        """`count` workers registered with the master, starting those missing."""
        while len([w for w in self.workers.values() if w.poll() is None]) < count:
            self.start_worker()
        deadline = time.monotonic() + WAIT
        while self.alive_workers() < count:
            assert time.monotonic() < deadline, "the Spark workers did not register with the master"
            time.sleep(0.5)

    def executors(self):
        """{pid: its worker's pid} of the executor JVMs the workers run."""
        return {pid: worker for worker in self.workers for pid in children_of(worker)
                if b"CoarseGrainedExecutorBackend" in open(f"/proc/{pid}/cmdline", "rb").read()}

    def stop(self):
        for process in [self.master, *self.workers.values()]:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    needs_spark()
    made = Cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield made
    finally:
        made.stop()


def cluster_args(sample_dir, cluster, *more):
    return [*sample_args(sample_dir, "out", *MORE_SHARDS), "--runner", "spark", "--spark-master", cluster.url,
            "--shared-filesystem", *more]


@pytest.mark.slow
def test_the_executors_python3_without_imagenet_build_is_named_in_one_line(sample_dir, cluster, tmp_path,
                                                                             monkeypatch):
    """No `spark.pyspark.python`: the executors run the nodes' `python3`, which cannot import imagenet-build; the
    line says so (it said only which Py4J call failed)."""
    cluster.ready()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    with Run(*cluster_args(sample_dir, cluster, "--spark-conf", "spark.task.maxFailures=1")) as run:
        code, _, err = run.finish(seconds=600)
    assert code == 1
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: the Spark job failed: ModuleNotFoundError: No module named 'imagenet_build' (Spark's log: "), err
    assert "shards have no result (" in lines[0]
    os.unlink(re.search(r"\(Spark's log: (\S+)\)", lines[0]).group(1))


@pytest.mark.slow
def test_a_cluster_writes_the_local_build_to_a_relative_output_and_survives_a_lost_worker(
        sample_dir, more_shards, cluster, tmp_path, monkeypatch):  # noqa: F811
    """A relative --output-dir (workers run in folders of their own: the job is theirs by its absolute path), the
    executors' Python and environment from --spark-conf, and a worker lost mid-job (its executor with it): Spark
    runs its tasks on the other, and the build is the local one's, byte for byte."""
    cluster.ready()
    monkeypatch.chdir(tmp_path)
    mark = uuid.uuid4().hex
    args = cluster_args(sample_dir, cluster, "--spark-conf", f"spark.pyspark.python={sys.executable}",
                        "--spark-conf", f"spark.executorEnv.IMAGENET_BUILD_TEST_MARK={mark}")
    out = tmp_path / "out"
    with Run(*args) as run:
        run.wait_for(lambda r: receipts(out) and cluster.executors(), seconds=WAIT)
        executor, worker = next(iter(cluster.executors().items()))
        marked = f"IMAGENET_BUILD_TEST_MARK={mark}".encode() in open(f"/proc/{executor}/environ", "rb").read()
        reported_before = len(receipts(out))
        os.kill(worker, signal.SIGKILL)
        code, _, err = run.finish(seconds=600)
    assert marked, "spark.executorEnv.* did not reach the executors"
    assert reported_before < 20, "the job had ended before a worker was lost: make it longer"
    assert code == 0, err
    assert tree_digest(out) == tree_digest(more_shards)
    left = wait_until_gone([pid for pid in cluster.executors() if alive(pid)], seconds=60)
    assert left == [], "executors outlived their application"
