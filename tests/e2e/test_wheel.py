"""`python -m build` makes a wheel and an sdist carrying the package data, and the wheel, installed in a fresh
environment outside the clone, runs sample, convert and verify and names its version in what it writes; mypy reads
its functions' signatures there (it is typed); a missing extra's hint names the wheel.

No network: the fresh environment finds the installed dependencies through a folder linking those of the test
environment (every one but imagenet-build itself), and pip installs the wheel with --no-index, resolving its
declared dependencies against them."""

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = importlib.metadata.version("imagenet-build")


def source_files():
    """The clone's files as a release takes them: git's (tracked, and new ones not ignored), else the tree
    without the environment and git's own folder."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True)
    if listed.returncode == 0:
        return [name for name in listed.stdout.splitlines() if (ROOT / name).is_file()]
    return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
            if p.is_file() and not {".venv", ".git", "__pycache__"} & set(p.relative_to(ROOT).parts)]


def run(*args, cwd, env=None):
    result = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, env=env)
    assert result.returncode == 0, f"{args}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result.stdout


LEFT_OUT = ("matplotlib",)  # the report extra's: a missing extra, as a wheel's user meets it


def dependencies_folder(where):
    """A folder linking every installed package of this environment except imagenet-build (its editable
    install would shadow the wheel's) and the report extra's matplotlib."""
    where.mkdir()
    for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for entry in Path(site).iterdir():
            name = entry.name.lower().replace("-", "_")
            if not name.startswith(("imagenet_build", "__editable__", *LEFT_OUT)) and not (where / entry.name).exists():
                (where / entry.name).symlink_to(entry)
    return where


@pytest.mark.slow
def test_the_wheel_runs_sample_convert_and_verify_outside_the_clone(tmp_path):
    src, dist, work = tmp_path / "src", tmp_path / "dist", tmp_path / "work"
    files = source_files()
    for name in files:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, cwd=src)  # the sdist, the wheel from it
    wheel, = dist.glob(f"imagenet_build-{VERSION}-py3-none-any.whl")
    sdist, = dist.glob(f"imagenet_build-{VERSION}.tar.gz")
    data = sorted(name for name in files if name.startswith("imagenet_build/data/"))
    assert len(data) >= 5  # the labels, metadata and validation files, the subsets
    with zipfile.ZipFile(wheel) as z:
        assert set(data) <= set(z.namelist())
    with tarfile.open(sdist) as t:
        assert {f"imagenet_build-{VERSION}/{name}" for name in data} <= set(t.getnames())

    fresh = tmp_path / "fresh"
    run(sys.executable, "-m", "venv", "--without-pip", fresh, cwd=tmp_path)
    python = fresh / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path).strip())
    (site / "dependencies.pth").write_text(f"{dependencies_folder(tmp_path / 'dependencies')}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run(python, "-m", "pip", "install", "--no-index", "--disable-pip-version-check", wheel, cwd=tmp_path, env=env)
    with zipfile.ZipFile(wheel) as z:
        assert "imagenet_build/py.typed" in z.namelist()  # PEP 561: a type checker reads the installed signatures
    (tmp_path / "typed.py").write_text("import imagenet_build\nimagenet_build.verify('b', quik=True)\n")
    typed = subprocess.run([python, "-m", "mypy", "--cache-dir", tmp_path / "mypy", "typed.py"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert 'Unexpected keyword argument "quik" for "verify"' in typed.stdout, typed.stdout + typed.stderr

    work.mkdir()
    tool = str(fresh / "bin" / "imagenet-build")
    where = run(python, "-c", "import imagenet_build; print(imagenet_build.__file__)", cwd=work, env=env)
    assert Path(where.strip()).is_relative_to(site)
    assert run(tool, "--version", cwd=work, env=env) == f"imagenet-build, version {VERSION}\n"
    made = json.loads(run(tool, "sample", "s", "--classes", 3, "--json", cwd=work, env=env))
    run(tool, "convert", "--from", "s", "--labels-file", "s/labels.txt", "--validation-labels-file",
        "s/validation_labels.txt", "--train-shards", 2, "--validation-shards", 2, "--layout-threads", 2,
        "--output-dir", "b", cwd=work, env=env)
    report = json.loads(run(tool, "verify", "b", "--json", cwd=work, env=env))
    assert report["ok"] and report["summary"]["records"] == made["train"] + made["validation"]
    assert report["imagenet_build_version"] == VERSION
    assert json.loads((work / "b" / "manifest.json").read_text())["imagenet_build_version"] == VERSION
    assert (work / "b" / "features.json").is_file() and (work / "b" / "dataset_info.json").is_file()
    missing = subprocess.run([tool, "report", "b"], cwd=work, env=env, capture_output=True, text=True)
    assert missing.returncode == 1 and missing.stderr == (  # the hint for a clone was wrong here
        f"error: imagenet-build report needs matplotlib, which is not installed: pip install -c constraints.txt "
        f"'{wheel.name}[report]' (the wheel imagenet-build was installed from, and the constraints.txt of the "
        "clone it was made in)\n")
