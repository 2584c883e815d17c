"""Beam as on a cluster: Beam's own job service runs the job, and its SDK workers run in a mount namespace where
the driver's files do not exist (the test's folders are an empty tmpfs there). Inputs and output are on the real S3
server on loopback, the only place both sides see. Neither side can import boto3: results travel through the
output's own storage (fsspec), never through Beam's file systems.
"""

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import run_process
from imagenet_build.tools.sample_dataset import make_sample

pytestmark = pytest.mark.slow
ARCHIVES = ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar", "ILSVRC2012_bbox_train_v2.tar.gz")
NO_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, process, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "the Beam service ended as it started"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    pytest.fail(f"nothing listens on port {port}")


@contextlib.contextmanager
def started(command, port, env=None):
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        wait_for_port(port, process)
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 9)  # the service and the SDK workers it started
        process.wait()


@pytest.fixture(scope="module")
def no_boto3():
    """A folder whose sitecustomize makes `import boto3` fail, outside the test's folders (the workers see it)."""
    folder = tempfile.mkdtemp(prefix="imagenet-build-no-boto3-")
    Path(folder, "sitecustomize.py").write_text("import sys\nsys.modules['boto3'] = None\n")
    yield folder
    shutil.rmtree(folder)


@pytest.fixture(scope="module")
def job_service(s3_server, no_boto3):
    port = free_port()
    env = dict(os.environ, PYTHONPATH=no_boto3)
    command = [sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main", "--port", str(port)]
    pytest.importorskip("apache_beam")
    with started(command, port, env):
        yield f"localhost:{port}"


@contextlib.contextmanager
def worker_pool(hidden, no_boto3, credentials=True):
    """Beam's SDK worker pool in a mount namespace of its own, `hidden` (the driver's files) an empty tmpfs there."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("a mount namespace for the workers needs root and unshare")
    port = free_port()
    env = dict(os.environ, PYTHONPATH=no_boto3, AWS_EC2_METADATA_DISABLED="true",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # its workers run `python`
    if not credentials:
        for name in NO_CREDENTIALS:
            env.pop(name, None)
        env["HOME"] = "/nonexistent"  # no ~/.aws either
    inner = (f"mount -t tmpfs none {hidden} && exec {sys.executable} -m "
             f"apache_beam.runners.worker.worker_pool_main --service_port={port}")
    with started(["unshare", "--mount", "--propagation", "private", "sh", "-c", inner], port, env):
        yield f"localhost:{port}"


@pytest.fixture(scope="module")
def archives_in_a_bucket(s3_server, tmp_path_factory):
    import boto3

    sample = tmp_path_factory.mktemp("portable-sample")
    make_sample(sample, classes=3, per_class=6, validation_per_class=2, tarballs=True)
    boto3.client("s3").create_bucket(Bucket="portable")
    for name in ARCHIVES:
        boto3.client("s3").upload_file(str(sample / name), "portable", name)
    return sample


def convert_args(sample, out):
    return ["convert", *[arg for name in ARCHIVES for arg in ("--from", f"s3://portable/{name}")],
            "--labels-file", sample / "labels.txt", "--validation-labels-file", sample / "validation_labels.txt",
            "--train-shards", 2, "--validation-shards", 2, "--layout-threads", 2, "--output-dir", out]


def beam_options(job_endpoint, pool):
    return ["--runner", "beam", "--beam-options",
            f"--runner PortableRunner --job_endpoint {job_endpoint} --environment_type EXTERNAL "
            f"--environment_config {pool}"]


def s3_digest(url):
    import hashlib

    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    fs.invalidate_cache()
    return {path[len(root) + 1:]: hashlib.sha256(fs.cat_file(path)).hexdigest() for path in sorted(fs.find(root))}


def test_workers_that_cannot_see_the_drivers_disk_write_the_local_runs_bytes(archives_in_a_bucket, job_service,
                                                                              no_boto3, tmp_path_factory):
    sample = archives_in_a_bucket
    local = run_process(*convert_args(sample, "s3://portable/local"), "--workers", 2)
    assert local.returncode == 0, local.stderr
    env = dict(os.environ, PYTHONPATH=no_boto3)
    with worker_pool(tmp_path_factory.getbasetemp(), no_boto3) as pool:
        result = run_process(*convert_args(sample, "s3://portable/beam"), *beam_options(job_service, pool),
                             "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["shards_written"] == 4
    assert s3_digest("s3://portable/beam") == s3_digest("s3://portable/local")  # the manifest included


def test_a_worker_without_credentials_is_one_line_naming_what_is_missing(archives_in_a_bucket, job_service,
                                                                          no_boto3, tmp_path_factory):
    sample = archives_in_a_bucket
    with worker_pool(tmp_path_factory.getbasetemp(), no_boto3, credentials=False) as pool:
        result = run_process(*convert_args(sample, "s3://portable/no-credentials"),
                             *beam_options(job_service, pool), env=dict(os.environ, PYTHONPATH=no_boto3))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error: s3://portable/no-credentials/")
    assert errors[0].endswith(": NoCredentialsError: Unable to locate credentials")
