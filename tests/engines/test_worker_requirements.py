"""What a remote Beam worker installs (worker-requirements.txt, docs/scaling.md's Dataflow command) is complete and
pinned as constraints.txt pins it: a fresh environment holding exactly it and imagenet-build converts."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import sample_args, tree_digest

ROOT = Path(__file__).resolve().parents[2]


def pins(path):
    """{normalised name: version} of a file of `name==version` lines (markers after ';' left out)."""
    found = {}
    for line in Path(path).read_text().splitlines():
        line = line.split(";")[0].strip()
        if line and not line.startswith("#"):
            name, version = line.split("==")
            found[re.sub(r"[-_.]+", "-", name).lower()] = version
    return found


def test_the_workers_requirements_are_pinned_as_the_constraints():
    workers, constraints = pins(ROOT / "worker-requirements.txt"), pins(ROOT / "constraints.txt")
    assert {"s3fs", "gcsfs", "fsspec", "pillow", "google-crc32c"} <= set(workers)
    assert {name: version for name, version in workers.items() if constraints.get(name) != version} == {}
    assert "apache-beam" not in workers and "imagenet-build" not in workers  # Beam stages itself and the package


@pytest.mark.slow
def test_a_fresh_environment_of_exactly_the_workers_requirements_converts(sample_dir, converted, tmp_path):
    venv = tmp_path / "worker"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    python = venv / "bin" / "python"

    def pip(*args):
        result = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", *map(str, args)],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr

    pip("-r", ROOT / "worker-requirements.txt")
    pip(ROOT)
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout  # nothing a package needs is missing
    imports = subprocess.run([python, "-c", "import s3fs, gcsfs, imagenet_build.engines.job"], capture_output=True,
                             text=True)
    assert imports.returncode == 0, imports.stderr
    out = tmp_path / "out"
    result = subprocess.run([python, "-m", "imagenet_build", *sample_args(sample_dir, out, "--workers", 2)],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert tree_digest(out) == tree_digest(converted)
