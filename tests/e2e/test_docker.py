"""The CPU Docker image built and run for real by scripts/docker_test.sh, where a Docker engine answers.

The GPU image (several GB of TensorFlow and CUDA wheels) is built and run by
`scripts/docker_test.sh gpu`, outside the test suite: see docs/docker.md.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def engine_problem():
    """Why no Docker engine can be used here, or None when one answers."""
    if not shutil.which("docker"):
        return "no docker command on PATH"
    info = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True)
    if info.returncode != 0:
        lines = (info.stderr or info.stdout).strip().splitlines()
        return "no Docker engine answers: " + (lines[-1] if lines else f"docker info exited {info.returncode}")
    return None


@pytest.mark.slow
def test_cpu_image_built_and_run_as_a_user_would():
    problem = engine_problem()
    if problem:
        pytest.skip(problem)
    name = f"imagenet-build-test-{os.getpid()}"
    env = dict(os.environ, PYTHON=sys.executable, IMAGE_NAME=name)
    try:
        result = subprocess.run([str(ROOT / "scripts" / "docker_test.sh"), "cpu"], capture_output=True, text=True,
                                env=env, timeout=1200)
    finally:
        subprocess.run(["docker", "rmi", f"{name}:latest"], capture_output=True)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    for line in ("byte-identical to the host's build", "verify /out/tfrecord as the image's default user",
                 "told to use --user", "ILSVRC2012_img_val.tar: missing", "refused before converting",
                 "docker stop mid-convert", "docker kill mid-convert", "all checks passed (cpu)"):
        assert line in report, report
